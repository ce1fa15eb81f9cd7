"""Cache keys, caching, retry classification and the real litellm HTTP retry path."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace

import litellm
import pytest

from judge.cache.store import CallCache, cache_key
from judge.client import Judge
from judge.completer import LiteLLMCompleter
from judge.retry import FatalProviderError, RetryPolicy, is_transient, retry_after_seconds
from tests.support.fakes import FakeCompleter
from tests.support.openai_server import ScriptedServer, Step, scripted
from tests.support.studies import config, typed

MSGS = [{"role": "user", "content": "rate this"}]
GOOD = '{"originality": 2, "gap_addressing": 1, "non_obviousness": 3}'
FAST = RetryPolicy(max_attempts=4, initial_wait_s=0.01, max_wait_s=0.05)


def test_cache_key_covers_every_input() -> None:
    base = cache_key("m", MSGS, {"temperature": 0.1}, 0, "v1")
    assert base == cache_key("m", [dict(MSGS[0])], {"temperature": 0.1}, 0, "v1")
    assert (
        len(
            {
                base,
                cache_key("m2", MSGS, {"temperature": 0.1}, 0, "v1"),
                cache_key("m", [{"role": "user", "content": "other"}], {"temperature": 0.1}, 0, "v1"),
                cache_key("m", MSGS, {"temperature": 0.2}, 0, "v1"),
                cache_key("m", MSGS, {"temperature": 0.1}, 1, "v1"),
                cache_key("m", MSGS, {"temperature": 0.1}, 0, "v2"),
                cache_key("m", MSGS, {"temperature": 0.1}, 0, "v1", api_base="http://x"),
            }
        )
        == 7
    )
    # a key never depends on (or contains) a secret
    assert cache_key("m", MSGS, {"temperature": 0.1, "api_key": "sk-secret"}, 0, "v1") == base
    # values equal in Python but not in JSON are different prompts (the messages memo must not merge them)
    odd = [cache_key("m", [{"role": "user", "content": v}], {}, 0, "v1") for v in (1, True, 1.0, "1")]
    assert len(set(odd)) == 4


def test_precomputed_parameters_give_the_same_key() -> None:
    """A study serialises a sample's parameters once (Judge.sample) and reuses them: same key as computed fresh."""
    schema = {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}
    params = {"temperature": 0.1, "seed": 5, "response_format": schema}
    judge = Judge(FakeCompleter(lambda m, p: GOOD), cache=None)  # type: ignore[arg-type]
    for idx in range(3):
        sample = judge.sample(params, idx)
        assert sample.params["seed"] == 5 + idx
        fresh = cache_key("m", MSGS, sample.params, idx, "v1", "http://x")
        assert cache_key("m", MSGS, {}, idx, "v1", "http://x", params_json=sample.params_json) == fresh


def test_completer_sends_a_copy_of_the_schema() -> None:
    """litellm may edit a request's schema in place; the dict other calls' keys cover must stay untouched."""
    schema = {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}
    sent = LiteLLMCompleter("openai/m", api_base="http://x")._kwargs(MSGS, {"response_format": schema})
    assert sent["response_format"] == schema and sent["response_format"] is not schema
    assert sent["response_format"]["json_schema"] is not schema["json_schema"]


def test_cache_key_covers_the_request_actually_sent() -> None:
    """judge.extra (top_p, a provider override, ...) reaches the provider, so it is in the key; credentials,
    transport options and the completer's defaults are not, so an unchanged request keeps its old key."""
    params = {"temperature": 0.1, "max_tokens": 160, "seed": 0}

    def key(**extra):  # type: ignore[no-untyped-def]
        completer = LiteLLMCompleter("openai/m", api_base="http://x", extra=extra)
        sample = Judge(completer, cache=None).sample(params, 0)  # type: ignore[arg-type]
        return cache_key("openai/m", MSGS, {}, 0, "v1", "http://x", params_json=sample.params_json)

    plain = key()
    assert plain == cache_key("openai/m", MSGS, params, 0, "v1", "http://x")  # caches from before stay valid
    assert key(top_p=1.0) != plain and key(top_p=0.5) != key(top_p=1.0)
    assert key(response_format={"type": "json_object"}) != plain and key(drop_params=False) != plain
    assert key(model="openai/other") != plain  # extra overrides the model it names
    secret_free = [
        key(api_key="sk-one-1234567890"),
        key(api_key="sk-two-0987654321"),
        key(extra_headers={"Authorization": "Bearer sk-one-1234567890"}),
        key(timeout=3),
    ]
    assert (
        secret_free[:2] == [plain, plain]
        and secret_free[2] == key(extra_headers={})
        and secret_free[3] == plain
    )


