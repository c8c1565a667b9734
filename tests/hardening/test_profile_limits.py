"""Import profiles under hostile input: YAML within the limits (aliases, size, number of values,
nesting: each refused fast, naming file and line) and every path a profile names kept inside the
tree it reads (issue 23, rows 13 and 14)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from app.ingest import iter_path
from app.ingest.profile import PROFILE_DIR, ProfileError, load_profile
from tests.ingest.release_fixtures import build_release

LAUGHS = "profile: 1\nname: laughs\na: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9) + "]\n" for i in range(5))


@pytest.mark.parametrize("text,needle", [
    (LAUGHS, "aliases (*name) are not accepted (line 4)"),
    # 40,000 keys in 310 KB: over the size bound before anything is parsed
    ("profile: 1\nname: keys\n" + "".join(f"k{i:06d}: 1\n" for i in range(40_000)), "longer than"),
    # 12,000 keys within the size bound: stopped at the 20,001st value, naming its line
    ("profile: 1\nname: keys\n" + "".join(f"k{i}: 1\n" for i in range(12_000)), "more than 20000 values at line"),
    ("profile: 1\nname: deep\nx: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64 levels at line 3"),
])
def test_a_hostile_profile_is_refused_fast_naming_the_line(tmp_path, text, needle):
    p = tmp_path / "hostile.yaml"
    p.write_text(text)
    t = time.perf_counter()
    with pytest.raises(ProfileError) as err:
        load_profile(str(p))
    assert time.perf_counter() - t < 5
    assert str(p) in str(err.value) and needle in str(err.value)


def test_the_shipped_profiles_still_load():
    for p in sorted(PROFILE_DIR.glob("*.yaml")):
        assert load_profile(str(p)).spec["name"]


def _release_profile(tmp_path: Path, manifest_file: str) -> Path:
    spec = yaml.safe_load((PROFILE_DIR / "a2f-release-style.yaml").read_text())
    spec["manifest"]["file"] = manifest_file
    out = tmp_path / "profile.yaml"
    out.write_text(yaml.safe_dump(spec))
    return out


@pytest.mark.parametrize("where", ["absolute", "dotdot"])
def test_a_profile_naming_a_manifest_outside_the_tree_is_refused(tmp_path, where):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"runs": [{"canonical_path": "x", "original_run_id": "stolen-secret"}]}))
    tree = tmp_path / "tree"
    build_release(tree, n_runs=1)
    rel = str(secret) if where == "absolute" else "../secret.json"
    prof = _release_profile(tmp_path, rel)
    with pytest.raises(ProfileError) as err:
        list(iter_path(tree, profile=str(prof)))
    assert "manifest.file: must be a path inside the tree" in str(err.value)


def test_a_manifest_or_run_file_linking_out_of_the_tree_is_not_read(tmp_path):
    tree = tmp_path / "tree"
    info = build_release(tree, n_runs=1)
    outside = tmp_path / "outside"
    outside.mkdir()
    real = json.loads((tree / "export_manifest.json").read_text())
    for r in real["runs"]:
        r["historical_task"] = "stolen-secret"
    (outside / "manifest.json").write_text(json.dumps(real))
    (outside / "metrics.json").write_text(json.dumps({"score": 0.123, "secret": "stolen-secret"}))
    os.symlink(outside / "manifest.json", tree / "linked_manifest.json")
    run_dir = tree / info["runs"][0]["dir"]
    (run_dir / "metrics.json").unlink()
    os.symlink(outside / "metrics.json", run_dir / "metrics.json")
    items = list(iter_path(tree, profile=str(_release_profile(tmp_path, "linked_manifest.json"))))
    assert "stolen-secret" not in json.dumps([i.run for i in items if i.run])
    warnings = [w for i in items for w in i.warnings]
    assert any("linked_manifest.json" in w["location"] and "out of the tree" in w["message"] for w in warnings)
    assert any(i.run for i in items)  # the run itself is still read
