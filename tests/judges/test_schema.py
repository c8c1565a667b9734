"""Judge files: the schema names the bad key; the version is the hash of what can change an answer."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from app.cli import cli
from app.judges.schema import JudgeFileError, parse_judge_text

BASE = """judge: 1
name: cf-judge
endpoint: {base_url: "http://127.0.0.1:9/v1", model: m1, api_key_env: MY_KEY}
taxonomy: a2-failures
strategy: all-at-once
"""


def test_minimal_file_gets_every_default_and_the_builtin_prompts():
    jd = parse_judge_text(BASE)
    d = jd.definition
    assert jd.name == "cf-judge" and len(jd.version) == 16 and jd.content_hash.startswith(jd.version)
    assert d["output"] == "json_schema" and d["sampling"]["samples"] == 1 and d["limits"]["concurrency"] == 4
    assert "{{ trace }}" in d["prompts"]["user"] and d["prompts"]["system"]
    assert d["limits"]["cost_cap"] is None and d["prices"]["input_per_million"] == 0.0


@pytest.mark.parametrize("extra, message", [
    ("limits: {concurency: 3}\n", "limits.concurency: unknown key"),
    ("colour: red\n", "colour: unknown key"),
    ("sampling: {temperature: 5}\n", "sampling.temperature:"),
    ("output: xml\n", "output: must be one of json_schema, tools, text, got 'xml'"),
    ("prompts: {user: '{% if %}'}\n", "prompts.user: template error at line 1"),
    ("prompts: {user: '{{ trace }} {{ traec }}'}\n", "prompts.user: UndefinedError: 'traec' is undefined"),
    ("prompts: {system: '{{ run.__class__ }}'}\n", "prompts.system: SecurityError"),
    ("limits: {processes: 0}\n", "limits.processes:"),
    ("limits: {processes: two}\n", "limits.processes:"),
])
def test_bad_keys_are_named(extra, message):
    with pytest.raises(JudgeFileError) as e:
        parse_judge_text(BASE + extra, "j.yaml")
    assert str(e.value).startswith("j.yaml: ") and message in str(e.value), str(e.value)


def test_missing_and_wrong_required_keys():
    with pytest.raises(JudgeFileError, match=r"endpoint.api_key_env: required key is missing"):
        parse_judge_text(BASE.replace(", api_key_env: MY_KEY", ""))
    with pytest.raises(JudgeFileError, match=r"strategy: must be one of all-at-once"):
        parse_judge_text(BASE.replace("strategy: all-at-once", "strategy: vibes"))
    with pytest.raises(JudgeFileError, match=r"judge: must be 1"):
        parse_judge_text(BASE.replace("judge: 1", "judge: 2"))
    with pytest.raises(JudgeFileError, match=r"line 3: not valid YAML"):
        parse_judge_text("judge: 1\nname: [unclosed\n")
    with pytest.raises(JudgeFileError, match=r"aliases"):
        parse_judge_text(BASE + "x-a: &a [1]\nx-b: *a\n")


def test_version_is_the_content_hash_of_what_changes_answers():
    v = parse_judge_text(BASE).version
    assert parse_judge_text("# a comment\n" + BASE).version == v  # comments do not count
    ops = BASE.replace("127.0.0.1:9", "10.0.0.1:8000").replace("MY_KEY", "OTHER") + \
        "description: moved\nlimits: {concurrency: 32, cost_cap: 5, processes: 2}\nprices: {input_per_million: 3}\n"
    assert parse_judge_text(ops).version == v  # where it is served and how fast: same judge
    assert parse_judge_text(BASE + "prompts: {system: 'Be terse.'}\n").version != v
    assert parse_judge_text(BASE.replace("model: m1", "model: m2")).version != v
    assert parse_judge_text(BASE + "sampling: {samples: 3}\n").version != v
    assert parse_judge_text(BASE, taxonomy_hash="abc").version != v  # a new taxonomy version


def test_cli_validate(tmp_path, monkeypatch):
    import app.cli.judge as cj

    monkeypatch.setattr(cj, "checked_engine", lambda: (_ for _ in ()).throw(RuntimeError("no db")))
    good = tmp_path / "j.yaml"
    good.write_text(BASE)
    r = CliRunner().invoke(cli, ["judge", "validate", str(good)])
    assert r.exit_code == 0 and f"ok: cf-judge@{parse_judge_text(BASE).version}" in r.output, r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(BASE + "limits: {retries: -1}\n")
    r = CliRunner().invoke(cli, ["judge", "validate", str(bad)])
    assert r.exit_code == 1 and r.output.startswith(f"Error: {bad}: limits.retries:"), r.output
