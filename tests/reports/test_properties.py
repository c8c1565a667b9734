"""Properties of the report functions on generated input (tests/reports/_strategies.py).

No second implementation is consulted: each test states something the documented definitions
imply and that a wrong implementation breaks, and checks it on every generated corpus:

* how a frame is stored (inferred dtypes, plain ``object`` columns, column order, extra columns)
  changes neither a result nor an error message;
* an error names the first bad row of its frame (the rows before it are fine, the rows after it
  do not matter);
* the order of the input rows does not change a result, bit for bit (means are correctly rounded);
* the counts add up: units per group sum to the units, known + unknown = n, a coarser grouping is
  the sum of a finer one, rates lie in [0, 1] and the gap is their difference;
* blind spots are aggregate successes with a reason each, and their rates count them; cross-play
  cells mirror each other.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict

import numpy as np
import pandas as pd
from hypothesis import assume, given
from hypothesis import strategies as st

from app.reports import outcomes
from app.reports.outcomes import ReportInputError

from ._strategies import OPTIONS, SETTINGS, SOURCES, corpora

FRAME_ROW = re.compile(r"^(runs|principals|agents|labels|submissions) row (\d+)\b")
RUN_NAMED = re.compile(r" \(run_id='([^']*)'\)")


def _call(fn, *args, **kwargs):
    """('ok', result) or ('error', message); frames are copied so no call sees another's changes."""
    args = tuple(a.copy() if isinstance(a, pd.DataFrame) else a for a in args)
    try:
        return ("ok", fn(*args, **kwargs))
    except ReportInputError as exc:
        return ("error", str(exc))


def _assert_same(got, want):
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert got[1] == want[1]
        return
    a, b = got[1], want[1]
    if isinstance(a, tuple):  # resolve_labels: (frame, summary)
        assert a[1] == b[1]
        a, b = a[0], b[0]
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a.attrs == b.attrs
    for col in a.columns:  # the same Python types in object columns (None vs NaN, str vs np.str_)
        assert list(map(type, a[col])) == list(map(type, b[col])), col


def _restored(df: pd.DataFrame, how: str) -> pd.DataFrame:
    if how == "object":
        return df.astype(object)
    if how == "reversed":
        return df[list(df.columns)[::-1]]
    return df.assign(extra_column=[["x"]] * len(df))  # an extra, unhashable column is ignored


def _resolved(corpus, source="auto"):
    runs, _, _, labels, subs, gold = corpus
    res = _call(outcomes.resolve_labels, labels, subs, gold, source=source, run_ids=list(runs["run_id"]))
    return None if res[0] == "error" else res[1][0]


# --------------------------------------------------------------------------------------------
# storage


@SETTINGS
@given(corpora(), st.sampled_from(sorted(outcomes.GROUPINGS)), OPTIONS, SOURCES,
       st.sampled_from(["object", "reversed", "extra"]))
def test_storage_changes_neither_result_nor_error(corpus, by, options, source, how):
    runs, principals, agents, labels, subs, gold = corpus
    other = [_restored(df, how) for df in (runs, principals, agents, labels, subs)]
    _assert_same(_call(outcomes.resolve_labels, other[3], other[4], gold, source=source),
                 _call(outcomes.resolve_labels, labels, subs, gold, source=source))
    for report_labels in (labels, _resolved(corpus, "majority")):
        if report_labels is None:
            continue
        _assert_same(_call(outcomes.outcome_report, *other[:3], _restored(report_labels, how), by, **options),
                     _call(outcomes.outcome_report, runs, principals, agents, report_labels, by, **options))
        _assert_same(_call(outcomes.blind_spots, other[0], other[1], _restored(report_labels, how)),
                     _call(outcomes.blind_spots, runs, principals, report_labels))
    _assert_same(_call(outcomes.crossplay, *other[:3]), _call(outcomes.crossplay, runs, principals, agents))


# --------------------------------------------------------------------------------------------
# errors name the first bad row


def _frames(corpus, report_labels):
    runs, principals, agents = corpus[:3]
    return {"runs": runs, "principals": principals, "agents": agents, "labels": report_labels}


