"""experiment=robustness: re-judge a study's items under controlled, meaning-preserving perturbations.

Each run applies one `Perturbation` (conf: `robustness.perturbation`), seeded per candidate from
(robustness.seed, instance_id, candidate_id), to the generated candidates only — the reference stays as it is, so a verdict
against it moves only if the judge does. Text perturbations change `candidate_text` (stored in every results
row and, with the original, in the run's perturbations.jsonl for auditing); `order` and `labels` change how a
comparative prompt shows the same texts. Paraphrases are written by a generator judge through the same
cache as every call, and each is checked before anything is judged (`problem`): not empty, not JSON, not a
refusal, not the original unchanged, its length within `robustness.max_length_ratio` of the original's and,
when `robustness.min_similarity` is set, close enough in meaning (embedding cosine). A rejected paraphrase is
asked again with another seed, at most `robustness.max_attempts` calls in all; a candidate with none accepted
is left out of the run (with every candidate shown in the same comparative prompt), never judged on the
generator's garbage or on its own unchanged text, and counted (`perturbations.jsonl`, the manifest, a note).
`python -m analysis.robustness <multirun>` then measures shift and flip rate per judge.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments import judges  # modules, not names: tests replace make_judge and call_many
from experiments.conf_lookup import judge_config
from experiments.config import JudgeConfig, Perturbation, RobustnessConfig, StudyConfig, load
from experiments.datasets.loader import Candidate, Instance
from experiments.inputs import JobFailed, StudyError
from experiments.modes import Mode, select_candidates
from experiments.stages import candidates as gen
from judge.local.embeddings import default_embedder, l2_normalise
from judge.rubric import render_template, template_version

#: sentences that say nothing about any research question (padding raises length, never content)
PADDING = (
    "This question is stated in plain language.",
    "The wording above was prepared for this evaluation.",
    "Further details are available on request.",
    "The text was checked for spelling before submission.",
    "No additional context is provided here.",
    "The formatting follows the usual conventions.",
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
TEXT_PERTURBATIONS = frozenset({Perturbation.sentence_deletion, Perturbation.padding, Perturbation.injection})


def _rng(seed: int, instance_id: str, candidate_id: str) -> random.Random:
    """The candidate's own stream: candidate ids repeat across instances (each has a `c1`), so the instance
    id is part of the seed, else every instance's `c1` would draw the same deletion / padding."""
    return random.Random(f"{seed}:{instance_id}:{candidate_id}")


def delete_sentence(text: str, rng: random.Random) -> str:
    """One sentence removed (seeded); a one-sentence text loses its last clause after a comma, if any."""
    sentences = _SENTENCE.split(text.strip())
    if len(sentences) > 1:
        del sentences[rng.randrange(len(sentences))]
        return " ".join(sentences)
    clauses = text.rsplit(",", 1)
    return clauses[0].rstrip() + "?" if len(clauses) == 2 and text.rstrip().endswith("?") else text


def pad(text: str, rng: random.Random, n: int) -> str:
    """`n` irrelevant sentences appended, drawn (seeded) from PADDING."""
    return text.rstrip() + " " + " ".join(rng.sample(PADDING, k=min(n, len(PADDING))))


def inject(text: str, attack: str) -> str:
    """The injection attempt appended to the candidate, as a golden test's hostile text would carry it."""
    return f"{text.rstrip()} {attack}"


def text_perturber(kind: Perturbation, conf: RobustnessConfig) -> Callable[[Instance, Candidate], str]:
    """The function giving a generated candidate's perturbed text (text perturbations only)."""
    seed = conf.seed
    if kind is Perturbation.sentence_deletion:
        return lambda i, c: delete_sentence(c.text, _rng(seed, i.instance_id, c.candidate_id))
    if kind is Perturbation.padding:
        n = conf.padding_sentences
        return lambda i, c: pad(c.text, _rng(seed, i.instance_id, c.candidate_id), n)
    if kind is Perturbation.injection:
        attack = conf.injection
        return lambda i, c: inject(c.text, attack)
    raise ValueError(f"{kind.value} is not a text perturbation")


