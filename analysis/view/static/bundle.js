// judgescope viewer bundle: the list of judged items drawn from window.JUDGESCOPE (data.js), with the served
// viewer's filters, sorts and pages; the state lives in the URL's hash, so back/forward and links work from
// file://. Every text is set as textContent (model output is never read as HTML).
(function () {
  "use strict";
  const D = window.JUDGESCOPE;
  const form = document.getElementById("filters");
  const FIGURES = ["spread", "judge_judge", "judge_human", "mode_shift"];

  function state() {
    const params = new URLSearchParams(location.hash.slice(1));
    const out = { sort: params.get("sort") || D.default_sort, offset: Math.max(0, parseInt(params.get("offset") || "0", 10) || 0) };
    D.filters.forEach((c) => { out[c] = params.get(c) || ""; });
    return out;
  }

  function go(change) {
    const next = Object.assign(state(), change);
    const params = new URLSearchParams();
    Object.keys(next).forEach((k) => { if (next[k] !== "" && !(k === "offset" && next[k] === 0)) params.set(k, next[k]); });
    location.hash = params.toString();
  }

  function select(name, label, options, value) {
    const wrap = document.createElement("label");
    wrap.append(label);
    const menu = document.createElement("select");
    menu.name = name;
    options.forEach(([v, text]) => {
      const option = document.createElement("option");
      option.value = v;
      option.textContent = text;
      option.selected = v === value;
      menu.append(option);
    });
    menu.addEventListener("change", () => go({ [name]: menu.value, offset: 0 }));
    wrap.append(menu);
    form.append(wrap);
  }

  function compareKeys(a, b) {
    for (const k of D.keys) {
      const x = String(a[k]), y = String(b[k]);
      if (x !== y) return x < y ? -1 : 1;
    }
    return 0;
  }

  function sorted(rows, sort) {
    if (!(sort in D.sorts) || sort === "item") return rows.slice().sort(compareKeys);
    return rows.slice().sort((a, b) => {
      const x = a[sort], y = b[sort];
      if (x === null && y === null) return compareKeys(a, b);
      if (x === null) return 1;
      if (y === null) return -1;
      return y - x || compareKeys(a, b);
    });
  }

  function cell(row, content, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    if (content instanceof Node) td.append(content); else td.textContent = content;
    row.append(td);
    return td;
  }

  function render() {
    const s = state();
    form.textContent = "";
    D.filters.forEach((c) => select(c, c, [["", "(all)"], ...D.choices[c].map((v) => [v, v])], s[c]));
    select("sort", "sort by disagreement", Object.entries(D.sorts), s.sort);
    let rows = s.dimension ? D.by_dimension[s.dimension] || [] : D.items;
    rows = rows.filter((r) => D.filters.every((c) => c === "dimension" || !s[c] || String(r[c]) === s[c]));
    rows = sorted(rows, s.sort);
    const total = rows.length, size = D.page_size, offset = Math.min(s.offset, Math.max(0, total - 1));
    document.getElementById("total").textContent = total + " judged items";
    document.getElementById("range").textContent = (total ? offset + 1 : 0) + "–" + Math.min(offset + size, total);
    const previous = document.getElementById("previous"), next = document.getElementById("next");
    previous.hidden = offset <= 0;
    next.hidden = offset + size >= total;
    previous.onclick = (e) => { e.preventDefault(); go({ offset: Math.max(0, offset - size) }); };
    next.onclick = (e) => { e.preventDefault(); go({ offset: offset + size }); };
    const body = document.querySelector("#items tbody");
    body.textContent = "";
    rows.slice(offset, offset + size).forEach((r) => {
      const tr = document.createElement("tr");
      const link = document.createElement("a");
      link.href = "items/" + r.page + ".html";
      link.textContent = r.instance_id;
      cell(tr, link);
      cell(tr, r.candidate_id);
      const first = document.createElement("div");
      first.className = "first-line";
      first.title = r.first_line || "";
      first.textContent = r.first_line || "–";
      cell(tr, first);
      ["source", "judge", "rubric", "mode"].forEach((k) => cell(tr, r[k] === null ? "" : String(r[k])));
      const scores = cell(tr, r.scores || "–", "scores");
      if (r.perturbed) {
        const apart = document.createElement("div");
        apart.className = "muted";
        apart.textContent = r.perturbed + " perturbed rows apart";
        scores.append(apart);
      }
      FIGURES.forEach((k) => {
        const td = cell(tr, "", "num");
        const fig = document.createElement("span");
        fig.className = "fig";
        fig.textContent = r[k] === null ? "–" : r[k].toFixed(2);
        td.append(fig);
        if (r[k] !== null && r[k + "_dim"]) {
          const dim = document.createElement("span");
          dim.className = "dim muted";
          dim.title = "the dimension this figure is largest on";
          dim.textContent = r[k + "_dim"];
          td.append(dim);
        }
      });
      const parsed = document.createElement("span");
      parsed.className = r.parsed === null ? "" : r.parsed ? "ok" : "bad";
      parsed.textContent = r.parsed === null ? "–" : r.parsed ? "yes" : "no";
      cell(tr, parsed);
      cell(tr, r.experts || "–", "experts");
      body.append(tr);
    });
    if (!total) {
      const tr = document.createElement("tr");
      cell(tr, "No judged item matches these filters.").colSpan = 14;
      body.append(tr);
    }
  }

  window.addEventListener("hashchange", render);
  render();
})();
