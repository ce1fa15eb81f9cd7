"""The run folder's schemas (core.schema): manifest.json typed and versioned, read by every reader
through one function; the viewer's column types derived from the results schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from analysis import drift
from analysis.annotate import files as annotate_io
from analysis.card import build as card
from analysis.load import collect, shards
from analysis.load import provider_params as requests
from analysis.view import sql as viewsql
from core import schema
from core.schema import (
    MANIFEST_NAME,
    MANIFEST_VERSION,
    BudgetRecord,
    Column,
    Manifest,
    ManifestError,
    RequestChange,
    RequestRecord,
    ShardSpec,
    read_manifest,
    write_manifest,
)
from experiments.run import unscored_line
from tests.support.study_folders import write_fake_run

ROOT = Path(__file__).resolve().parent.parent

# A manifest as the study wrote it before the version field (the format of commit 803547e, 2026-11-29):
# no schema_version, study_id, shard, cache_refresh, calls_shared, request, budget or price map.
OLD_MANIFEST = """{
  "judge": "qwen", "model": "openai/qwen2.5-7b", "mode": "independent", "rubric": "novelty",
  "rubric_versions": {"novelty": "3f2a"}, "dataset": "sample", "dataset_path": "data/sample/instances.jsonl",
  "dataset_hash": "9c1e", "instances": 6, "prompts": 22, "n_samples": 2, "temperature": 0.7,
  "calls_total": 44, "calls_made": 40, "calls_cached": 4, "retries": 1, "provider_errors": 0,
  "unscored_calls": 3, "parse_rate": 0.9318, "rows": 396, "prompt_tokens": 12000, "completion_tokens": 800,
  "cost_usd": null, "wall_time_s": 12.5, "first_provider_errors": []
}"""


def full_manifest() -> Manifest:
    """A manifest with every block set, as a budgeted, sharded, rate-limited sweep job writes it."""
    return Manifest(
        judge="qwen",
        model="openai/qwen2.5-7b",
        mode="comparative",
        rubric="novelty",
        rubric_versions={"novelty": "3f2a"},
        dataset="sample",
        dataset_path="data/sample/instances.jsonl",
        dataset_hash="9c1e",
        study_id="s1",
        cache_refresh="2026-12-01",
        shard=ShardSpec(1, 4),
        instances=6,
        prompts=22,
        n_samples=2,
        temperature=1.0,
        calls_total=44,
        calls_made=40,
        calls_cached=2,
        calls_shared=2,
        retries=1,
        provider_errors=0,
        unscored_calls=3,
        parse_rate=0.9318,
        rows=396,
        prompt_tokens=12000,
        completion_tokens=800,
        cost_usd=0.0123,
        wall_time_s=12.5,
        cache_damaged_entries=0,
        first_provider_errors=["429 Too Many Requests"],
        budget=BudgetRecord(0.5, 0.0123, None, 0, "sweep", 0.2, "/tmp/sweep/spend.jsonl"),
        batch={"batches": 1, "requests": 44, "cost_usd": 0.006},
        temperature_asked=0.1,
        request=RequestRecord({"temperature": 1.0}, (RequestChange("temperature", 0.1, 1.0, "o-series"),)),
        price_map={"map": "bundled", "prices_sha256": "ab"},
        rate_limit={"rpm": 60, "tpm": None, "responses_429": 2},
        perturbations_left_out=1,
        perturbation_attempts_rejected={"too_long": 2},
    )


def test_a_manifest_round_trips_with_its_version_first(tmp_path: Path) -> None:
    path = tmp_path / MANIFEST_NAME
    write_manifest(path, full_manifest())
    data = json.loads(path.read_text())
    assert next(iter(data)) == "schema_version" and data["schema_version"] == MANIFEST_VERSION == 1
    # the file keeps the flat layout every earlier reader knows (budget fields at the top level)
    assert data["budget_usd"] == 0.5 and data["stopped"] is None and data["sweep_ledger"].endswith(".jsonl")
    assert (
        data["shard"] == {"index": 1, "count": 4} and data["request"]["changes"][0]["param"] == "temperature"
    )
    assert read_manifest(path) == full_manifest()


def test_optional_blocks_are_absent_and_core_fields_null_when_unset(tmp_path: Path) -> None:
    """A live run without budget, batch or limiter writes none of their fields; an unknown cost is null."""
    path = tmp_path / MANIFEST_NAME
    write_manifest(path, Manifest(judge="j", calls_total=3))
    data = json.loads(path.read_text())
    assert "cost_usd" in data and data["cost_usd"] is None
    assert not {"budget_usd", "stopped", "batch", "rate_limit", "request", "perturbations_left_out"} & set(
        data
    )


def test_an_old_manifest_without_a_version_loads(tmp_path: Path) -> None:
    path = tmp_path / MANIFEST_NAME
    path.write_text(OLD_MANIFEST)
    old = read_manifest(path)
    assert old.schema_version == 0 and old.judge == "qwen" and old.calls_total == 44
    assert old.study_id is None and old.shard is None and old.budget is None and old.calls_not_started == 0
    assert old.cost_usd is None and old.rubric_versions == {"novelty": "3f2a"} and old.extra == {}
    assert unscored_line(path) == (
        f"3 of 44 calls unscored (parse rate 0.9318); see the error and raw columns of {tmp_path / 'results.parquet'}"
    )


def test_keys_this_version_does_not_know_are_kept(tmp_path: Path) -> None:
    path = tmp_path / MANIFEST_NAME
    path.write_text(json.dumps(full_manifest().to_json() | {"seed_used": 7}))
    back = read_manifest(path)
    assert back.extra == {"seed_used": 7}
    write_manifest(path, back)
    assert json.loads(path.read_text())["seed_used"] == 7


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{", r"not a readable manifest \(Expecting property name"),
        ("[1, 2]", r"not a readable manifest \(a JSON list, not an object\)"),
        ('{"calls_total": "many"}', r"\(calls_total: expected a whole number, got 'many'\)"),
        ('{"shard": {"index": 4, "count": 4}}', r"\(shard: index 4 outside 0\.\.3\)"),
        ('{"cost_usd": true}', r"\(cost_usd: expected a number, got True\)"),
        ('{"schema_version": 2}', r"schema_version 2 is newer than this judgescope reads \(1\)"),
        ('{"budget_usd": 1, "spend_usd": "x"}', r"\(spend_usd: expected a number"),
    ],
)
def test_a_broken_manifest_is_one_line_naming_the_file(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / MANIFEST_NAME
    path.write_text(content)
    with pytest.raises(ManifestError) as raised:
        read_manifest(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert re.search(why, message), message


def test_a_missing_manifest_is_one_line_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=rf"^{re.escape(str(tmp_path / MANIFEST_NAME))}: cannot read"):
        read_manifest(tmp_path / MANIFEST_NAME)
    assert schema.run_manifest(tmp_path) is None


def test_the_card_cli_names_a_broken_manifest_in_one_line(tmp_path: Path, capsys) -> None:
    run = write_fake_run(tmp_path / "study" / "0_a_independent_novelty", "a", "independent", lambda *_: 3.0)
    (run / MANIFEST_NAME).write_text('{"judge": "a", "calls_made": 2.5}')
    assert card.main([str(tmp_path / "study"), "--out", str(tmp_path / "cards")]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"error: {run / MANIFEST_NAME}: not a readable manifest (calls_made: expected a whole number, got 2.5)\n"
    )


def test_every_reader_goes_through_the_model(tmp_path: Path) -> None:
    """A manifest of a newer schema holds every entry a reader looks for; a reader that parsed the JSON itself
    would use them. Each one goes through read_manifest instead: it refuses the file (the card, annotate:
    one line naming it; the loader, drift) or leaves it out as unreadable (the others, which run after the
    loader has refused it)."""
    run = write_fake_run(tmp_path / "study" / "0_a_independent_novelty", "a", "independent", lambda *_: 3.0)
    newer = {
        "schema_version": MANIFEST_VERSION + 1,
        "judge": "a",
        "study_id": "s1",
        "cache_refresh": "2026-01-01",
        "shard": {"index": 0, "count": 2},
        "dataset_path": str(ROOT / "data" / "sample" / "instances.jsonl"),
        "calls_total": 9,
        "unscored_calls": 9,
        "provider_errors": 1,
        "request": {"sent": {}, "changes": [{"param": "temperature", "asked": 0.1, "sent": 1}]},
    }
    tables = [pa.table({"run_id": [run.name]})]
    (run / MANIFEST_NAME).write_text(json.dumps(newer))
    results = run / "results.csv"
    newer_line = f"{run / MANIFEST_NAME}: not a readable manifest (schema_version 2 is newer"
    assert unscored_line(run / MANIFEST_NAME) is None  # experiments.run
    assert collect.study_ids([results], tables) == {}
    with pytest.raises(shards.ShardMergeError, match=re.escape(newer_line)):  # the loader: refused, one line
        shards.shard_run(results)
    with pytest.raises(ValueError, match=re.escape(newer_line)):
        drift.run_date(run)
    assert requests.request_changes(tmp_path / "study").empty
    with pytest.raises(ValueError, match=re.escape(newer_line)):
        card.run_facts(tmp_path / "study")
    with pytest.raises(annotate_io.AnnotationError, match=re.escape(newer_line)):
        annotate_io.study_inputs(tmp_path / "study")
    # and the same entries at this version are read by each of them
    (run / MANIFEST_NAME).write_text(
        json.dumps(Manifest().to_json() | newer | {"schema_version": MANIFEST_VERSION})
    )
    assert unscored_line(run / MANIFEST_NAME).startswith("9 of 9 calls unscored")
    assert collect.study_ids([results], tables) == {run.name: "s1"}
    assert shards.shard_run(results).shard.count == 2
    assert drift.run_date(run) == "2026-01-01"
    assert requests.request_changes(tmp_path / "study")["parameter"].tolist() == ["temperature"]
    assert card.run_facts(tmp_path / "study")["judge"].tolist() == ["a"]
    assert annotate_io.study_inputs(tmp_path / "study")[1].name == "instances.jsonl"


def test_a_malformed_shard_entry_stops_the_merge_naming_the_file(tmp_path: Path) -> None:
    run = write_fake_run(
        tmp_path / "0_a_independent_novelty", "a", "independent", lambda *_: 3.0, shard="1/2"
    )
    with pytest.raises(shards.ShardMergeError, match=rf"^{re.escape(str(run / MANIFEST_NAME))}: .*shard: "):
        shards.shard_run(run / "results.csv")


def test_no_module_reads_or_writes_a_manifest_as_raw_json() -> None:
    """Only core.schema parses or names manifest.json; every other module uses its reader, writer and
    MANIFEST_NAME (the study's, generate's and extract's manifests alike)."""
    raw = re.compile(
        r"json\.loads?\(.*manifest|manifest.*json\.loads?\(|json\.dumps?\((\w+\()?manifest[,)]|\"manifest\.json\""
    )
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("experiments", "analysis", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "schema.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if raw.search(line)
    ]
    assert found == []


def test_the_viewer_types_come_from_the_results_schema() -> None:
    assert schema.view_types() == {c.name: schema.DUCKDB_TYPES[c.dtype] for c in schema.SCHEMA if c.view}
    assert schema.view_types()["score"] == "DOUBLE" and schema.view_types()["parse_ok"] == "BOOLEAN"


def test_a_column_added_to_the_results_schema_is_in_the_viewer_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No edit to analysis.view.sql: a new schema column marked `view` is typed in the viewer's results view
    (a text "0.25" read as a number), and NULL of its type in a file that lacks it."""
    extra = (Column("judge_confidence", "float64", "a test column", view=True),)
    monkeypatch.setattr(schema, "SCHEMA", schema.SCHEMA + extra)
    with_it, without = tmp_path / "a" / "results.csv", tmp_path / "b" / "results.csv"
    row = {"run_id": "r", "judge": "j", "instance_id": "i", "candidate_id": "c", "dimension": "d", "score": 3}
    for path, values in ((with_it, row | {"judge_confidence": "0.25"}), (without, row)):
        path.parent.mkdir()
        pd.DataFrame([values]).to_csv(path, index=False)
    con = duckdb.connect()
    for path, value in ((with_it, 0.25), (without, None)):
        sql = viewsql.results_sql(con, [path])
        types = {row[0]: row[1] for row in con.execute(f"DESCRIBE {sql}").fetchall()}
        assert types["judge_confidence"] == "DOUBLE" and types["sample_idx"] == "BIGINT"
        assert con.execute(f"SELECT judge_confidence FROM ({sql})").fetchone() == (value,)
