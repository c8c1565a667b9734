"""`inspect` for files that hold runs: a JSON array of runs, a list of runs beside shared data
(``simulations[]`` beside ``tasks[]``), JSON Lines of runs, or a folder of one file per run.

Finds the run records (a record is a run when one of its keys holds a list of messages), says how
many runs each file holds, and infers a profile with a ``runs`` block (`app.ingest.profiled_runs`):
where the run records are, which part of a record is the conversation, its metrics and its
scenario, which file-level list is joined to each run by which key, and what the rest of the file
gives every run. Chat-style logs (``role``: system / user / assistant / tool) map the simulated user
to the principal ``user`` and the assistant to the agent ``assistant``. The profile is dry-run on
the files and the unmapped keys get the inspector's suggestions (`app.ingest.inspect.suggest`).
Pure: no database.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.ingest.canonical import RunFormatError
from app.ingest.inspect import (
    _CHAT_ROLES,
    EVENT_SYNONYMS,
    META_SYNONYMS,
    SAMPLE_RECORDS,
    DryRun,
    FileGroup,
    Inspection,
    _dotted_keys,
    _map_keys,
    _pattern,
    _tally,
    suggest,
)
from app.ingest.profile import Profile, load_profile
from app.ingest.profiled_runs import rest_of

#: keys that usually hold a run's messages, best first
MESSAGE_KEYS = ("messages", "traj", "trajectory", "conversation", "chat_history", "history", "turns", "transcript",
                "events", "steps", "dialog", "dialogue")
_CONTENT_KEYS = {"content", "text", "message", "body", "utterance", "output"}
_METRIC_KEYS = ("reward_info", "metrics", "scores", "evaluation", "eval", "result")
_SCORE_KEYS = ("reward", "score", "aggregate_score", "total_score", "success")
_SCENARIO_KEYS = ("task", "scenario", "episode")
_DESCRIPTION_KEYS = ("instruction", "instructions", "description", "prompt", "goal", "purpose", "query", "question")
SAMPLE_FILES = 50
#: actors that are principals when the log names them so (a simulated user, a customer)
_PRINCIPAL_NAME = re.compile(r"^(user|customer|client|human|buyer|patient|caller|simulated[_ ]?user)\b", re.I)


@dataclass
class RunsGuess:
    each: str                        # record | file
    records: str | None              # the list of runs in a file (JMESPath), None: the array / the lines
    samples: list[dict] = field(default_factory=list)
    count: int = 0
    file_keys: dict[str, Any] = field(default_factory=dict)   # the file's other keys (each=record in a dict)


def _is_messages(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    dicts = [v for v in value[:50] if isinstance(v, dict)]
    if len(dicts) < 0.6 * min(len(value), 50):
        return False
    return sum(1 for d in dicts if (_CONTENT_KEYS | {"role"}) & set(d)) >= 0.6 * len(dicts)


def message_key(record: Any) -> str | None:
    """The key of a run record that holds its messages, or None (not a run)."""
    if not isinstance(record, dict):
        return None
    keys = [k for k in MESSAGE_KEYS if k in record] + [k for k in record if k not in MESSAGE_KEYS]
    return next((k for k in keys if _is_messages(record.get(k))), None)


def _runs_list(items: Any) -> bool:
    if not isinstance(items, list) or not items:
        return False
    first = items[:20]
    return sum(1 for r in first if message_key(r)) >= 0.6 * len(first)


def guess_file(path: Path) -> RunsGuess | None:
    """How `path` holds runs, or None when it holds none that this can see."""
    from app.ingest.profiled import Unreadable, read_records
    from app.ingest.readers.tree import load_doc

    try:
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            lines = [r for r, _ in read_records(path, str(path), None) if not isinstance(r, Unreadable)]
            if _runs_list(lines):
                return RunsGuess("record", None, lines[:SAMPLE_RECORDS], len(lines))
            return None
        if path.suffix.lower() != ".json":
            return None
        doc = load_doc(path, str(path))
    except (RunFormatError, OSError, ValueError):
        return None
    if _runs_list(doc):
        return RunsGuess("record", None, doc[:SAMPLE_RECORDS], len(doc))
    if isinstance(doc, dict):
        lists = [(k, v) for k, v in doc.items() if _runs_list(v)]
        if lists:
            k, v = max(lists, key=lambda kv: len(kv[1]))
            return RunsGuess("record", k, v[:SAMPLE_RECORDS], len(v),
                             file_keys={x: y for x, y in doc.items() if x != k})
        if message_key(doc):
            return RunsGuess("file", None, [doc], 1)
    return None


# --------------------------------------------------------------------------- the profile

def _join_specs(guess: RunsGuess, join_file: str | None = None) -> dict[str, dict]:
    """File-level data for each run: a list of objects whose ids some key of the runs holds is the
    scenario (joined by that key); everything else of the file goes to every run's metadata."""
    out: dict[str, dict] = {}
    scalars = Counter()
    for r in guess.samples:
        for k, v in r.items():
            if isinstance(v, (str, int)) and not isinstance(v, bool):
                scalars[k] += 1
    taken = None
    for k, v in guess.file_keys.items():
        if not (isinstance(v, list) and v and all(isinstance(x, dict) and "id" in x for x in v[:50])):
            continue
        ids = {str(x["id"]) for x in v}
        for rk in sorted(scalars, key=lambda x: (not x.endswith("_id"), x)):
            if rk == "id":
                continue
            vals = {str(r.get(rk)) for r in guess.samples if rk in r}
            if vals and len(vals & ids) >= 0.5 * len(vals):
                out["scenario"] = {"from": k, "key": "id", "run_key": rk}
                taken = k
                break
        if taken:
            break
    rest = [k for k in guess.file_keys if k != taken]
    if rest:
        out["metadata"] = {"from": "{" + ", ".join(f"{k}: {k}" if k.isidentifier() else f'"{k}": "{k}"'
                                                   for k in rest) + "}"}
    if join_file:
        for spec in out.values():
            spec["file"] = join_file
    return out


