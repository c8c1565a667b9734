"""The detectors on the synthetic demo corpus against its seeded truth (the numbers in docs/detectors.md)."""
from __future__ import annotations

from app.core.config import get_settings
from app.demo.generator import generate_corpus
from app.detectors import builtin_detectors, mode_map, run_detectors
from app.detectors.scoring import score_source
from app.taxonomies.loader import load_taxonomy_file


def test_demo_corpus_scores():
    corpus = generate_corpus(130, seed=3)
    mm = mode_map(load_taxonomy_file(get_settings().taxonomy_dir / "a2-failures.yaml").definition)
    ref = {d.run["run_id"]: {(t["mode"], t["agent"]) for t in d.truth} for d in corpus}
    per: dict[str, dict] = {det.name: {} for det in builtin_detectors()}
    for d in corpus:
        for res in run_detectors(d.run, builtin_detectors(), mm):
            assert res.error is None
            per[res.detector.name][d.run["run_id"]] = (d.run["run_id"], {(x["mode"], x["agent"]) for x in res.labels})
    scores = {}
    for det in builtin_detectors():
        row = score_source(per[det.name], ref, [mm[det.key]], level="agent", n_boot=0)["modes"][0]
        scores[det.name] = row
    for name in ("leak", "divergence", "mandate", "handoff"):
        assert scores[name]["tp"] >= 5, (name, scores[name])
        assert scores[name]["precision"] >= 0.9 and scores[name]["recall"] >= 0.9, (name, scores[name])
    # the demo's VF1 story has no contradicting value in the recipient's state: the detector stays silent
    assert scores["unchecked_claim"]["fp"] == 0