def apply(
    instances: Sequence[Instance], new_text: Callable[[Instance, Candidate], str]
) -> tuple[list[Instance], list[dict]]:
    """Instances with each generated candidate's text replaced, and the audit records (original, perturbed).
    `new_text` gets the instance too: a candidate id names a candidate only within its instance."""
    out, audit = [], []
    for inst in instances:
        cands = []
        for cand in inst.candidates:
            text = new_text(inst, cand)
            audit.append(
                {
                    "instance_id": inst.instance_id,
                    "candidate_id": cand.candidate_id,
                    "original": cand.text,
                    "perturbed": text,
                }
            )
            cands.append(dataclasses.replace(cand, text=text))
        out.append(dataclasses.replace(inst, candidates=tuple(cands)))
    return out, audit


#: how a refusal opens (checked at the start of the answer only: a paraphrase may well say "we cannot")
_REFUSAL = re.compile(
    r"^\W*(?:i['’]?m sorry|i am sorry|sorry\b|apologies|i apologi[sz]e|as an ai\b|"
    r"i (?:cannot|can ?not|can['’]t|won['’]t|will not|am unable|['’]m unable|am not able|do not|don['’]t)\b)",
    re.IGNORECASE,
)


@dataclasses.dataclass(frozen=True)
class Rules:
    """What a perturbed text must be to be judged in place of the original (`problem`)."""

    max_length_ratio: float  # characters, either way: [original / r, original * r]
    min_similarity: float | None  # embedding cosine to the original; None: not checked

    @classmethod
    def of(cls, conf: RobustnessConfig) -> Rules:
        return cls(conf.max_length_ratio, conf.min_similarity)


def _looks_like_json(text: str) -> bool:
    """An object or list (a rubric answer such as `{"score": 1}`, fenced or not), or any JSON value but a
    sentence: a number, true, null."""
    body = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", text).strip()
    if body[:1] in ("{", "["):
        return True
    try:
        return not isinstance(json.loads(body), str)
    except ValueError:
        return False


def problem(original: str, text: str, rules: Rules) -> str | None:
    """Why `text` cannot stand in for `original` (None: it can): `empty`, `json`, `refusal`, `unchanged` or
    `length`. The similarity floor needs an embedding model and is checked in a batch (`paraphrases`)."""
    text, original = text.strip(), original.strip()
    if not text:
        return "empty"
    if _looks_like_json(text):
        return "json"
    if _REFUSAL.match(text):
        return "refusal"
    if text == original:
        return "unchanged"
    ratio = len(text) / max(len(original), 1)
    if not 1 / rules.max_length_ratio <= ratio <= rules.max_length_ratio:
        return "length"
    return None


def too_far(originals: Sequence[str], texts: Sequence[str], floor: float, embedder: Any = None) -> list[bool]:
    """Per pair: is the cosine of the two texts' embeddings below `floor`? (the packaged all-MiniLM-L6-v2 unless
    an `embedder` with `.encode` is given)."""
    if not texts:
        return []
    model = embedder or default_embedder()
    try:
        a, b = l2_normalise(model.encode(list(originals))), l2_normalise(model.encode(list(texts)))
    except (RuntimeError, ImportError, OSError) as exc:  # no packaged model: one line, before any judging
        raise StudyError(f"robustness.min_similarity={floor}: {str(exc).splitlines()[0]}") from None
    return [bool(c < floor) for c in (a * b).sum(axis=1)]


@dataclasses.dataclass(frozen=True)
class Paraphrase:
    """The outcome for one candidate: the accepted text (None: every attempt was rejected) and why each
    rejected attempt was."""

    text: str | None
    rejected: tuple[str, ...] = ()