@SETTINGS
@given(corpora(p_bad=0.15), st.sampled_from(sorted(outcomes.GROUPINGS)), st.booleans())
def test_an_error_names_the_first_bad_row(corpus, by, raw):
    report_labels = corpus[3] if raw else _resolved(corpus)
    if report_labels is None:
        return
    frames = _frames(corpus, report_labels)
    order = list(frames)

    def report(fr):
        return _call(outcomes.outcome_report, *(fr[k] for k in order), by)

    got = report(frames)
    if got[0] == "ok":
        return
    m = FRAME_ROW.match(got[1])
    if m is None:  # a whole-frame or argument error (a missing column, a category conflict)
        assert not got[1].startswith(tuple(f"{k} row" for k in order))
        return
    name, i = m.group(1), int(m.group(2))
    # the rows after the bad one do not matter ...
    cut = dict(frames, **{name: frames[name].iloc[: i + 1]})
    assert report(cut) == got
    # ... and the rows before it pass their checks (any error now is about another frame)
    before = report(dict(frames, **{name: frames[name].iloc[:i]}))
    if before[0] == "error":
        later = FRAME_ROW.match(before[1])
        assert later is None or order.index(later.group(1)) > order.index(name), (got, before)


@SETTINGS
@given(corpora(p_bad=0.15), SOURCES)
def test_resolve_labels_error_names_the_first_bad_row(corpus, source):
    runs, _, _, labels, subs, gold = corpus
    got = _call(outcomes.resolve_labels, labels, subs, gold, source=source)
    if got[0] == "ok":
        return
    m = FRAME_ROW.match(got[1])
    if m is None:
        return
    name, i = m.group(1), int(m.group(2))
    frames = {"labels": labels, "submissions": subs}
    cut = dict(frames, **{name: frames[name].iloc[: i + 1]})
    assert _call(outcomes.resolve_labels, cut["labels"], cut["submissions"], gold, source=source) == got
    before = dict(frames, **{name: frames[name].iloc[:i]})
    res = _call(outcomes.resolve_labels, before["labels"], before["submissions"], gold, source=source)
    assert res[0] == "ok" or not res[1].startswith(f"{name} row")


# --------------------------------------------------------------------------------------------
# row order


@SETTINGS
@given(corpora(bad=False), st.sampled_from(sorted(outcomes.GROUPINGS)), SOURCES, st.randoms(use_true_random=False))
def test_row_order_does_not_change_any_report(corpus, by, source, rnd):
    runs, principals, agents, labels, subs, gold = corpus

    def shuffled(df):
        idx = list(range(len(df)))
        rnd.shuffle(idx)
        return df.iloc[idx].reset_index(drop=True)

    first = _call(outcomes.resolve_labels, labels, subs, gold, source=source, run_ids=list(runs["run_id"]))
    again = _call(outcomes.resolve_labels, shuffled(labels), shuffled(subs), gold, source=source,
                  run_ids=list(runs["run_id"]))
    if first[0] == "error":  # the same complaint, about the row where the bad value now is
        # (with several bad rows the first one after shuffling may be another run's: the complaint is
        # the same but names that run, which must be a run of the frames)
        assert again[0] == "error"
        assert RUN_NAMED.sub("", FRAME_ROW.sub("", again[1])) == RUN_NAMED.sub("", FRAME_ROW.sub("", first[1]))
        named = RUN_NAMED.search(again[1])
        if named:
            assert named.group(1) in set(labels["run_id"].astype(str)) | set(subs["run_id"].astype(str))
        return
    _assert_same(again, first)
    resolved = first[1][0]
    kw = {"labelled_runs": resolved.attrs["labelled_runs"], "label_source": "x"}
    _assert_same(_call(outcomes.outcome_report, shuffled(runs), shuffled(principals), shuffled(agents),
                       shuffled(resolved), by, **kw),
                 _call(outcomes.outcome_report, runs, principals, agents, resolved, by, **kw))
    _assert_same(_call(outcomes.blind_spots, shuffled(runs), shuffled(principals), shuffled(resolved)),
                 _call(outcomes.blind_spots, runs, principals, resolved))
    _assert_same(_call(outcomes.crossplay, shuffled(runs), shuffled(principals), shuffled(agents)),
                 _call(outcomes.crossplay, runs, principals, agents))


# --------------------------------------------------------------------------------------------
# counts add up


RATES = ("aggregate_success_rate", "principal_success_rate", "responsible_rate")


def _k(value) -> str:
    """A group key as text, None and NaN alike (groupby turns None into NaN)."""
    return "<none>" if value is None or value != value else str(value)


def _hits(frame: pd.DataFrame, rate: str, total: str) -> pd.Series:
    """The integer count behind a rate column (rate * denominator, 0 where undefined)."""
    return (frame[rate].astype(float).fillna(0.0) * frame[total].astype(float)).round().astype(int)