def _find_scenario(sample: list[dict]) -> str | None:
    """A path in the run record to an object describing the task (``task``, ``info.task``)."""
    for r in sample[:5]:
        for k in _SCENARIO_KEYS:
            if isinstance(r.get(k), dict):
                return k
        for k, v in r.items():
            if isinstance(v, dict):
                for k2 in _SCENARIO_KEYS:
                    if isinstance(v.get(k2), dict):
                        return f"{k}.{k2}"
    return None


def _get(doc: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def build_profile(name: str, guess: RunsGuess, files: str | None = None, join_file: str | None = None,
                  shared: Any = None) -> tuple[Profile, dict[str, list]]:
    """The starter profile for runs held like `guess`, and a sample of each part (role -> records)."""
    sample = guess.samples
    mkey = Counter(message_key(r) for r in sample).most_common(1)[0][0]
    runs: dict[str, Any] = {}
    if files:
        runs["files"] = files
    runs["each"] = guess.each
    if guess.records:
        runs["records"] = guess.records
    parts: dict[str, str] = {"conversation": mkey}
    metric = next((k for k in _METRIC_KEYS if any(isinstance(r.get(k), dict) for r in sample)), None)
    scores = [k for k in _SCORE_KEYS if any(isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)
                                          for r in sample)]
    if metric:
        parts["metrics"] = metric
    elif scores:
        parts["metrics"] = "{" + ", ".join(f"{k}: {k}" for k in scores) + "}"
    scen = _find_scenario(sample)
    if scen:
        parts["scenario"] = scen
    runs["parts"] = parts
    join = _join_specs(guess, join_file) if (guess.file_keys or shared is not None) else {}
    if shared is not None and not guess.file_keys:  # one file per run beside a shared results file
        join = _join_specs(RunsGuess("record", None, sample, file_keys=shared), join_file)
    if join:
        runs["join"] = join
    spec: dict[str, Any] = {"profile": 1, "name": name,
                            "description": "Inferred by `a2annotate inspect`: runs held in files; edit freely.",
                            "runs": runs}
    # samples of each part, as the import sees them
    msgs = [m for r in sample for m in (r.get(mkey) or []) if isinstance(m, dict)][:SAMPLE_RECORDS]
    meta = [rest_of(r, parts) for r in sample]
    if "metadata" in join:  # what the file gives every run is part of its metadata
        src = shared if shared is not None and not guess.file_keys else guess.file_keys
        given = {k: v for k, v in (src or {}).items() if k != (join.get("scenario") or {}).get("from")}
        meta = [{**given, **m} for m in meta]
    scen_docs = [d for r in sample if isinstance(d := _get(r, scen) if scen else None, dict)]
    if "scenario" in join and isinstance(shared or guess.file_keys, dict):
        src = (shared or guess.file_keys).get(join["scenario"]["from"]) or []
        scen_docs = [x for x in src if isinstance(x, dict)][:SAMPLE_RECORDS]
    metric_docs = [r[metric] for r in sample if isinstance(r.get(metric), dict)] if metric else \
        [{k: r[k] for k in scores if k in r} for r in sample]
    keys: dict[str, dict] = {}
    mm = _map_keys(_dotted_keys(meta), META_SYNONYMS, meta)
    sid = next((k for k in ("task_id", "scenario_id", "task", "scenario") if any(
        isinstance(m.get(k), (str, int)) and not isinstance(m.get(k), bool) for m in meta)), None)
    if "run_id" not in mm:  # a key whose values tell the runs apart
        for k in ("episode", "episode_id", "simulation_id", "sim_id", "conversation_id", "session_id", "trace_id"):
            vals = [m.get(k) for m in meta]
            if all(isinstance(v, str) and v for v in vals) and len(set(vals)) == len(vals):
                mm["run_id"] = k
                break
    if sid and "scenario_id" not in mm:
        ints = all(isinstance(m.get(sid), int) for m in meta if sid in m)
        mm["scenario_id"] = f"to_string({sid})" if ints else sid  # an id must be text
    if mm:
        keys["metadata"] = mm
    skeys: dict[str, str] = {}
    if scen_docs:
        d0 = scen_docs[0]
        if "id" in d0:
            skeys["id"] = "id"
        desc = next((k for k in _DESCRIPTION_KEYS if isinstance(d0.get(k), str)), None)
        if desc is None:
            desc = next((f"{k}.{k2}" for k in _DESCRIPTION_KEYS if isinstance(d0.get(k), dict)
                         for k2 in _DESCRIPTION_KEYS if isinstance(d0[k].get(k2), str)), None)
        if desc:
            skeys["description"] = desc
    if skeys:
        keys["scenario"] = skeys
    chat = Counter(str(m.get("role")).lower() for m in msgs if isinstance(m.get("role"), str))
    if chat and set(chat) <= _CHAT_ROLES | {"model", "human", "ai"}:
        ck: dict[str, str] = {"chat_role": "role"}
        ck["content"] = next((k for k in ("content", "text", "message") if any(k in m for m in msgs)), "content")
        if any("tool_calls" in m for m in msgs):
            ck["tool_calls"] = "tool_calls"
        if any("tool_call_id" in m for m in msgs):
            ck["call_id"] = "tool_call_id"
        elif any(m.get("role") == "tool" and "id" in m for m in msgs):
            ck["call_id"] = "id"
        if any("requestor" in m for m in msgs):
            ck["actor"] = "requestor"
        for fld, cands in (("ts", ("timestamp", "ts", "time", "created_at")), ("turn", ("turn_idx", "turn"))):
            k = next((c for c in cands if any(c in m for m in msgs)), None)
            if k:
                ck[fld] = k
        keys["conversation"] = ck
        roles: dict[str, Any] = {}
        for r in sorted(chat):
            if r in ("system", "developer"):
                roles[r] = {"kind": "message", "actor": "system", "visibility": "private"}
            elif r in ("user", "human"):
                roles[r] = {"kind": "message", "actor": "user"}
            elif r in ("tool", "function"):
                roles[r] = {"kind": "tool_result", "actor": "agent" if "actor" in ck else "assistant",
                            "visibility": "private"}
            else:
                roles[r] = {"kind": "message", "actor": "assistant"}
        # an original role spelled otherwise (User, ASSISTANT) is matched case-insensitively
        spec["values"] = {"chat_role": roles}
        spec["agents"] = {"from": "actors", "principal": "user"}
        spec["principals"] = {"from": "actors", "match": ["user"], "kind": "person"}
        if scen and scen_docs:  # the task names the user and says what they want
            d0 = scen_docs[0]
            who = next((k for k in ("user_id", "user_name", "user", "customer_id", "persona_name")
                        if isinstance(d0.get(k), str)), None)
            if who:
                spec["principals"]["name_key"] = f"{scen}.{who}"
            if skeys.get("description") and "." not in skeys["description"]:
                spec["principals"]["objective_key"] = f"{scen}.{skeys['description']}"
        spec["visibility"] = [{"when": {"kind": "message", "actor": ["user", "assistant"], "recipient": "none"},
                               "visibility": "shared", "recipients": "all_others"}]
    else:
        ck = _map_keys(_dotted_keys(msgs), EVENT_SYNONYMS, msgs)
        if ck:
            keys["conversation"] = ck
        if "actor" in ck:
            spec["agents"] = {"from": "actors"}
            actors = Counter(v for m in msgs if isinstance(v := m.get(ck["actor"] if isinstance(ck["actor"], str)
                                                                   else ck["actor"][0]), str))
            human = sorted(a for a in actors if _PRINCIPAL_NAME.search(a))
            if human:  # the actors named like a person served: the principals, the rest act for them
                spec["principals"] = {"from": "actors", "match": human}
                if len(human) == 1:
                    spec["agents"]["principal"] = human[0]
    spec["keys"] = keys
    if metric_docs:
        agg = next((k for k in _SCORE_KEYS if any(isinstance(d.get(k), (int, float)) and not isinstance(d.get(k), bool)
                                                  for d in metric_docs)), None)
        if agg:
            spec["metrics"] = {"aggregate_score": agg}
            served = (spec.get("agents") or {}).get("principal")
            if served:
                vals = {d.get(agg) for d in metric_docs if agg in d}
                rule: dict[str, Any] = {"score": agg}
                if vals <= {0, 1}:  # 0.0, 1.0, False and True are equal to these
                    rule["success"] = [{"key": agg, "equals": 1}]
                spec["metrics"]["principals"] = {served: rule}
    prof = load_profile(spec)
    prof.inferred = True
    return prof, {"metadata": meta, "conversation": msgs, "scenario": scen_docs, "metrics": metric_docs}


