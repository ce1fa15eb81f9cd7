"""experiment=robustness: re-judge a study's items under controlled, meaning-preserving perturbations.

Each run applies one `Perturbation` (conf: `robustness.perturbation`), seeded per candidate from
(robustness.seed, instance_id, candidate_id), to the generated candidates only — the reference stays as it is, so a verdict
against it moves only if the judge does. Text perturbations change `candidate_text` (stored in every results
row and, with the original, in the run's perturbations.jsonl for auditing); `order` and `labels` change how a
comparative prompt shows the same texts. Paraphrases are written by a generator judge through the same
cache as every call. `python -m analysis.robustness <multirun>` then measures shift and flip rate per judge.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.config import Perturbation
from experiments.datasets import Candidate, Instance

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


def settings(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The run's robustness settings (defaults when the config has none)."""
    return cfg.get("robustness") or {"perturbation": "none", "seed": 0}


def perturbation_of(cfg: Mapping[str, Any]) -> Perturbation:
    return Perturbation(str(settings(cfg).get("perturbation", "none")))


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


def text_perturber(kind: Perturbation, conf: Mapping[str, Any]) -> Callable[[Instance, Candidate], str]:
    """The function giving a generated candidate's perturbed text (text perturbations only)."""
    seed = int(conf.get("seed", 0))
    if kind is Perturbation.sentence_deletion:
        return lambda i, c: delete_sentence(c.text, _rng(seed, i.instance_id, c.candidate_id))
    if kind is Perturbation.padding:
        n = int(conf.get("padding_sentences", 3))
        return lambda i, c: pad(c.text, _rng(seed, i.instance_id, c.candidate_id), n)
    if kind is Perturbation.injection:
        attack = str(conf.get("injection"))
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
            audit.append({"instance_id": inst.instance_id, "candidate_id": cand.candidate_id, "original": cand.text,
                          "perturbed": text})  # fmt: skip
            cands.append(dataclasses.replace(cand, text=text))
        out.append(dataclasses.replace(inst, candidates=tuple(cands)))
    return out, audit


def paraphrases(instances: Sequence[Instance], cfg: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """(instance_id, candidate_id) -> a paraphrase by the generator judge (cached calls, keyed by the text
    itself; a failed call keeps the original). Not candidate_id alone: two instances' `c1` are different texts."""
    from experiments.generation import Request, call_many
    from experiments.judges import make_judge, sampling_params
    from judge.rubric import render_template, template_version

    conf = settings(cfg)
    gen_cfg = dict(cfg)
    if conf.get("generator"):
        from omegaconf import OmegaConf

        path = Path(__file__).resolve().parent.parent / "conf" / "judge" / f"{conf['generator']}.yaml"
        if not path.exists():
            raise ValueError(f"robustness.generator: no judge config {path}")
        gen_cfg["judge"] = OmegaConf.to_container(OmegaConf.load(path))
    version = template_version("paraphrase.jinja")
    cands = [(inst.instance_id, c) for inst in instances for c in inst.candidates]
    requests = [Request([{"role": "user", "content": render_template("paraphrase.jinja", text=c.text)}], version)
                for _, c in cands]  # fmt: skip
    judge = make_judge(gen_cfg)
    params = sampling_params(gen_cfg) | {"seed": int(conf.get("seed", 0))}
    try:
        results = asyncio.run(call_many(judge, requests, params, bool(cfg.get("progress", False))))
    finally:
        judge.cache.close()
    out: dict[tuple[str, str], str] = {}
    for (instance_id, cand), res in zip(cands, results, strict=True):
        text = (res.completion.text if res.completion else "").strip().strip('"').strip()
        out[instance_id, cand.candidate_id] = text or cand.text
    return out


def perturb(instances: list[Instance], cfg: Mapping[str, Any]) -> tuple[list[Instance], list[dict]]:
    """The instances this run judges, perturbed as configured, and the audit records (one per changed
    candidate: original and perturbed text, perturbation, seed) for perturbations.jsonl."""
    kind = perturbation_of(cfg)
    if kind in (Perturbation.none, Perturbation.order, Perturbation.labels):
        return instances, []
    if kind is Perturbation.paraphrase:
        table = paraphrases(instances, cfg)
        new, audit = apply(instances, lambda i, c: table[i.instance_id, c.candidate_id])
    else:
        new, audit = apply(instances, text_perturber(kind, settings(cfg)))
    seed = int(settings(cfg).get("seed", 0))
    return new, [{**a, "perturbation": kind.value, "seed": seed} for a in audit]


def audit_writer(audit: Sequence[Mapping[str, Any]]) -> dict[str, Callable[[Path], object]]:
    """perturbations.jsonl for the run's outputs (nothing when the run perturbed no text)."""
    if not audit:
        return {}
    text = "".join(json.dumps(a, ensure_ascii=False) + "\n" for a in audit)
    return {"perturbations.jsonl": lambda p: p.write_text(text)}


def order_seed(cfg: Mapping[str, Any]) -> int:
    """The comparative order's seed: the study's, or (perturbation=order) another one drawn from it."""
    seed = int(cfg["seed"])
    if perturbation_of(cfg) is Perturbation.order:
        return random.Random(f"order:{seed}:{settings(cfg).get('seed', 0)}").randrange(1, 2**31)
    return seed


def label_map(cfg: Mapping[str, Any]) -> Callable[[int, int], str] | None:
    """perturbation=labels: position p of n shows label Q{perm[p] + 1} (a seeded permutation), else None."""
    if perturbation_of(cfg) is not Perturbation.labels:
        return None
    seed = int(settings(cfg).get("seed", 0))

    def label(pos: int, n: int) -> str:
        perm = list(range(n))
        random.Random(f"labels:{seed}:{n}").shuffle(perm)
        return f"Q{perm[pos] + 1}"

    return label
