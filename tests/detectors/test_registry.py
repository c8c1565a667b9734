"""Mapping through the taxonomy file, a raising detector, user detectors (settings path, entry point)."""
from __future__ import annotations

import sys
import textwrap

from app.core.config import get_settings
from app.detectors import (
    ENTRY_POINT_GROUP,
    builtin_detectors,
    load_registry,
    mode_map,
    run_detectors,
)
from app.detectors.base import Candidate, Detector
from app.taxonomies.loader import load_taxonomy_file, validate_file

from .runs import ev, make_run

TAXONOMY = get_settings().taxonomy_dir / "a2-failures.yaml"


def _run():
    return make_run([ev("buyer_agent", "seller_agent", "Our budget is $18,500. Any accidents?")],
                    buyer_state={"budget": 18500})


def test_builtin_keys_map_to_modes_through_the_taxonomy_file():
    assert validate_file(TAXONOMY) == []
    mm = mode_map(load_taxonomy_file(TAXONOMY).definition)
    got = {d.name: mm[d.key] for d in builtin_detectors()}
    assert got == {"leak": "CF1", "divergence": "GR3", "mandate": "CF3", "handoff": "DD5", "unchecked_claim": "VF1"}
    # a taxonomy without the mapping yields no labels (nothing hard-coded), the candidate is reported
    [res] = run_detectors(_run(), [b for b in builtin_detectors() if b.name == "leak"], {})
    assert res.labels == [] and res.dropped and res.error is None


def test_a_raising_detector_is_reported_and_the_others_still_run():
    def boom(run):
        raise RuntimeError("bad run shape")

    bad = Detector(name="boom", version="0", key="private-value-leak", description="", detect=boom)
    mm = mode_map(load_taxonomy_file(TAXONOMY).definition)
    results = run_detectors(_run(), [bad, *builtin_detectors()], mm)
    assert results[0].error.startswith("RuntimeError: bad run shape") and results[0].labels == []
    by = {r.detector.name: r for r in results}
    assert [lab["mode"] for lab in by["leak"].labels] == ["CF1"]
    assert [lab["mode"] for lab in by["handoff"].labels] == ["DD5"]
    assert all(r.error is None for r in results[1:])


def test_candidate_naming_its_own_mode_and_bad_candidates():
    def mine(run):
        return [{"mode": "GR1", "agent": "seller_agent", "evidence": [0], "reason": "made up"},
                {"mode": "GR1", "agent": "nobody", "evidence": [0], "reason": "x"},
                Candidate(agent="buyer_agent", evidence=(99,), reason="no such event", mode="GR1"),
                {"mode": "ZZ9", "agent": "buyer_agent", "evidence": [0], "reason": "unknown mode"}]

    d = Detector(name="mine", version="2", key="mine", description="", detect=mine)
    [res] = run_detectors(_run(), [d], {}, valid_modes=["GR1", "CF1"])
    assert [(lab["mode"], lab["agent"]) for lab in res.labels] == [("GR1", "seller_agent")]
    assert len(res.dropped) == 3


def test_user_detector_from_a_settings_path(tmp_path):
    f = tmp_path / "my_checks.py"
    f.write_text(textwrap.dedent('''
        def shouting(run):
            """Messages in capitals."""
            return [{"agent": e["actor"], "evidence": [e["seq"]], "reason": "shouting"}
                    for e in run["events"] if (e.get("content") or "").isupper()]
        shouting.version = "3"
        shouting.key = "shouting"
    '''))
    reg = load_registry(f"{f}:shouting, nosuch.module:thing", use_entry_points=False)
    d = reg.get("shouting")
    assert d is not None and d.version == "3" and d.origin.startswith("settings")
    assert len(reg.problems) == 1 and "nosuch" in reg.problems[0]
    run = make_run([ev("buyer_agent", "seller_agent", "HELLO")])
    [res] = run_detectors(run, [d], {"shouting": "CF4"})
    assert res.labels == [{"mode": "CF4", "agent": "buyer_agent", "evidence": [0], "principals": [],
                           "note": "shouting"}]


def test_user_detector_registered_as_an_entry_point(tmp_path, monkeypatch):
    pkg = tmp_path / "site"
    (pkg / "acme_checks").mkdir(parents=True)
    (pkg / "acme_checks" / "__init__.py").write_text(
        "def long_message(run):\n"
        "    return [{'agent': e['actor'], 'evidence': [e['seq']], 'reason': 'long', 'mode': 'CF4'}\n"
        "            for e in run['events'] if len(e.get('content') or '') > 30]\n")
    dist = pkg / "acme_checks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-checks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nlong_message = acme_checks:long_message\n"
                                           "leak = acme_checks:long_message\n")
    monkeypatch.syspath_prepend(str(pkg))
    reg = load_registry("")
    d = reg.get("long_message")
    assert d is not None and d.origin == "entry point long_message"
    assert any("'leak' is already registered" in p for p in reg.problems)  # a built-in is not replaced
    [res] = run_detectors(_run(), [d], {})
    assert [lab["mode"] for lab in res.labels] == ["CF4"]
    sys.modules.pop("acme_checks", None)


def test_a_detector_returning_garbage_is_an_error_not_a_crash():
    bad = Detector(name="garbage", version="0", key="x", description="", detect=lambda run: [42])
    worse = Detector(name="worse", version="0", key="x", description="",
                     detect=lambda run: [Candidate(agent=["not", "hashable"], evidence=(0,), reason="r", mode="CF1")])
    r1, r2, r3 = run_detectors(_run(), [bad, worse, *builtin_detectors()[:1]], {"x": "CF1", "private-value-leak": "CF1"})
    assert r1.error.startswith("TypeError") and r1.labels == []
    assert r2.error is None and r2.labels == [] and r2.dropped
    assert r3.error is None and len(r3.labels) == 1


def test_the_taxonomy_file_schema_checks_detector_keys(tmp_path):
    import yaml

    data = yaml.safe_load(TAXONOMY.read_text())
    modes = {m["code"]: m for m in data["modes"]}
    modes["GR1"]["detectors"] = ["private-value-leak"]  # already CF1's
    modes["GR2"]["detectors"] = ["bad key!"]
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(data))
    problems = validate_file(f)
    assert any("detector 'private-value-leak' is already mapped to modes[" in p for p in problems), problems
    assert any("detectors" in p and "bad key!" in p for p in problems), problems
    del modes["GR1"]["detectors"], modes["GR2"]["detectors"]
    modes["GR1"]["x-detectors"] = ["my_check"]
    f.write_text(yaml.safe_dump(data))
    assert validate_file(f) == []
    assert mode_map(load_taxonomy_file(f).definition)["my_check"] == "GR1"


def test_files_without_detectors_keep_their_normalized_shape():
    """A mode without `detectors` normalizes exactly as before (so its file's content hash, and
    its taxonomy version, do not change)."""
    mast = load_taxonomy_file(get_settings().taxonomy_dir / "mast.yaml")
    for m in mast.definition["modes"]:
        assert {k for k in m if not k.startswith("x-")} == {"code", "name", "category", "definition", "boundary",
                                                              "hint", "aliases"}
