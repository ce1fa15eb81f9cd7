"""Known-value tests for the NovBench metrics (analysis.novbench.metrics, analysis.novbench.sections, judge.local.embeddings)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from analysis.novbench.metrics import (
    dist_acc,
    fluency_score,
    ims,
    keyword_coverage,
    keywords,
    length_score,
    score,
    score_frame,
    sentences,
    summary_table,
    units,
)
from analysis.novbench.sections import parse_sections
from core.intervals import mean_ci
from tests.support.studies import public_data


class FakeEmbedder:
    """Fake embedder: fixed 2-D vectors per text, so every cosine in a test is hand-computable."""

    model_name = "fake-2d"

    def __init__(self, table: dict[str, tuple[float, float]]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        self.calls.append(list(sentences))
        return np.array([self.table.get(s, (0.0, 0.0)) for s in sentences], dtype=float)


def fake_ppl(texts: list[str]) -> list[float]:
    """Fake perplexity: 1.0 for texts mentioning 'novel', else 3.0."""
    return [1.0 if "novel" in t else 3.0 for t in texts]


G1, G2 = "The method is clearly novel.", "The evaluation set is rather small."
GEN = f"Positive Novelty Evaluations\n- {G1}\n\nNegative Novelty Evaluations\n- {G2}\n"
H1, H2, H3, H4 = (
    "Human point one is here.",
    "Human point two is here.",
    "Human point three is here.",
    "Human point four is here.",
)
HUMAN = (
    f"Positive Novelty Evaluations\n- {H1}\n- {H2}\n\nNeutral Novelty Evaluations\n- {H3}\n"
    f"\nNegative Novelty Evaluations\n- {H4}\n"
)
S1, S2, S3 = "Source sentence one.", "Source sentence two.", "Source sentence three."
TABLE = {
    G1: (1, 0),
    G2: (0, 1),
    H1: (1, 0),
    H2: (0.6, 0.8),
    H3: (-1, 0),
    H4: (0.6, -0.8),
    S1: (2, 0),
    S2: (0.6, 0.8),
    S3: (-1, 0),
}


def test_ims_transform() -> None:
    # clip(cos, 0, 1) * 4 + 1
    assert ims(np.array([-0.3, 0.0, 0.5, 1.0, 1.2])).tolist() == [1.0, 1.0, 3.0, 5.0, 5.0]


def test_dist_acc_known_value() -> None:
    # p = (2/4, 1/4, 1/4), t = (1/4, 0/4, 3/4): L1 = .25 + .25 + .5 = 1.0 -> 1 - 1.0/2 = 0.5
    assert dist_acc(
        {"positive": 2, "neutral": 1, "negative": 1}, {"positive": 1, "neutral": 0, "negative": 3}
    ) == pytest.approx(0.5)
    assert dist_acc({"positive": 1}, {"positive": 5}) == 1.0
    assert math.isnan(dist_acc({}, {"positive": 1}))
    assert math.isnan(dist_acc({"negative": 2}, {}))


def test_coverage_relevance_correctness_with_fake_embedding() -> None:
    res = score(GEN, [S1, S2, S3], HUMAN, clarity="released", embedder=FakeEmbedder(TABLE))
    # human best cosines to {G1, G2}: H1 1.0, H2 max(.6, .8) = .8, H3 max(-1, 0) = 0, H4 max(.6, -.8) = .6
    # >= 0.7: H1, H2 -> 2/4
    assert res["coverage"] == pytest.approx(0.5)
    # source: S1 cos 1 -> IMS 5; S2 cos .8 -> 4.2; S3 best cos 0 -> IMS 1; mean = 10.2/3 = 3.4
    assert res["relevance"] == pytest.approx(3.4)
    # gen (1, 0, 1)/2 vs human (2, 1, 1)/4: |.5-.5| + |0-.25| + |.5-.25| = .5 -> 0.75
    assert res["correctness"] == pytest.approx(0.75)
    assert (res["n_generated"], res["n_human"], res["n_source"]) == (2, 4, 3)
    assert res["relevance_model"] == "fake-2d" and res["coverage_model"] == "fake-2d"


def test_separate_relevance_embedder_is_named() -> None:
    rel = FakeEmbedder(TABLE)
    rel.model_name = "fake-spiced"
    res = score(GEN, [S1], HUMAN, clarity="released", embedder=FakeEmbedder(TABLE), relevance_embedder=rel)
    assert res["relevance"] == pytest.approx(5.0) and res["relevance_model"] == "fake-spiced"


def test_keywords_and_kc_substring_vs_token() -> None:
    src = ["We propose contrastive pretraining for low-resource parsing."]
    assert keywords(src) == ["propose", "contrastive", "pretraining", "low-resource", "parsing"]
    items = [
        "The contrastive objective is new.",  # token hit
        "Results are weak overall here.",  # no keyword
        "Their proposed parser is standard.",
    ]  # 'propose' inside 'proposed': substring only
    assert keyword_coverage(items, keywords(src), match="substring") == pytest.approx(2 / 3)  # released code
    assert keyword_coverage(items, keywords(src)) == pytest.approx(1 / 3)  # default: token level
    assert keyword_coverage(["THE CONTRASTIVE idea."], ["contrastive"]) == 1.0  # case-insensitive
    assert math.isnan(keyword_coverage([], ["contrastive"]))
    assert math.isnan(keyword_coverage(items, []))


def test_length_score() -> None:
    # word counts 5, 10, 30 -> mean 15 -> 15 / 20 = 0.75
    assert length_score(["w " * 5, "w " * 10, "w " * 30]) == pytest.approx(0.75)
    assert length_score(["w " * 40]) == 1.0
    assert math.isnan(length_score([]))


def test_fs_and_paper_clarity_with_fake_ppl() -> None:
    # FS = mean(1/(1+1), 1/(1+3)) = (0.5 + 0.25) / 2 = 0.375
    assert fluency_score([1.0, 3.0]) == pytest.approx(0.375)
    assert fluency_score([float("inf")]) == 0.0
    src = ["The method is novel in evaluation design."]  # keywords: method, evaluation, design
    res = score(GEN, src, HUMAN, clarity="paper", embedder=FakeEmbedder(TABLE), ppl_fn=fake_ppl)
    # G1 "novel" -> ppl 1 -> .5 ; G2 -> ppl 3 -> .25 ; FS = .375
    # KC: G1 has "method", G2 has "evaluation" -> 1.0 ; LS: (5 + 6)/2 = 5.5 words / 20 = .275
    assert res["fs"] == pytest.approx(0.375)
    assert res["kc"] == 1.0 and res["ls"] == pytest.approx(0.275)
    assert res["clarity"] == pytest.approx((1.0 + 0.275 + 0.375) / 3)
    assert res["ppl_model"] == "fake_ppl"
    rel = score(GEN, src, HUMAN, clarity="released", embedder=FakeEmbedder(TABLE))
    assert rel["clarity"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.275) and math.isnan(rel["fs"])


def test_failed_generations_are_zero_by_default_and_nan_on_request() -> None:
    emb = FakeEmbedder(TABLE)
    for generated in ("", "I cannot evaluate this paper.", "Positive Novelty Evaluations\n- None\n"):
        zero = score(generated, [S1], HUMAN, clarity="released", embedder=emb)  # the paper's Table 2 rule
        nan = score(generated, [S1], HUMAN, clarity="released", embedder=emb, failed="nan")
        for k in ("relevance", "correctness", "coverage", "clarity"):
            assert zero[k] == 0.0 and math.isnan(nan[k]), (generated, k)
        assert zero["failed"] is True and zero["n_generated"] == 0 and zero["failed_policy"] == "zero"
    # one good output (relevance 5.0) + one refusal: the paper's mean is 2.5 on n = 2, not 5.0 on n = 1
    df = pd.DataFrame(
        {
            "model": ["m", "m"],
            "strategy": ["z", "z"],
            "gen": [GEN, "I cannot."],
            "nov": [[S1], [S1]],
            "hum": [HUMAN, HUMAN],
        }
    )
    tab = summary_table(score_frame(df, "gen", "nov", "hum", clarity="released", embedder=emb))
    assert tab.loc[0, "Rel."] == pytest.approx(2.5) and tab.loc[0, "Rel._n"] == 2
    tab = summary_table(score_frame(df, "gen", "nov", "hum", clarity="released", embedder=emb, failed="nan"))
    assert tab.loc[0, "Rel."] == pytest.approx(5.0) and tab.loc[0, "Rel._n"] == 1
    assert score("I cannot evaluate.", [S1], HUMAN, "released", embedder=emb)["generated_parsed"] is False
    no_human = score(GEN, [S1], "", clarity="released", embedder=emb)  # not a failure: undefined stays NaN
    assert math.isnan(no_human["coverage"]) and math.isnan(no_human["correctness"]) and not no_human["failed"]
    assert no_human["relevance"] == pytest.approx(5.0)
    assert math.isnan(score(GEN, [], HUMAN, clarity="released", embedder=emb)["relevance"])
    with pytest.raises(ValueError):
        score(GEN, [S1], HUMAN, clarity="other", embedder=emb)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        score(GEN, [S1], HUMAN, embedder=emb, failed="drop")  # type: ignore[arg-type]


def test_sentence_units_split_items_and_keep_labels() -> None:
    two = "The method is clearly novel. The evaluation set is rather small."
    assert sentences(two) == (G1, G2)
    assert sentences("Too short.") == ("Too short.",)  # nothing of 10+ characters: the item stays whole
    gen = f"Positive Novelty Evaluations\n- {two}\n"
    assert units(parse_sections(gen)) == [("positive", G1), ("positive", G2)]
    assert units(parse_sections(gen), "item") == [("positive", two)]
    emb = FakeEmbedder(TABLE | {two: (0.0, 0.0)})
    by_sentence = score(gen, [S1, S2, S3], HUMAN, clarity="released", embedder=emb)
    # sentences G1 (1,0), G2 (0,1): identical to GEN's two bullets except both are positive
    assert by_sentence["relevance"] == pytest.approx(3.4) and by_sentence["coverage"] == pytest.approx(0.5)
    # gen (2, 0, 0)/2 vs human (2, 1, 1)/4: |1-.5| + .25 + .25 = 1 -> 0.5; LS = (5 + 6)/2 / 20
    assert by_sentence["correctness"] == pytest.approx(0.5) and by_sentence["ls"] == pytest.approx(0.275)
    assert by_sentence["n_generated"] == 2 and by_sentence["unit"] == "sentence"
    by_item = score(gen, [S1, S2, S3], HUMAN, clarity="released", embedder=emb, unit="item")
    # one item whose (fake) vector is 0: every cosine 0 -> IMS 1; LS = 11 words / 20
    assert by_item["relevance"] == pytest.approx(1.0) and by_item["ls"] == pytest.approx(0.55)


def test_section_parser_header_and_bullet_variants() -> None:
    text = (
        "Here is my evaluation.\n\n**Positive**\n* The idea of X is new to the field.\n"
        "1. A second positive point that is long.\n  which continues here.\n"
        "Neutral:\n- None\n- *(No neutral comments were provided.)*\n"
        "[No neutral novelty identified at this stage as only the introduction is provided.]\n"
        "[Method] A new ranking loss for ideas, unlike [12].\n(1) The benchmark is new (see Section 3).\n\n"
        "### Negative Novelty Evaluations:\n2) Similar to prior work by Smith.\n"
        "- short\n- Positive: an inline positive item.\n"
    )
    s = parse_sections(text)
    assert s.found_header
    assert s.positive == [
        "The idea of X is new to the field.",
        "A second positive point that is long. which continues here.",
        "an inline positive item.",
    ]
    assert s.neutral == [
        "[Method] A new ranking loss for ideas, unlike [12].",
        "(1) The benchmark is new (see Section 3).",
    ]  # citations, not meta notes
    assert s.negative == ["Similar to prior work by Smith."]
    assert s.counts() == {"positive": 3, "neutral": 2, "negative": 1}
    assert not parse_sections("just prose, no sections").found_header


def test_section_parser_on_real_novbench_output_format() -> None:
    text = public_data("novbench_coling2020.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    first = parse_sections(rows[0]["output_format"])
    assert first.counts() == {"positive": 2, "neutral": 1, "negative": 4}
    assert (
        first.negative[-1]
        == "Table 1 would be more readable without horizontal lines after every ORCHID tag."
    )
    for r in rows:
        s = parse_sections(r["output_format"])
        assert s.found_header and s.texts, r["id"]
        assert all(t.lower() != "none" and not (t.startswith("(") and t.endswith(")")) for t in s.texts)


def test_score_frame_embeds_each_distinct_sentence_once_and_matches_score() -> None:
    emb = FakeEmbedder(TABLE)
    df = pd.DataFrame(
        {
            "model": ["a", "a", "b"],
            "strategy": ["zero"] * 3,
            "gen": [GEN, GEN, ""],
            "nov": [[S1, S2, S3], [S1], [S2]],
            "hum": [HUMAN] * 3,
        }
    )
    out = score_frame(df, "gen", "nov", "hum", clarity="released", embedder=emb)
    assert len(emb.calls) == 1  # one encode call for the whole batch ...
    assert sorted(emb.calls[0]) == sorted({G1, G2, H1, H2, H3, H4, S1, S2, S3})  # ... each text once
    assert list(out.columns[:2]) == ["model", "strategy"] and "gen" not in out.columns
    single = score(GEN, [S1, S2, S3], HUMAN, clarity="released", embedder=FakeEmbedder(TABLE))
    for k in ("relevance", "correctness", "coverage", "clarity"):
        assert out.loc[0, k] == pytest.approx(single[k])
    assert out.loc[2, "coverage"] == 0.0 and out.loc[2, "failed"]  # empty generation: 0, as the paper
    empty = score_frame(df.iloc[:0], "gen", "nov", "hum", clarity="released", embedder=emb)
    assert list(empty.columns) == list(out.columns)


def test_score_frame_calls_ppl_once_per_distinct_text() -> None:
    seen: list[list[str]] = []

    def fake_ppl_recording(texts: list[str]) -> list[float]:
        seen.append(texts)
        return fake_ppl(texts)

    df = pd.DataFrame({"gen": [GEN, GEN], "nov": [[S1], [S1]], "hum": [HUMAN, HUMAN]})
    out = score_frame(
        df, "gen", "nov", "hum", clarity="paper", embedder=FakeEmbedder(TABLE), ppl_fn=fake_ppl_recording
    )
    assert seen == [[G1, G2]]
    assert out["fs"].tolist() == pytest.approx([0.375, 0.375])
    assert out["ppl_model"].iloc[0] == "fake_ppl_recording"


def test_summary_table_means_ci_and_nan() -> None:
    scores = pd.DataFrame(
        {
            "model": ["a", "a", "a", "b"],
            "strategy": ["z"] * 4,
            "relevance": [2.0, 4.0, 3.0, 5.0],
            "coverage": [0.0, 1.0, float("nan"), 0.5],
            "clarity": [0.5] * 4,
            "correctness": [1.0, 0.5, 0.0, 1.0],
        }
    )
    tab = summary_table(scores).set_index("model")
    assert tab.loc["a", "n"] == 3 and tab.loc["a", "Rel."] == pytest.approx(3.0)
    assert tab.loc["a", "Cov."] == pytest.approx(0.5) and tab.loc["a", "Cov._n"] == 2  # NaN left out
    assert tab.loc["a", "Rel._lo"] <= 3.0 <= tab.loc["a", "Rel._hi"]
    assert tab.loc["b", "DistAcc_lo"] == tab.loc["b", "DistAcc_hi"] == 1.0  # one item: degenerate CI
    assert len(summary_table(scores, by=())) == 1
    with pytest.raises(KeyError):
        summary_table(scores, by=("judge",))
    assert math.isnan(mean_ci([float("nan")])[0])


@pytest.mark.slow
def test_real_minilm_paraphrase_beats_unrelated() -> None:
    pytest.importorskip("sentence_transformers")
    from judge.local.embeddings import Embedder

    emb = Embedder()
    a, para, other = (
        "The proposed method is novel.",
        "The suggested approach is new.",
        "The recipe needs two cups of flour.",
    )
    v = emb.encode([a, para, other, a])
    assert v.shape == (4, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2
    assert emb.n_encoded == 3  # the repeated sentence hit the cache
