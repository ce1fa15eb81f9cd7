"""Expected scores (G-Eval): known values, a local OpenAI-compatible server returning planted logprobs
through a whole study, and the embedded model's own probabilities."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from judge.expected import expected_scores, expected_value, from_response, value_distribution
from judge.parse import Field
from judge.types import Completion, TokenLogprob
from tests.support.logprobs import PLANTED, PLANTED_EXPECTED
from tests.support.logprobs import planted_logprobs as _tokens
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.runners import run

FIELDS = [Field("originality", 0, 3, ()), Field("gap_addressing", 0, 3, ())]


def test_value_distribution_and_expected_value_known() -> None:
    tok = TokenLogprob(" 2", tuple((t, math.log(p)) for t, p in PLANTED))
    dist = value_distribution(tok, 0, 3)
    assert dist == pytest.approx({0: 0.1, 1: 0.2, 2: 0.6, 3: 0.1})
    assert expected_value(tok, 0, 3) == pytest.approx(1.7)
    assert expected_value(tok, 1, 2) == pytest.approx((1 * 0.2 + 2 * 0.6) / 0.8)  # out-of-range dropped
    assert expected_value(TokenLogprob("x", (("x", 0.0),)), 0, 3) is None


def _lp(pairs: list[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    return tuple((t, math.log(p)) for t, p in pairs)


def test_two_digit_score_written_as_two_tokens_known_value() -> None:
    """A tokenizer that splits numbers into digits writes 10 as "1", "0" (issue 24.4): the first token alone
    read 1*.6 + 9*.3 + 8*.1 = 4.1 for a sampled 10 on 0-10; the whole values give 10*.6 + 9*.3 + 8*.1 = 9.5."""
    first = TokenLogprob("1", _lp([("1", 0.6), ("9", 0.3), ("8", 0.1)]))
    path = [first, TokenLogprob("0", _lp([("0", 1.0)])), TokenLogprob(",", _lp([(",", 1.0)]))]
    assert value_distribution(path, 0, 10) == pytest.approx({8: 0.1, 9: 0.3, 10: 0.6})
    assert expected_value(path, 0, 10) == pytest.approx(9.5)
    # the second digit undecided: "1" then "," is a 1, "1" then "0" a 10
    split = [first, TokenLogprob("0", _lp([("0", 0.9), (",", 0.1)])), path[2]]
    assert value_distribution(split, 0, 10) == pytest.approx({1: 0.06, 8: 0.1, 9: 0.3, 10: 0.54})
    assert expected_value(split, 0, 10) == pytest.approx(0.06 + 0.8 + 2.7 + 5.4)
    # a sampled 1 followed by "," is a 1; a "0" there would have made it a 10
    one = [
        TokenLogprob("1", _lp([("1", 0.6), ("9", 0.4)])),
        TokenLogprob(",", _lp([(",", 0.75), ("0", 0.25)])),
    ]
    assert value_distribution(one, 0, 10) == pytest.approx({1: 0.45 / 1.0, 9: 0.4, 10: 0.15})
    # a "1" the judge did not write may be a 1 or a 10: left out, not read as a 1
    nine = [TokenLogprob("9", _lp([("9", 0.5), ("1", 0.3), ("8", 0.2)])), path[2]]
    assert value_distribution(nine, 0, 10) == pytest.approx({8: 0.2 / 0.7, 9: 0.5 / 0.7})
    # a tokenizer that writes "10" as one token: a "1" beside it is a 1
    merged = [TokenLogprob(" 9", _lp([(" 9", 0.5), (" 10", 0.3), (" 1", 0.2)])), path[2]]
    assert value_distribution(merged, 0, 10) == pytest.approx({1: 0.2, 9: 0.5, 10: 0.3})
    # a decimal point does not end a number
    assert value_distribution([TokenLogprob("7", _lp([("7", 0.5), ("7.", 0.5)])), path[2]], 0, 10) == {7: 1.0}


def test_two_digit_score_located_in_the_answer() -> None:
    """The same planted digits inside a whole answer: expected_scores reads the path, not the first token."""
    text = '{"overall": 10, "soundness": 3}'
    pieces = ['{"', "overall", '":', " ", "1", "0", ",", ' "', "soundness", '":', " ", "3", "}"]
    assert "".join(pieces) == text
    content = []
    for piece in pieces:
        top = {"1": [("1", 0.6), ("9", 0.3), ("8", 0.1)], "0": [("0", 1.0)]}.get(piece, [(piece, 1.0)])
        content.append(
            {
                "token": piece,
                "logprob": math.log(dict(top)[piece]),
                "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in top],
            }
        )
    fields = [Field("overall", 0, 10, ()), Field("soundness", 1, 4, ())]
    out = expected_scores(text, from_response({"content": content}), fields)
    assert out == {"": pytest.approx({"overall": 9.5, "soundness": 3.0})}


def test_expected_scores_locate_values_in_plain_and_labelled_json() -> None:
    text = '{"originality": 2, "gap_addressing": 1}'
    tokens = from_response({"content": _tokens(text)})
    assert "".join(t.token for t in tokens) == text
    assert expected_scores(text, tokens, FIELDS) == {
        "": pytest.approx({"originality": 1.7, "gap_addressing": 1.7})
    }
    labelled = (
        '{"Q1": {"originality": 3, "gap_addressing": 0}, "Q2": {"originality": 1, "gap_addressing": 2}}'
    )
    toks = from_response({"content": _tokens(labelled, [(" 1", 0.25), (" 3", 0.75)])})
    out = expected_scores(labelled, toks, FIELDS, ["Q1", "Q2"])
    assert out["Q1"]["originality"] == pytest.approx(2.5)
    # a sampled token missing from top_logprobs joins the alternatives (" 2" at p = 0.5 here)
    assert out["Q2"]["gap_addressing"] == pytest.approx((1 * 0.25 + 3 * 0.75 + 2 * 0.5) / 1.5)
    # tokens that do not spell the text give nothing rather than a value read at a wrong position
    assert expected_scores(labelled, toks[1:], FIELDS, ["Q1", "Q2"]) == {"Q1": {}, "Q2": {}}


def test_completion_round_trips_logprobs_and_reads_old_entries() -> None:
    tokens = from_response({"content": _tokens('{"originality": 2}')})
    comp = Completion("t", "stop", 1, 2, None, 0.1, tokens)
    assert Completion.from_dict(comp.to_dict()) == comp
    old = {
        "text": "t",
        "finish_reason": "stop",
        "prompt_tokens": 1,
        "completion_tokens": 2,
        "cost_usd": None,
        "latency_s": 0.1,
    }
    assert (
        Completion.from_dict(old).logprobs is None and "logprobs" not in Completion.from_dict(old).to_dict()
    )


def test_study_with_a_server_returning_planted_logprobs(tmp_path: Path) -> None:
    def answer(body: dict) -> Step:
        text = rubric_answer(body)
        return Step(200, text, logprobs=_tokens(text) if body.get("logprobs") else None)

    server = ScriptedServer(answer)
    with server.running():
        args = [
            "judge=qwen",
            f"judge.api_base={server.api_base}",
            "judge.api_key_env=null",
            "limit=1",
            "n_samples=1",
            "expected_scores=true",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
        done = run(args, tmp_path)
        plain = run([*args[:-2], f"hydra.run.dir={tmp_path / 'plain'}"], tmp_path)
    assert done.returncode == 0 and plain.returncode == 0, done.stderr[-2000:] + plain.stderr[-2000:]
    table = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert table["parse_ok"].all() and (table["score_expected"] - PLANTED_EXPECTED).abs().max() < 1e-9
    assert server.requests[0]["logprobs"] is True and server.requests[0]["top_logprobs"] == 20
    without = pd.read_parquet(tmp_path / "plain" / "results.parquet")
    assert without["score_expected"].isna().all() and "logprobs" not in server.requests[-1]


def test_analysis_reads_expected_scores_as_scores() -> None:
    from analysis.load.collect import expected_as_score

    table = pd.DataFrame({"score": [2.0, 3.0], "score_expected": [1.7, float("nan")]})
    out = expected_as_score(table)
    assert out["score"].iloc[0] == 1.7 and math.isnan(out["score"].iloc[1])
    with pytest.raises(ValueError, match="expected_scores=true"):
        expected_as_score(table.assign(score_expected=float("nan")))


@pytest.mark.slow
def test_embedded_model_returns_its_own_probabilities() -> None:
    from judge.completer import LiteLLMCompleter
    from judge.local.provider import register
    from judge.rubric import Dimension, Rubric, response_format

    register()
    rubric = Rubric(
        name="t",
        template="novelty.jinja",
        kind="scores",
        system="s",
        dimensions=tuple(Dimension(f.name, low=0, high=3) for f in FIELDS),
    )
    params = {
        "temperature": 0.0,
        "max_tokens": 40,
        "seed": 0,
        "response_format": response_format(rubric),
        "logprobs": True,
        "top_logprobs": 20,
    }
    messages = [
        {"role": "user", "content": "Rate 'Why is the sky blue?' on originality and gap_addressing, 0-3."}
    ]
    comp = LiteLLMCompleter("local/smollm2-135m").complete(messages, params)
    assert comp.logprobs and "".join(t.token for t in comp.logprobs) == comp.text
    exp = expected_scores(comp.text, comp.logprobs, FIELDS)[""]
    for f in FIELDS:
        chosen = [t for t in comp.logprobs if len(t.top) == 4]  # the score positions: 4 allowed values
        assert chosen and all(abs(sum(math.exp(lp) for _, lp in t.top) - 1) < 1e-5 for t in chosen)
        assert 0 <= exp[f.name] <= 3


def test_report_expected_counts_and_prints_the_rows_it_cannot_use(tmp_path: Path, capsys) -> None:
    """`--expected` on rows without score_expected: counted per judge and printed (issue 24.4), not silent."""
    from tests.support.report_run import report_without_figures
    from tests.support.study_folders import write_fake_run

    for judge in ("a", "b"):
        folder = write_fake_run(tmp_path / judge, judge, "independent", lambda j, c, d, k: 2.0)
        table = pd.read_csv(folder / "results.csv")
        # judge b: every other row without an expected score (no log-probabilities for that answer)
        missing = (table.index % 2 == 1) if judge == "b" else (table.index < 0)
        table["score_expected"] = [math.nan if m else 1.7 for m in missing]
        table.to_csv(folder / "results.csv", index=False)
    n_rows = len(table)
    argv = [str(tmp_path), "--expected", "--n-boot", "20", "--out", str(tmp_path / "report")]
    assert report_without_figures(argv) == 0  # the command's main, its figures undrawn (only stderr is read)
    err = capsys.readouterr().err
    assert f"--expected: {n_rows // 2} of {2 * n_rows} scored rows have no score_expected" in err
    assert f"left unscored: b {n_rows // 2}\n" in err


@pytest.mark.slow
def test_embedded_model_gives_whole_two_digit_values() -> None:
    """The embedded model's tokenizer writes 10 as "1", "0": its constrained decoder reports every allowed value
    with the probability of writing it whole (issue 24.4), checked against one uncached forward pass."""
    import torch

    from judge.local import model as local_model
    from judge.local.schema import generate_structured

    scale = list(range(11))
    schema = {"type": "object", "properties": {"overall": {"enum": scale}, "soundness": {"enum": [1, 2]}}}
    messages = [{"role": "user", "content": "Rate this review from 0 to 10 as JSON: 'Excellent, flawless.'"}]
    comp = generate_structured(messages, schema, temperature=0.0, seed=0, logprobs=True)
    assert comp.text == generate_structured(messages, schema, temperature=0.0, seed=0).text  # same answer
    model, tok = local_model.load_model()
    ids = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    one, zero = ids("10,")[:2]
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids(prompt) + ids('{"overall": ') + [one]])).logits[0].float()
    first = sorted({ids(f"{v},")[0] for v in scale})  # the digits the value may start with
    p_first = dict(zip(first, torch.softmax(logits[-2, first], -1).tolist(), strict=True))
    then = sorted({ids("1,")[1], zero})  # after "1": "," (a 1) or "0" (a 10)
    p_then = dict(zip(then, torch.softmax(logits[-1, then], -1).tolist(), strict=True))
    truth = {v: p_first[ids(f"{v},")[0]] for v in scale}
    truth[1], truth[10] = p_first[one] * p_then[ids("1,")[1]], p_first[one] * p_then[zero]
    tokens = from_response({"content": comp.logprobs})
    value = next(t for t in tokens if len(t.top) == len(scale))
    assert {int(t): math.exp(lp) for t, lp in value.top} == pytest.approx(truth, abs=1e-4)
    got = expected_scores(comp.text, tokens, [Field("overall", 0, 10, ())])[""]["overall"]
    assert got == pytest.approx(sum(v * p for v, p in truth.items()), abs=1e-3) and truth[10] > 1e-3