@SETTINGS
@given(corpora(bad=False), SOURCES, st.sampled_from([0.0, 0.3, 0.5, 1.0]))
def test_counts_add_up_across_groupings(corpus, source, threshold):
    runs, principals, agents = corpus[:3]
    resolved = _resolved(corpus, source)
    if resolved is None:
        return
    kw = {"threshold": threshold, "labelled_runs": resolved.attrs["labelled_runs"]}
    reports = {by: outcomes.outcome_report(runs, principals, agents, resolved, by, **kw) for by in outcomes.GROUPINGS}
    for by, rep in reports.items():
        units = len(agents) if by in ("agent", "model", "harness") else len(principals)
        assert rep["n"].sum() == units, by
        assert (rep["principal_known"] + rep["principal_unknown"] == rep["n"]).all()
        assert (rep["runs"] <= rep["n"]).all() and (rep["labelled_n"] <= rep["n"]).all()
        assert (rep["n"] > 0).all()
        rate_cols = [c for c in rep.columns if c in RATES or c.startswith(("cat:", "mode:"))]
        for c in rate_cols:
            values = rep[c].dropna()
            assert ((values >= 0) & (values <= 1)).all(), (by, c)
        gap = rep["aggregate_success_rate"] - rep["principal_success_rate"]
        assert np.array_equal(rep["success_gap"].to_numpy(dtype=float), gap.to_numpy(dtype=float), equal_nan=True)
        assert rep["principal_success_rate"].isna().equals(rep["principal_known"] == 0)
    # a coarser grouping is the sum of a finer one
    fine = reports["agent"]
    for by, key in (("model", "model"), ("harness", "harness")):
        coarse = reports[by]
        for col in ("n", "principal_known", "labelled_n", "responsible_n"):
            want = fine.groupby(fine[key].map(_k))[col].sum()
            got = coarse.set_index(coarse[key].map(_k))[col]
            assert sorted(want.items()) == sorted(got.items()), (by, col)
        for rate, total in (("aggregate_success_rate", "n"), ("principal_success_rate", "principal_known")):
            want = _hits(fine, rate, total).groupby(fine[key].map(_k)).sum()
            got = _hits(coarse, rate, total).set_axis(coarse[key].map(_k))
            assert sorted(want.items()) == sorted(got.items()), (by, rate)
    for by in ("family", "alignment", "scenario", "principal"):
        assert reports[by]["principal_known"].sum() == reports["family"]["principal_known"].sum()
        assert _hits(reports[by], "aggregate_success_rate", "n").sum() == \
            _hits(reports["family"], "aggregate_success_rate", "n").sum()
    # the aggregate successes counted by family are the principal-runs of successful runs
    ok_runs = {r.run_id for r in runs.itertuples() if outcomes.aggregate_success(r.status, r.aggregate_score, threshold)}
    assert _hits(reports["family"], "aggregate_success_rate", "n").sum() == principals["run_id"].isin(ok_runs).sum()


@SETTINGS
@given(corpora(bad=False), SOURCES, st.sampled_from([0.0, 0.5, 1.0]))
def test_blind_spots_are_aggregate_successes_with_reasons(corpus, source, threshold):
    runs, principals, agents = corpus[:3]
    resolved = _resolved(corpus, source)
    if resolved is None:
        return
    spots = outcomes.blind_spots(runs, principals, resolved, threshold=threshold)
    assert list(spots["run_id"]) == sorted(spots["run_id"])
    by_run = runs.set_index("run_id")
    pairs = defaultdict(set)
    for r in resolved.itertuples():
        pairs[r.run_id].add((r.mode, r.agent))
    for s in spots.itertuples():
        run = by_run.loc[s.run_id]
        assert outcomes.aggregate_success(run["status"], run["aggregate_score"], threshold)
        assert s.reasons and len(s.reasons) == len(s.failed_principals) + len(pairs[s.run_id])
        assert s.labelled_modes == sorted({m for m, _ in pairs[s.run_id]})
    rates = outcomes.blind_spot_rates(runs, principals, resolved, by="family", threshold=threshold)
    fam = by_run["family"]
    for r in rates.itertuples():
        assert r.blind_spot_runs == sum(fam[rid] == r.family for rid in spots["run_id"])
        assert r.blind_spot_runs <= r.aggregate_success_runs <= r.runs
        assert (math.isnan(r.blind_spot_rate) if r.aggregate_success_runs == 0
                else r.blind_spot_rate == r.blind_spot_runs / r.aggregate_success_runs)