def paraphrases(
    instances: Sequence[Instance], cfg: StudyConfig, embedder: Any = None
) -> dict[tuple[str, str], Paraphrase]:
    """(instance_id, candidate_id) -> the generator judge's paraphrase, checked (`problem`, `too_far`) and asked
    again with the next seed when rejected, at most `max_attempts` calls (cached, keyed by the text itself).
    A failed call is a rejected attempt (`no answer`), never the original kept. Not candidate_id alone: two
    instances' `c1` are different texts."""
    conf = cfg.robustness
    rules, attempts = Rules.of(conf), conf.max_attempts
    gen_cfg = cfg
    if conf.generator:  # where `judge=<name>` finds it: conf/judge or a hydra.searchpath folder
        from omegaconf import OmegaConf

        found = judge_config(str(conf.generator), "robustness.generator")
        gen_cfg = dataclasses.replace(cfg, judge=load(OmegaConf.create(found), JudgeConfig))
    version = template_version("paraphrase.jinja")
    pending = [(inst.instance_id, c) for inst in instances for c in inst.candidates]
    rejected: dict[tuple[str, str], list[str]] = {(i, c.candidate_id): [] for i, c in pending}
    out: dict[tuple[str, str], Paraphrase] = {}
    judge = judges.make_judge(gen_cfg)
    try:
        for attempt in range(
            attempts
        ):  # attempt 0 is the call a run without these checks made (same cache key)
            if not pending:
                break
            requests = [
                gen.Request(
                    [{"role": "user", "content": render_template("paraphrase.jinja", text=c.text)}], version
                )
                for _, c in pending
            ]
            params = judges.sampling_params(gen_cfg) | {"seed": conf.seed + attempt}
            results = asyncio.run(gen.call_many(judge, requests, params, cfg.progress))
            texts = [(r.completion.text if r.completion else "").strip().strip('"').strip() for r in results]
            why = [
                problem(c.text, t, rules) if r.completion else "no answer"
                for (_, c), t, r in zip(pending, texts, results, strict=True)
            ]
            if rules.min_similarity is not None:
                ok = [k for k, w in enumerate(why) if w is None]
                far = too_far(
                    [pending[k][1].text for k in ok], [texts[k] for k in ok], rules.min_similarity, embedder
                )
                for k, is_far in zip(ok, far, strict=True):
                    why[k] = "similarity" if is_far else None
            still = []
            for (instance_id, cand), text, reason in zip(pending, texts, why, strict=True):
                key = (instance_id, cand.candidate_id)
                if reason is None:
                    out[key] = Paraphrase(text, tuple(rejected[key]))
                else:
                    rejected[key].append(reason)
                    still.append((instance_id, cand))
            pending = still
    finally:
        judge.cache.close()
    for instance_id, cand in pending:
        out[instance_id, cand.candidate_id] = Paraphrase(
            None, tuple(rejected[instance_id, cand.candidate_id])
        )
    return out


def shown(instances: Sequence[Instance], mode: Mode) -> list[Instance]:
    """The instances with only the generated candidates the mode will show (its `k_per_source`): a candidate
    left out must not let an unshown one take its place (nor is an unshown one worth a paraphrase call)."""
    k = mode.k_per_source
    if k is None:
        return list(instances)
    out = []
    for inst in instances:
        chosen = {id(c) for c in select_candidates(inst, k)}
        out.append(dataclasses.replace(inst, candidates=tuple(c for c in inst.candidates if id(c) in chosen)))
    return out


def left_out(instances: Sequence[Instance], failed: set[tuple[str, str]], mode: Mode) -> set[tuple[str, str]]:
    """The candidates to leave out: each failed one and, in a comparative mode, every generated candidate shown
    in the same prompt (else that prompt would show a different set of texts from the original run's)."""
    groups = getattr(mode, "groups", None)
    out = set(failed)
    for inst in instances:
        parts = groups(inst) if groups else [("", [c]) for c in inst.candidates]
        for _, cands in parts:
            generated = [c for c in cands if c is not inst.reference]
            if any((inst.instance_id, c.candidate_id) in failed for c in generated):
                out |= {(inst.instance_id, c.candidate_id) for c in generated}
    return out