def test_embedded_provider_registered_only_for_local_judges(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from experiments import judges
    from judge.local import provider as local_provider

    calls: list[int] = []
    monkeypatch.setattr(local_provider, "register", lambda: calls.append(1))
    study = typed(config(["judge.name=j", "judge.api_base=http://127.0.0.1:1/v1", f"cache_dir={tmp_path}"]))
    for model, extra, expected in [
        ("openai/m", {}, 0),
        ("local/smollm2-135m", {}, 1),
        ("smollm2-135m", {"custom_llm_provider": "local"}, 2),
    ]:
        judge = judges.make_judge(replace(study, judge=replace(study.judge, model=model, extra=extra)))
        judge.cache.close()
        assert len(calls) == expected, model


def _run(judge: Judge, sample_idx: int = 0, version: str = "v1"):  # type: ignore[no-untyped-def]
    return asyncio.run(
        judge(MSGS, {"temperature": 0.1, "seed": 0}, sample_idx=sample_idx, rubric_version=version)
    )


def test_three_samples_are_three_entries_and_rerun_makes_no_call(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fake = FakeCompleter(lambda m, p: GOOD)
    judge = Judge(fake, CallCache(tmp_path), policy=FAST)
    results = [_run(judge, s) for s in range(3)]
    assert len(fake.calls) == 3 and [c[1]["seed"] for c in fake.calls] == [0, 1, 2]
    assert not any(r.cached for r in results) and len(judge.cache) == 3
    again = Judge(fake, CallCache(tmp_path), policy=FAST)
    replay = [_run(again, s) for s in range(3)]
    assert len(fake.calls) == 3 and all(r.cached for r in replay)
    assert [r.completion.text for r in replay] == [GOOD] * 3  # type: ignore[union-attr]


def _rate_limit() -> litellm.RateLimitError:
    return litellm.RateLimitError("slow down", llm_provider="openai", model="m")


def test_transient_errors_are_retried_and_counted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    answers = [_rate_limit(), litellm.InternalServerError("boom", llm_provider="openai", model="m"), GOOD]
    fake = FakeCompleter(lambda m, p: answers.pop(0))
    result = _run(Judge(fake, CallCache(tmp_path), policy=FAST))
    assert result.retries == 2 and result.completion is not None and len(fake.calls) == 3


def test_exhausted_retries_give_an_uncached_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fake = FakeCompleter(lambda m, p: _rate_limit())
    judge = Judge(fake, CallCache(tmp_path), policy=FAST)
    result = _run(judge)
    assert result.completion is None and result.retries == 3 and len(fake.calls) == 4
    assert "RateLimitError after 4 attempts" in (result.error or "")
    assert len(judge.cache) == 0  # a rerun will try again


def test_auth_error_fails_at_once_with_clear_line(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FAKE_PROVIDER_API_KEY", "sk-planted-secret-123456")
    exc = litellm.AuthenticationError("bad key sk-planted-secret-123456", llm_provider="openai", model="m")
    fake = FakeCompleter(lambda m, p: exc)
    with pytest.raises(FatalProviderError) as info:
        _run(Judge(fake, CallCache(tmp_path), policy=FAST))
    assert len(fake.calls) == 1
    assert "AuthenticationError" in str(info.value) and "API key" in str(info.value)
    assert "sk-planted-secret-123456" not in str(info.value)


def test_classification() -> None:
    assert is_transient(_rate_limit())
    assert is_transient(litellm.Timeout("t", model="m", llm_provider="openai"))
    assert is_transient(litellm.APIConnectionError("c", llm_provider="openai", model="m"))
    assert is_transient(litellm.ServiceUnavailableError("s", llm_provider="openai", model="m"))
    assert not is_transient(litellm.BadRequestError("b", model="m", llm_provider="openai"))
    assert not is_transient(litellm.AuthenticationError("a", llm_provider="openai", model="m"))
    assert not is_transient(ValueError("x"))


def test_retry_after_header_is_read() -> None:
    exc = litellm.RateLimitError("r", llm_provider="openai", model="m", headers={"retry-after": "0.25"})
    assert retry_after_seconds(exc) == pytest.approx(0.25)
    assert retry_after_seconds(_rate_limit()) is None


def test_retry_through_real_litellm_http_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """429 twice (once with Retry-After), then a valid completion: 3 requests, right result."""
    steps = [Step(429, headers={"Retry-After": "0.2"}), Step(429), Step(200, GOOD)]
    server = ScriptedServer(scripted(steps))
    with server.running():
        completer = LiteLLMCompleter("openai/test-model", api_base=server.api_base, timeout_s=10)
        os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-a-real-key")
        judge = Judge(completer, CallCache(tmp_path), policy=FAST)
        result = _run(judge)
        assert len(server.requests) == 3
        assert result.retries == 2 and result.completion is not None
        assert result.completion.text == GOOD and result.completion.prompt_tokens == 12
        assert server.requests[-1]["seed"] == 0 and server.requests[-1]["temperature"] == 0.1
        again = _run(Judge(completer, CallCache(tmp_path), policy=FAST))
        assert again.cached and len(server.requests) == 3


def test_config_redaction_keeps_numbers_and_drops_keys(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from judge.secrets import REDACTED, redact_config

    monkeypatch.setenv("MY_API_KEY", "sk-abcdefgh12345678")
    cfg = {
        "max_tokens": 160,
        "api_key": "sk-literal",
        "api_key_env": "MY_API_KEY",
        "extra": {"headers": "Bearer sk-abcdefgh12345678"},
    }
    out = redact_config(cfg)
    assert out["max_tokens"] == 160 and out["api_key_env"] == "MY_API_KEY"
    assert out["api_key"] == REDACTED and out["extra"]["headers"] == f"Bearer {REDACTED}"


def test_credentials_in_urls_and_command_line_maps_are_learnt_and_hidden() -> None:
    """A URL's password and secret-named query values are secrets. On the command line only a credential's own
    characters are replaced by an `oc.env` interpolation: a `+` map still merges, a sweep stays a sweep, and
    each override reads back (Hydra's parser, then the variables) to exactly what was typed."""
    from experiments.cli.secrets import _parsed, _unresolved, hide_secret_overrides
    from judge.secrets import redact, url_secrets

    assert url_secrets("https://me:pw-0123456789@host/v1?key=sk-query-0123456&page=2") == [
        "pw-0123456789",
        "sk-query-0123456",
    ]
    assert url_secrets("https://host/v1?page=22222222") == [] and url_secrets("no url at all") == []
    environ: dict[str, str] = {}
    argv = [
        "+judge.extra={api_key:sk-map-0123456789,note:'x\\'y, z',n:3}",
        "judge.api_base=https://u:pw-url-0123456789@host/v1",
        "max_tokens=160",
        "judge.api_key=sk-sweep-aaaaaaaa1,sk-sweep-bbbbbbbb2",
        "+judge.extra.api_key=12345678901",
        "~judge.extra",
        "+judge.extra.headers={Cookie:session=cookie-0123456789=}",
    ]  # the last: unreadable
    out = hide_secret_overrides(argv, environ)
    assert out[0] == "+judge.extra={api_key:${oc.env:JUDGESCOPE_SECRET_0_0},note:'x\\'y, z',n:3}"
    assert out[1] == "judge.api_base=https://u:${oc.env:JUDGESCOPE_SECRET_1_0}@host/v1"
    assert out[3].count("${oc.env:") == 2 and _parsed(out[3])[1]  # still a sweep
    assert out[2] == argv[2] and out[5] == argv[5] and out[6] == argv[6]
    expected = [_parsed(arg)[0] for arg in argv[:4]] + ["12345678901"]  # a key of digits reads back as text
    assert [_unresolved(_parsed(arg)[0], environ) for arg in out[:5]] == expected
    text = "sk-map-0123456789 pw-url-0123456789 sk-sweep-aaaaaaaa1 sk-sweep-bbbbbbbb2 12345678901 cookie-0123456789"
    assert redact(text) == " ".join(["***REDACTED***"] * 6)


def test_command_line_credentials_everywhere_they_are_typed() -> None:
    """Review 4: quoted sweep choices are credentials too; a value holding `${...}` is left for OmegaConf to
    resolve; a credential is replaced wherever it recurs in argv; one that cannot be rewritten in place (typed
    escaped in a map, a range of keys) is refused in one line that does not show it."""
    import pytest as _pytest

    from experiments.cli.secrets import _parsed, _unresolved, hide_secret_overrides

    environ: dict[str, str] = {}
    argv = [
        "+judge.extra.api_key='sk-quoted-0001','sk-quoted-0002'",
        "+judge.extra.headers={Authorization:'Bearer ${oc.env:MY_TOKEN}'}",
        "+judge.extra.headers={X-Api-Key:sk-twice-00001}",
        "++judge.extra.note=sk-twice-00001",
    ]
    out = hide_secret_overrides(argv, environ)
    assert "sk-quoted" not in out[0] and _parsed(out[0])[1]  # hidden, still a sweep
    assert _unresolved(_parsed(out[0])[0], environ) == ["sk-quoted-0001", "sk-quoted-0002"]
    assert out[1] == argv[1]  # resolved when the config is composed (its credential learnt then)
    assert "sk-twice" not in out[2] + out[3]
    for bad in (
        "++judge.extra={headers:{X-Api-Key:'ab\\'cdefgh12'}}",
        "+judge.extra.api_key=range(12345678,12345680)",
    ):
        with _pytest.raises(ValueError, match=r"=\.\.\.: .*cannot be hidden .*\(value not shown\)") as err:
            hide_secret_overrides([bad], {})
        assert "cdefgh12" not in str(err.value) and "12345678" not in str(err.value)