# --------------------------------------------------------------------------- inspecting

@dataclass
class RunsFound:
    each: str
    records: str | None
    files: list[tuple[str, int]]      # (file shown, runs it holds)


def _groups(parts: dict[str, list]) -> dict[str, FileGroup]:
    out = {}
    for role, recs in parts.items():
        if not recs:
            continue
        g = FileGroup(pattern=f"(run records) {role}" if role != "conversation" else "(run records) conversation",
                      role=role, files=0, records=len(recs))
        g.keys = _dotted_keys(recs)
        g.sample = list(recs[:SAMPLE_RECORDS])
        out[g.pattern] = g
    return out


def inspect_runs(path: str | os.PathLike) -> Inspection | None:
    """An Inspection of a file (or folder of files) holding runs, with a ``runs`` profile dry-run
    on them; None when `path` holds no runs this can see."""
    from app.ingest.detect import iter_path

    p = Path(path)
    guesses: list[tuple[Path, RunsGuess]] = []
    shared = None
    join_file = None
    files_glob = None
    if p.is_file():
        g = guess_file(p)
        if g is None:
            return None
        guesses.append((p, g))
    elif p.is_dir():
        cands = sorted(x for x in p.rglob("*") if x.is_file() and x.suffix.lower() in (".json", ".jsonl", ".ndjson"))
        for f in cands[: SAMPLE_FILES * 4]:
            g = guess_file(f)
            if g is not None:
                guesses.append((f, g))
            if len(guesses) >= SAMPLE_FILES:
                break
        if not guesses:
            return None
        pats = Counter(_pattern(f.relative_to(p).as_posix()) for f, _ in guesses)
        files_glob = pats.most_common(1)[0][0]
        guesses = [(f, g) for f, g in guesses if _pattern(f.relative_to(p).as_posix()) == files_glob]
        if guesses[0][1].each == "file":  # one file per run: a results file beside them gives shared data
            for f in cands:
                if guess_file(f) is None and f.suffix.lower() == ".json":
                    from app.ingest.readers.tree import load_doc

                    try:
                        doc = load_doc(f, str(f))
                    except (RunFormatError, OSError, ValueError):
                        continue
                    if isinstance(doc, dict):
                        shared, join_file = doc, f.relative_to(p).as_posix()
                        break
    else:
        return None
    first = guesses[0][1]
    merged = RunsGuess(first.each, first.records, [s for _, g in guesses for s in g.samples][:SAMPLE_RECORDS],
                       sum(g.count for _, g in guesses), first.file_keys)
    name = f"inferred-runs-{p.stem if p.is_file() else p.name or 'tree'}"
    prof, parts = build_profile(name, merged, files=files_glob, join_file=join_file, shared=shared)
    ins = Inspection(root=os.fspath(p), profile=prof)
    ins.groups = _groups(parts)
    ins.runs_found = RunsFound(first.each, first.records, [(os.fspath(f), g.count) for f, g in guesses])
    d = DryRun(path=os.fspath(p), reader="tree", reason=f"profile {prof.name!r} (runs held in files)")
    for item in iter_path(p, profile=prof):
        _tally(d, item)
    ins.dry = d
    ins.sampled_runs = len(d.runs) + len(d.errors)
    if join_file:
        ins.loose_files = []
    suggest(ins)
    return ins
