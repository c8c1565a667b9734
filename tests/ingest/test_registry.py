"""The reader registry: built-ins found through the entry point group, detection by sniff score."""
from __future__ import annotations

import json
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from app.ingest import detect_format, iter_path
from app.ingest.canonical import RunFormatError
from app.ingest.items import item_from_raw
from app.ingest.readers.base import ENTRY_POINT_GROUP, Reader, Sniff
from app.ingest.registry import Registry, load_registry, registered, registry

ROOT = Path(__file__).resolve().parents[2]
BUILTINS = {"canonical", "tree", "wire", "mad", "whowhen", "otlp"}


def test_builtins_are_declared_as_entry_points_and_found_there():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert BUILTINS <= set(declared)
    found = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert BUILTINS <= found, "reinstall (make install): the entry points of pyproject.toml are not installed"
    reg = load_registry()
    assert BUILTINS <= {e.name for e in reg.entries() if e.builtin}
    assert reg.problems == []
    # the old format names keep working
    assert reg.get("openinference") is reg.get("otlp")
    assert set(reg.names()) >= BUILTINS | {"openinference"}


def test_without_entry_points_there_are_no_plugins_but_builtins_from_pyproject():
    reg = load_registry(use_entry_points=False)
    assert {e.name for e in reg.entries()} == BUILTINS | ({e.name for e in registry().entries() if e.builtin} - BUILTINS)


class _Always(Reader):
    name = "always-test"
    description = "claims every JSON file"

    def __init__(self, score: float):
        self.score = score

    def sniff(self, path):
        return Sniff(self.score, "claims everything")

    def read(self, path, shown):
        yield item_from_raw(_raw("from-always"), shown)


def _raw(run_id: str) -> dict:
    return {"run_id": run_id, "scenario": {"id": "s/1", "family": "s"}, "principals": [{"id": "p"}],
            "agents": [{"id": "a", "principal": "p"}],
            "events": [{"seq": 0, "kind": "message", "actor": "a", "content": "hi"}]}


def _run_file(tmp_path: Path) -> Path:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(_raw("r1")))
    return p


def test_highest_score_wins_and_ties_go_to_the_builtin(tmp_path):
    p = _run_file(tmp_path)
    assert detect_format(p) == "canonical"
    with registered(_Always(0.9)):  # a tie with canonical's 0.9: the built-in keeps it
        assert detect_format(p) == "canonical"
    with registered(_Always(0.99)):
        assert detect_format(p) == "always-test"
        assert [i.run["run_id"] for i in iter_path(p)] == ["from-always"]
        # --format names it too
        assert [i.run["run_id"] for i in iter_path(p, format="always-test")] == ["from-always"]
    assert detect_format(p) == "canonical"  # unregistered again
    with pytest.raises(ValueError, match="unknown format 'always-test'"):
        list(iter_path(p, format="always-test"))


def test_a_sniff_that_raises_is_a_reason_not_a_crash(tmp_path):
    class Broken(_Always):
        name = "broken-test"

        def sniff(self, path):
            raise RuntimeError("boom")

    p = _run_file(tmp_path)
    with registered(Broken(0)):
        tried = registry().sniff_all(p)
        broken = [t for t in tried if t.name == "broken-test"][0]
        assert broken.sniff.score == 0 and "boom" in broken.sniff.reason
        assert detect_format(p) == "canonical"


def test_unknown_json_names_every_reader_and_points_to_inspect(tmp_path):
    p = tmp_path / "other.json"
    p.write_text(json.dumps([{"sender": "bob", "text": "hi"}]))
    with pytest.raises(RunFormatError) as exc:
        detect_format(p)
    msg = str(exc.value)
    for name in BUILTINS - {"tree"}:
        assert f"{name}: " in msg
    assert "a2annotate inspect" in msg and "run_id" not in msg.split("(")[0]
    (item,) = list(iter_path(p))
    assert item.error is not None and "a2annotate inspect" in item.error.message
    assert "required field is missing" not in item.error.message


def test_directory_readers_take_a_whole_directory_when_they_score_higher(tmp_path):
    class DirReader(_Always):
        name = "dir-test"
        reads_dirs = True

        def sniff(self, path):
            return Sniff(0.8 if (path / "marker.txt").exists() else 0.0, "a marker file")

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "marker.txt").write_text("x")
    with registered(DirReader(0)):
        assert detect_format(tmp_path / "d") == "dir-test"
        assert [i.run["run_id"] for i in iter_path(tmp_path / "d")] == ["from-always"]
        (tmp_path / "d" / "marker.txt").unlink()
        assert detect_format(tmp_path / "d") == "tree"


def test_registry_add_rejects_objects_that_are_not_readers():
    reg = Registry()
    with pytest.raises(TypeError, match="has no read"):
        reg.add(type("X", (), {"name": "x", "sniff": lambda self, p: Sniff(0)})())