@SETTINGS
@given(corpora(bad=False), st.sampled_from(["model", "harness"]), st.sampled_from([0.0, 0.5, 1.0]))
def test_crossplay_cells_mirror_each_other(corpus, by, threshold):
    runs, principals, agents = corpus[:3]
    cells = outcomes.crossplay(runs, principals, agents, by=by, threshold=threshold)
    index = {(r.a, r.b): r for r in cells.itertuples()}
    for (a, b), r in index.items():
        m = index[(b, a)]
        assert (r.runs, r.n) == (m.runs, m.n) and r.runs <= r.n
        for x, y in ((r.a_mean_score, m.b_mean_score), (r.a_success_rate, m.b_success_rate),
                     (r.a_success_unknown, m.b_success_unknown)):
            assert x == y or (x != x and y != y)
    played = {rid for rid, al in zip(runs["run_id"], runs["alignment"]) if al in ("mixed", "competitive")}
    assert cells.empty or cells["runs"].max() <= len(played)
    rows, cols, matrix = outcomes.crossplay_matrix(cells, "n")
    assert rows == cols and sum(v for line in matrix for v in line if v is not None) == cells["n"].sum()


@SETTINGS
@given(corpora(bad=False), SOURCES)
def test_resolved_labels_account_for_every_run(corpus, source):
    runs, _, _, labels, subs, gold = corpus
    res = _call(outcomes.resolve_labels, labels, subs, gold, source=source, run_ids=list(runs["run_id"]))
    if res[0] == "error":
        return
    resolved, summary = res[1]
    labelled = resolved.attrs["labelled_runs"]
    assert labelled == sorted(set(labelled)) and set(resolved["run_id"]) <= set(labelled) <= set(runs["run_id"])
    counts = [int(n) for n in re.findall(r"(\d+) runs?", summary)]
    assert sum(counts) == len(runs)
    assert not resolved.duplicated(["run_id", "mode", "agent"]).any()
    majority = resolved[resolved["source"] == "majority"]
    assert (majority["support"] > 0.5).all() and (resolved["support"] <= 1).all()


# --------------------------------------------------------------------------------------------
# rows a source does not read


def _read_by(labels: pd.DataFrame, source: str) -> pd.Series:
    """The label rows ``source`` reads, as its documentation says: that annotator's; gold; human
    (majority); gold and human (auto)."""
    if source.startswith("annotator:"):
        return labels["annotator"].map(lambda a: a == source[len("annotator:"):]).astype(bool)
    wanted = {"gold": {"gold"}, "majority": {"human"}}.get(source, {"gold", "human"})
    return labels["source"].map(lambda s: s in wanted).astype(bool)


@SETTINGS
@given(corpora(bad=False), st.sampled_from(["auto", "gold", "majority", "annotator:alice", "annotator:judge-l2",
                                            "annotator:nobody"]))
def test_rows_a_source_does_not_read_change_nothing(corpus, source):
    """Dropping the label rows a source never reads (e.g. every judge's but the one asked for)
    gives the same resolved labels, summary, labelled runs and errors (resolve_labels builds
    rows for the rows its source reads only)."""
    runs, _, _, labels, subs, gold = corpus
    run_ids = list(runs["run_id"])
    got = _call(outcomes.resolve_labels, labels, subs, gold, source=source, run_ids=run_ids)
    if got[0] == "error" and FRAME_ROW.match(got[1]):
        return  # a malformed row (a human label without annotator): its row number changes below
    kept = labels[_read_by(labels, source).to_numpy()].reset_index(drop=True)
    _assert_same(_call(outcomes.resolve_labels, kept, subs, gold, source=source, run_ids=run_ids), got)


@SETTINGS
@given(corpora(bad=False), st.sampled_from(["auto", "gold", "majority", "annotator:alice", "annotator:judge-l2"]))
def test_a_bad_row_the_source_does_not_read_is_still_named(corpus, source):
    """Every label row is checked whichever the source: a malformed row of another annotator or
    source is reported, as before any row is left out."""
    runs, _, _, labels, subs, gold = corpus
    assume(_call(outcomes.resolve_labels, labels, subs, gold, source=source, run_ids=list(runs["run_id"]))[0] == "ok")
    bad = pd.DataFrame([("r1", "zed", "", "CF", None, "judge")], columns=list(outcomes.LABEL_COLUMNS))
    labels = pd.concat([labels.astype(object), bad], ignore_index=True)
    got = _call(outcomes.resolve_labels, labels, subs, gold, source=source, run_ids=list(runs["run_id"]))
    assert got[0] == "error"
    assert got[1].startswith(f"labels row {len(labels) - 1} ") and "'mode'" in got[1], got
