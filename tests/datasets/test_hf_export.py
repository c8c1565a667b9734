"""The Hugging Face datasets-ready folder: Parquet shards under data/ that pandas loads, and a
dataset card whose YAML header lists every config and every column (and the body the schema,
taxonomy versions and label provenance); CLI and REST."""
from __future__ import annotations

import io
import zipfile

import pandas as pd
import pyarrow.parquet as pq
import yaml

from app.exports.hf import SHARD, hf_tables

from .conftest import DATA

TABLES = ["runs", "agents", "principals", "events", "annotations", "gold_labels"]


def _card(text: str) -> tuple[dict, str]:
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


def test_cli_hf_folder_loads_with_pandas_and_the_card_lists_every_column(engine, run_cli, tmp_path):
    assert run_cli("import", DATA / "MAD_full_dataset.json").exit_code == 0
    assert run_cli("import", DATA / "MAD_human_labelled_dataset.json").exit_code == 0
    assert run_cli("import", DATA / "whowhen").exit_code == 0
    out = tmp_path / "hf"
    res = run_cli("export", "--format", "hf", "--out", out)
    assert res.exit_code == 0, res.output
    assert [t for t in hf_tables() if t != "checks"] == TABLES
    frames = {t: pd.read_parquet(out / "data" / t) for t in hf_tables()}
    assert len(frames["runs"]) == 8 + 6 + 2
    ann = frames["annotations"]
    assert set(ann["annotator"]) >= {"judge:mast-llm", "mad:annotator_1", "whowhen:annotators"}
    attribution = ann[(ann["annotator"] == "whowhen:annotators")]
    assert attribution["mode"].isna().all() and list(attribution["evidence"].map(list)) in ([[4], [3]], [[3], [4]])
    assert len(frames["events"]) == sum(1 for _ in frames["events"]["seq"]) and (frames["events"]["seq"] >= 0).all()

    header, body = _card((out / "README.md").read_text(encoding="utf-8"))
    with_rows = [t for t in hf_tables() if len(frames[t])]
    # nothing adjudicated here, and these datasets carry no deterministic checks
    assert set(hf_tables()) - set(with_rows) == {"gold_labels", "checks"}
    assert [c["config_name"] for c in header["configs"]] == with_rows  # `datasets` cannot load an empty split
    assert header["configs"][0]["default"] is True
    for cfg in header["configs"]:
        assert cfg["data_files"] == [{"split": "train", "path": f"data/{cfg['config_name']}/*.parquet"}]
    info = {d["config_name"]: d for d in header["dataset_info"]}
    for t in hf_tables():
        columns = pq.read_schema(out / "data" / t / SHARD).names
        if t in with_rows:
            assert [f["name"] for f in info[t]["features"]] == columns  # every column, in order
            (split,) = info[t]["splits"]
            assert split["name"] == "train" and split["num_examples"] == len(frames[t]) and split["num_bytes"] > 0
        assert f"### {t}\n" in body
        for c in columns:
            assert f"| `{c}` |" in body, (t, c)
    assert "Empty tables (`gold_labels`, `checks`)" in body
    feats = {f["name"]: f for f in info["annotations"]["features"]}
    assert feats["evidence"] == {"name": "evidence", "sequence": "int64"}
    assert feats["mode"] == {"name": "mode", "dtype": "string"}
    assert feats["submitted_at"]["dtype"].startswith("timestamp[us")
    assert "## Taxonomy versions" in body and "`mast-draft-r2@1`" in body and "`mast@1`" in body
    assert "## Label provenance" in body and "by annotator kind" in body and "source" in body and "judge" in body


def test_rest_hf_zip_and_blind_mode(client, engine):
    with open(DATA / "MAD_full_dataset.json", "rb") as f:
        assert client.post("/api/v1/imports", files={"file": ("MAD_full_dataset.json", f)},
                           headers=client.hdr["admin"]).json()["imported"] == 8
    res = client.get("/api/v1/exports/hf.zip", headers=client.hdr["admin"])
    assert res.status_code == 200, res.text
    assert res.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(res.content)) as z:
        names = set(z.namelist())
        assert "README.md" in names and f"data/runs/{SHARD}" in names and f"data/annotations/{SHARD}" in names
        runs = pd.read_parquet(io.BytesIO(z.read(f"data/runs/{SHARD}")))
    assert len(runs) == 8
    assert client.get("/api/v1/exports/hf.zip", headers=client.hdr["annotator"]).status_code == 403
    # the one-table route still serves its tables
    assert client.get("/api/v1/exports/runs.csv", headers=client.hdr["admin"]).status_code == 200


def test_rest_hf_zip_as_a_job_with_its_file(client, engine):
    """`Prefer: respond-async`: 202 with the job; the job's progress and file; who may download it."""
    with open(DATA / "MAD_full_dataset.json", "rb") as f:
        assert client.post("/api/v1/imports", files={"file": ("MAD_full_dataset.json", f)},
                           headers=client.hdr["admin"]).json()["imported"] == 8
    res = client.get("/api/v1/exports/hf.zip", headers={**client.hdr["admin"], "Prefer": "respond-async"})
    assert res.status_code == 202, res.text
    job_id = res.json()["job"]["id"]
    assert res.headers["Location"] == f"/api/v1/jobs/{job_id}"
    job = client.get(f"/api/v1/jobs/{job_id}", headers=client.hdr["admin"]).json()
    assert job["kind"] == "export_hf" and job["state"] == "done"  # the tests' immediate broker ran it
    assert job["progress"] == {"done": 3, "total": 3} and job["result"]["filename"] == "a2annotate-hf.zip"
    got = client.get(f"/api/v1/jobs/{job_id}/file", headers=client.hdr["admin"])
    assert got.status_code == 200 and got.headers["content-type"] == "application/zip"
    assert 'filename="a2annotate-hf.zip"' in got.headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(got.content)) as z:
        assert len(pd.read_parquet(io.BytesIO(z.read(f"data/runs/{SHARD}")))) == 8
    # the admin's export (it may hold the demo truth) is the admin's: others get 404
    assert client.get(f"/api/v1/jobs/{job_id}/file", headers=client.hdr["annotator"]).status_code == 404
    # a job that makes no file
    imports = client.get("/api/v1/jobs", params={"kind": "import"}, headers=client.hdr["admin"]).json()
    assert client.get(f"/api/v1/jobs/{imports[0]['id']}/file", headers=client.hdr["admin"]).status_code == 409