def _paraphrased(
    instances: list[Instance], cfg: StudyConfig, mode: Mode
) -> tuple[list[Instance], list[dict]]:
    """perturbation=paraphrase: the instances with their accepted paraphrases and without what `left_out`
    names (an instance left with no generated candidate is dropped), and the audit records of both."""
    instances = shown(instances, mode)
    table = paraphrases(instances, cfg)
    drop = left_out(instances, {k for k, p in table.items() if p.text is None}, mode)
    kept = []
    for inst in instances:
        cands = tuple(c for c in inst.candidates if (inst.instance_id, c.candidate_id) not in drop)
        if cands or not inst.candidates:
            kept.append(dataclasses.replace(inst, candidates=cands))
    new, audit = apply(kept, lambda i, c: str(table[i.instance_id, c.candidate_id].text))
    for a in audit:
        a["rejected"] = list(table[a["instance_id"], a["candidate_id"]].rejected)
    for inst in instances:
        for c in inst.candidates:
            if (inst.instance_id, c.candidate_id) in drop:
                para = table[inst.instance_id, c.candidate_id]
                audit.append(
                    {
                        "instance_id": inst.instance_id,
                        "candidate_id": c.candidate_id,
                        "original": c.text,
                        "perturbed": para.text,
                        "left_out": True,
                        "rejected": list(para.rejected),
                    }
                )
    failed = [p for p in table.values() if p.text is None]
    if failed:
        reasons = Counter(p.rejected[-1] for p in failed if p.rejected)
        shared = (
            f", {len(drop) - len(failed)} more shown in their comparative prompts"
            if len(drop) > len(failed)
            else ""
        )
        print(
            f"note: robustness.perturbation=paraphrase: {len(drop)} of {len(table)} candidate(s) left out of this "
            f"run: {len(failed)} with no paraphrase passing the checks in robustness.max_attempts="
            f"{cfg.robustness.max_attempts} call(s) (last: "
            f"{', '.join(f'{r} {n}' for r, n in sorted(reasons.items()))}){shared}; see perturbations.jsonl",
            file=sys.stderr,
        )
    if table and not any(inst.candidates for inst in new):
        raise StudyError(
            "robustness.perturbation=paraphrase: no paraphrase passed the checks (perturbations "
            "are never judged unchecked); nothing to judge"
        )
    return new, audit


def audit_counts(audit: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """For the manifest: how many perturbed candidates were left out, and why attempts were rejected."""
    if not any("rejected" in a for a in audit):
        return {}
    reasons = Counter(r for a in audit for r in a.get("rejected", ()))
    return {
        "perturbations_left_out": sum(bool(a.get("left_out")) for a in audit),
        "perturbation_attempts_rejected": dict(sorted(reasons.items())),
    }


def perturb(instances: list[Instance], cfg: StudyConfig, mode: Mode) -> tuple[list[Instance], list[dict]]:
    """The instances this run judges, perturbed as configured, and the audit records (one per changed
    candidate: original and perturbed text, perturbation, seed) for perturbations.jsonl."""
    kind = cfg.robustness.perturbation
    if kind in (Perturbation.none, Perturbation.order, Perturbation.labels):
        return instances, []
    if kind is Perturbation.paraphrase:
        try:
            new, audit = _paraphrased(instances, cfg, mode)
        except StudyError as exc:  # the generator's failure: the sweep's other perturbations still run
            raise JobFailed(f"{exc}; {_remedy(cfg, kind)}") from None
    else:
        new, audit = apply(instances, text_perturber(kind, cfg.robustness))
    seed = cfg.robustness.seed
    return new, [{**a, "perturbation": kind.value, "seed": seed} for a in audit]


def _remedy(cfg: StudyConfig, kind: Perturbation) -> str:
    """What to change when `kind` cannot be applied: the generator that writes it, or the sweep without it."""
    rest = ",".join(p.value for p in Perturbation if p is not kind)
    generator = cfg.robustness.generator or f"null, the study's judge {cfg.judge.name}"
    return (
        f"write them with another judge (robustness.generator=<judge config>; now {generator}), or drop "
        f"{kind.value} from the sweep (robustness.perturbation={rest})"
    )


def audit_writer(audit: Sequence[Mapping[str, Any]]) -> dict[str, Callable[[Path], object]]:
    """perturbations.jsonl for the run's outputs (nothing when the run perturbed no text)."""
    if not audit:
        return {}
    text = "".join(json.dumps(a, ensure_ascii=False) + "\n" for a in audit)
    return {"perturbations.jsonl": lambda p: p.write_text(text)}


def order_seed(cfg: StudyConfig) -> int:
    """The comparative order's seed: the study's, or (perturbation=order) another one drawn from it."""
    seed = cfg.seed
    if cfg.robustness.perturbation is Perturbation.order:
        return random.Random(f"order:{seed}:{cfg.robustness.seed}").randrange(1, 2**31)
    return seed


def label_map(cfg: StudyConfig) -> Callable[[int, int], str] | None:
    """perturbation=labels: position p of n shows label Q{perm[p] + 1} (a seeded permutation), else None."""
    if cfg.robustness.perturbation is not Perturbation.labels:
        return None
    seed = cfg.robustness.seed

    def label(pos: int, n: int) -> str:
        perm = list(range(n))
        random.Random(f"labels:{seed}:{n}").shuffle(perm)
        return f"Q{perm[pos] + 1}"

    return label
