"""The outcome report against bare pandas on the exported Parquet, and how both grow with x10 data.

a2annotate: ``load_report_data`` (one query per table) + ``outcome_frame(by="model")`` from the
database, labels of the judge ``judge:judge-l2`` (the demo corpus's audits); a second row times
``outcome_frame`` alone on frames already loaded (the share of the database read is the rest).  Baseline in the
same run: pandas reading the exported ``runs`` / ``agents`` / ``principals`` Parquet files, the
joins and one ``groupby("model")`` giving the same n, runs, aggregate and principal success
rates and mean principal score (checked equal).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bench.common import bench_dir, loaded_sqlite, median_time, row

THRESHOLD = 0.5
SOURCE = "annotator:judge:judge-l2"


def _pandas(files: dict[str, Path]):
    import pandas as pd

    runs = pd.read_parquet(files["runs"], columns=["run_id", "status", "aggregate_score"])
    agents = pd.read_parquet(files["agents"], columns=["run_id", "agent_id", "principal_id", "model"])
    princ = pd.read_parquet(files["principals"], columns=["run_id", "principal_id", "success", "score"])
    u = agents[agents["principal_id"].notna()].merge(runs, on="run_id").merge(princ, on=["run_id", "principal_id"],
                                                                              how="left")
    u["agg"] = (u["status"] == "completed") & (u["aggregate_score"] >= THRESHOLD)
    succ = u["success"].astype("boolean")
    has_flag, has_score = succ.notna().to_numpy(), u["score"].notna().to_numpy()
    u["p_known"] = has_flag | has_score
    u["p_ok"] = np.where(has_flag, succ.fillna(False).to_numpy(dtype=bool),
                         has_score & (u["score"].to_numpy() >= THRESHOLD))
    g = u.groupby("model", dropna=False)
    out = pd.DataFrame({
        "runs": g["run_id"].nunique(), "n": g.size(), "aggregate_success_rate": g["agg"].mean(),
        "principal_known": g["p_known"].sum(), "p_ok": g["p_ok"].sum(), "mean_principal_score": g["score"].mean(),
    })
    out["principal_success_rate"] = out["p_ok"] / out["principal_known"]
    return out


def _data(engine):
    from sqlmodel import Session

    from app.reports import service

    with Session(engine) as s:
        return service.load_report_data(s, threshold=THRESHOLD)


def _compute(data):
    from app.reports import service

    return service.outcome_frame(data, "model", SOURCE)


def _ours(engine):
    return _compute(_data(engine))


def _measure(n_runs: int) -> tuple[float, float, list[str]]:
    from app.core.db import make_engine
    from app.exports.service import export_to_dir

    d = bench_dir()
    engine = make_engine(loaded_sqlite(d, n_runs))
    out = d / f"parquet-{n_runs}"
    files = {t: p for t, p, _ in export_to_dir(engine, out, "parquet", ["runs", "agents", "principals"])}
    ours_frame, base_frame = _ours(engine), _pandas(files)
    for col in ("runs", "n", "aggregate_success_rate", "principal_success_rate", "mean_principal_score"):
        a = ours_frame.set_index("model")[col].astype(float).sort_index()
        b = base_frame[col].astype(float).sort_index()
        assert np.allclose(a.to_numpy(), b.to_numpy(), equal_nan=True), (col, a, b)
    ours = median_time(lambda: _ours(engine))
    base = median_time(lambda: _pandas(files))
    data = _data(engine)
    compute = median_time(lambda: _compute(data))
    engine.dispose()
    baseline = f"bare pandas groupby on the exported Parquet (same numbers): {base:.3f} s"
    return ours, base, [
        row(f"outcome report by model, {n_runs:,} runs", f"{ours:.2f} s", baseline, ours / base, "within 1.5x"),
        row(f"of which the computation (`outcome_frame` on loaded frames), {n_runs:,} runs", f"{compute:.3f} s",
            baseline, compute / base, "", "breakdown"),
    ]


def main(quick: bool = False) -> list[str]:
    sizes = [5, 20] if quick else ([2500, 25000] if os.environ.get("BENCH_LARGE") else [250, 2500])
    results = [_measure(n) for n in sizes]
    rows = [r for _, _, rs in results for r in rs]
    (o1, b1, _), (o2, b2, _) = results
    rows.append(row(f"how the outcome report grows, {sizes[0]:,} -> {sizes[1]:,} runs (x10 data)",
                    f"x{o2 / o1:.1f}", f"pandas x{b2 / b1:.1f}", o2 / o1, "at most x11 (linear)"))
    return rows


if __name__ == "__main__":
    import sys

    print("\n".join(main("--quick" in sys.argv)))
