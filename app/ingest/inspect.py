"""`a2annotate inspect`: look at a tree without importing it, and infer an import profile.

`inspect_tree(root)` walks the tree (symbolic links are not followed), finds the run
directories, the path pattern, a root manifest, the files by role with the keys seen in their
records (and how often), the values seen for status/visibility/kind-like keys, and builds the
profile that reads it (`Inspection.profile`). `render(inspection)` is the text the command
prints; `infer_profile(root)` is what `import` uses when no `--profile` is given. A tree that
uses a2annotate's own names gets the built-in ``a2annotate`` profile.

The inference is a heuristic over names and record keys (the vocabularies below); whatever it
cannot place is listed as unmapped, and the written profile is meant to be read and edited.
Pure: no database.
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.ingest.profile import Profile, dump_profile, load_profile
from app.ingest.profiled import carries_text
from app.ingest.safety import safejson
from app.ingest.safety.limits import input_limits

SAMPLE_RUNS = 25
_RECORD_LISTS = {"messages", "events", "turns", "steps", "records", "items", "results", "checks", "judgments",
                 "judgements", "audits", "hops", "entries", "conversation", "transcript", "log", "runs",
                 "verdicts", "findings", "history"}
SAMPLE_RECORDS = 400
_META_STEMS = ("run", "run_meta", "run_metadata", "run_info", "meta", "metadata", "info", "header", "episode",
               "episode_meta", "run_header", "runinfo", "meta_run")
_MANIFEST = re.compile(r"manifest|index", re.I)
_CHAT_ROLES = {"system", "user", "assistant", "tool", "function", "developer"}

# canonical field -> key names seen in the wild (lower case; first match wins)
EVENT_SYNONYMS = {
    "actor": ("actor", "from", "sender", "speaker", "author", "agent", "who", "src", "source_agent", "by"),
    "recipients": ("recipients", "to", "recipient", "target", "targets", "dst", "addressee"),
    "content": ("content", "text", "body", "message", "msg", "say", "utterance", "output"),
    "ts": ("ts", "timestamp", "time", "at", "created_at", "t", "when"),
    "turn": ("turn", "turn_id", "turn_index", "turn_no", "step", "round", "n", "idx"),
    "kind": ("kind", "type", "event", "event_type", "action", "op"),
    "visibility": ("visibility", "scope", "channel", "vis", "audience"),
    "parent_turn": ("reply_to", "in_reply_to", "parent_turn", "responds_to"),
    "hop": ("hop",),
    "data": ("data", "payload", "args", "arguments", "result"),
}
META_SYNONYMS = {
    "run_id": ("run_id", "runid", "run_uid", "uid", "episode_id", "id", "run"),
    "status": ("status", "state", "run_status", "outcome_status", "result"),
    "started_at": ("started_at", "start", "start_time", "started", "t_start", "begin"),
    "ended_at": ("ended_at", "end", "end_time", "ended", "finished_at", "t_end"),
    "family": ("family", "domain", "task_family"),
    "scenario_id": ("scenario_id", "scenario"),
    "title": ("title",),
}
CHECK_SYNONYMS = {
    "check_id": ("check_id", "check", "check_name", "rule", "test", "name", "id"),
    "passed": ("passed", "pass", "ok", "result", "status", "outcome", "success"),
    "level": ("level", "tier", "layer"),
    "agent": ("agent", "responsible", "responsible_role", "role", "blame", "actor"),
    "evidence_turns": ("turns", "evidence_turns", "at_turns", "turn", "turn_refs"),
    "evidence": ("evidence", "seqs", "evidence_seqs"),
    "detail": ("detail", "details", "message", "msg", "reason", "info", "note"),
    "source": ("source", "checker", "auditor"),
}
JUDGE_SYNONYMS = {
    "mode": ("mode", "modes", "failure_mode", "failure_modes", "label", "labels", "failure", "failures",
             "category", "code"),
    "verdict": ("verdict", "judgement", "judgment", "decision", "result"),
    "level": ("level", "tier"),
    "agent": ("agent", "blamed", "responsible", "responsible_agent", "role", "culprit"),
    "evidence_turns": ("turns", "evidence_turns", "at_turns", "turn", "turn_refs"),
    "evidence": ("evidence", "seqs", "evidence_seqs"),
    "note": ("rationale", "reason", "explanation", "note", "why", "justification"),
    "source": ("judge", "source", "judge_name", "auditor"),
}
HOP_SYNONYMS = {"hop": ("hop", "hop_index", "depth"), "turn": ("turn", "turn_id", "at_turn"), "seq": ("seq",)}
STATUS_WORDS = {
    "completed": ("completed", "complete", "success", "succeeded", "ok", "done", "finished", "deal", "agreed"),
    "failed": ("failed", "fail", "failure", "no_deal", "unsuccessful", "aborted"),
    "timeout": ("timeout", "timed_out", "time_out", "max_turns", "expired"),
    "error": ("error", "crashed", "exception", "errored", "crash"),
}
VISIBILITY_WORDS = {
    "private": ("private", "internal", "hidden", "self", "inner", "thought", "scratchpad", "local"),
    "shared": ("shared", "public", "external", "broadcast", "wire", "peer", "direct", "dm"),
}
KIND_WORDS = {
    "message": ("message", "msg", "say", "chat", "utterance", "speak", "send"),
    "tool_call": ("tool_call", "tool", "call", "function_call", "invoke", "action"),
    "tool_result": ("tool_result", "observation", "tool_output", "result", "return"),
    "state_update": ("state_update", "state", "update", "memory", "note_to_self"),
    "artifact": ("artifact", "file", "document", "attachment"),
    "discovery": ("discovery", "discover", "card", "lookup"),
    "delegation": ("delegation", "delegate", "handoff", "hand_off", "transfer"),
    "log": ("log", "harness", "system", "debug", "info", "trace", "env", "environment"),
}
PASSED_WORDS = {True: ("pass", "passed", "ok", "true", "yes", "success", "green"),
                False: ("fail", "failed", "false", "no", "error", "red", "violation")}
NO_FAILURE_WORDS = ("no failure", "no_failure", "none", "no failure found", "clean", "no_issue", "no issues",
                    "ok", "pass", "no-failure")
_MODEL_KEYS = ("model", "llm", "model_name", "model_id", "engine")
_PRINCIPAL_KEYS = ("acts_for", "principal", "on_behalf_of", "represents", "owner", "principal_id")
_HARNESS_KEYS = ("harness", "framework", "runtime")
_AGG_KEYS = ("aggregate_score", "score", "total_score", "overall_score", "task_score", "reward", "total")
_REP = re.compile(r"^(r|rep|repetition|seed|trial|try)[-_]?\d+$", re.I)
_CONDITION = re.compile(r"same|cross|mixed|homo|hetero|self[-_]?play", re.I)
_MODELS = re.compile(r"\+|_vs_|-vs-|__x__|\bvs\b", re.I)


@dataclass
class FileGroup:
    pattern: str                 # glob relative to the run directory
    role: str | None = None
    param: str | None = None
    files: int = 0
    records: int = 0
    keys: Counter = field(default_factory=Counter)
    list_key: str | None = None
    sample: list = field(default_factory=list)
    mapped: dict[str, str] = field(default_factory=dict)


@dataclass
class Inspection:
    root: str
    run_dirs: list[str] = field(default_factory=list)
    path_template: str | list[str] | None = None
    path_examples: list[str] = field(default_factory=list)
    manifest: dict | None = None
    groups: dict[str, FileGroup] = field(default_factory=dict)
    values: dict[str, Counter] = field(default_factory=dict)
    unmapped: list[str] = field(default_factory=list)
    loose_files: list[str] = field(default_factory=list)
    profile: Profile | None = None
    builtin: bool = False
    mode_names: Counter = field(default_factory=Counter)
    unknown_modes: list[str] = field(default_factory=list)
    single_run: bool = False  # PATH is itself one run directory
    #: profiles tried on a sample of the runs: (name, runs, rejected, warnings), and why one was chosen
    candidates: list[tuple[str, int, int, int]] = field(default_factory=list)
    choice: str | None = None
    #: the chosen profile's dry run on the sampled runs (warnings by cause, what would be stored)
    dry: DryRun | None = None
    #: per file pattern, key -> (canonical field, why): proposals for keys nothing maps
    suggestions: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    #: loose files: (name, reader or None, [(reader, score, reason)])
    loose_readers: list[tuple[str, str | None, list[tuple[str, float, str]]]] = field(default_factory=list)
    sampled_runs: int = 0
    #: the log's actors are no agents of the metadata: propose ``agents: {from: actors}``
    suggest_agents: bool = False
    #: runs held in files (app.ingest.inspect_runs.RunsFound): how, and how many per file
    runs_found: Any = None
    #: families whose files differ in shape: [(file pattern, role, {family: keys only it has})],
    #: from at least one run of every family (up to MAX_FAMILIES); proposed as ``blocks:``
    family_shapes: list[tuple[str, str | None, dict[str, list[str]]]] = field(default_factory=list)


# --------------------------------------------------------------------------- walking

def _walk(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        yield Path(dirpath), sorted(f for f in filenames if not f.startswith("."))


def has_builtin_names(root: Path) -> bool:
    """True when some directory holds a run metadata file by a2annotate's own names."""
    from app.ingest.readers.tree import METADATA_NAMES

    for _here, files in _walk(root):
        if any(f.lower() in METADATA_NAMES for f in files):
            return True
    return False


def _records(path: Path, limit: int = SAMPLE_RECORDS) -> tuple[list, str | None]:
    """A sample of a file's records (JSON Lines, a JSON array or a list under a key, or the object)."""
    try:
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            out = []
            with open(path, encoding="utf-8-sig") as f:
                for line in f:
                    line = line.strip()
                    if line:
                        try:
                            out.append(safejson.loads(line))
                        except ValueError:
                            continue
                    if len(out) >= limit:
                        break
            return out, None
        if path.suffix.lower() == ".json":
            with open(path, encoding="utf-8-sig") as f:
                doc = safejson.load(f)
        elif path.suffix.lower() in (".yaml", ".yml"):
            from app.ingest.safety import safeyaml  # aliases, nesting and size within the input limits

            doc = safeyaml.load_file(path, max_bytes=input_limits().max_record_bytes, max_nodes=None)
        else:
            return [], None
    except (OSError, ValueError, UnicodeDecodeError):
        return [], None
    except Exception:  # noqa: BLE001 - YAML errors: the file is reported as not understood
        return [], None
    if isinstance(doc, list):
        return doc[:limit], None
    if isinstance(doc, dict):
        lists = [(k, v) for k, v in doc.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
        if len(lists) == 1 and len(doc) <= 3 and lists[0][0].lower() in _RECORD_LISTS:
            return lists[0][1][:limit], lists[0][0]
        return [doc], None
    return [doc], None


def _is_meta_doc(path: Path) -> bool:
    stem = path.stem.lower()
    if path.suffix.lower() not in (".json", ".yaml", ".yml"):
        return False
    return stem in _META_STEMS


def find_manifest(root: Path) -> dict | None:
    """A root file whose records map run-directory paths to run ids: ``{file, records, path, run_id,
    fields}`` (profile ``manifest`` form), or None."""
    try:
        names = sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() in (".json", ".jsonl"))
    except OSError:
        return None
    for p in names:
        if not _MANIFEST.search(p.stem):
            continue
        recs, list_key = _records(p, 5000)
        if isinstance(recs, list) and len(recs) == 1 and isinstance(recs[0], dict):
            # {"runs": {...}} or {"schema": .., "runs": [...]}
            doc = recs[0]
            for k, v in doc.items():
                if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                    recs, list_key = v, k
                    break
        dicts = [r for r in recs if isinstance(r, dict)]
        if not dicts or any("events" in r or "jsonrpc" in r for r in dicts):
            continue  # runs or wire records, not a manifest
        keys = Counter(k for r in dicts for k in r)
        path_key = next((k for k in keys if all(isinstance(r.get(k), str) and "/" in r.get(k, "")
                                                 for r in dicts)), None)
        if path_key is None:
            continue
        id_candidates = [k for k in keys if k != path_key and "id" in k.lower() and "run" in k.lower()]
        id_key = sorted(id_candidates, key=lambda k: ("original" not in k.lower(), k))[0] if id_candidates else None
        fields = {k: k for k in keys if k not in (path_key, id_key)}
        spec: dict[str, Any] = {"file": p.name, "path": path_key}
        if list_key:
            spec["records"] = list_key
        if id_key:
            spec["run_id"] = id_key
        if fields:
            spec["fields"] = fields
        return spec
    return None


def find_run_dirs(root: Path) -> tuple[list[Path], list[str]]:
    """Run directories (holding a metadata-like file) and the marker file names."""
    runs: list[Path] = []
    markers: Counter = Counter()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        if here == root:
            continue
        hits = [f for f in sorted(filenames) if _is_meta_doc(here / f) and not _is_canonical_run(here / f)]
        if hits:
            runs.append(here)
            markers.update(hits)
            dirnames[:] = []  # run directories do not nest
    if not runs and root.is_dir():  # PATH is one run directory itself
        hits = [f.name for f in sorted(root.iterdir()) if f.is_file() and _is_meta_doc(f) and not _is_canonical_run(f)]
        if hits:
            return [root], hits
    return runs, [m for m, _ in markers.most_common()]


def _is_canonical_run(path: Path) -> bool:
    """A file holding a whole canonical run (or runs) is data for the canonical reader, not a marker."""
    recs, _ = _records(path, 2)
    return bool(recs) and isinstance(recs[0], dict) and isinstance(recs[0].get("events"), list) \
        and "run_id" in recs[0]


def path_template(rels: list[str]) -> str | None:
    """Name the components of the run directories' paths (family, task, condition, models,
    scenario, repetition, run)."""
    split = [r.split("/") for r in rels]
    if not split or len({len(s) for s in split}) != 1:
        return None
    n = len(split[0])
    cols = [[s[i] for s in split] for i in range(n)]
    names: list[str | None] = [None] * n
    names[-1] = "run"
    if n >= 3:
        names[0] = "family"
    for i in range(1, n - 1):
        vals = cols[i]
        if names[i] is None and all(_REP.match(v) or v.isdigit() for v in vals) and "repetition" not in names:
            names[i] = "repetition"
    for i in range(1, n - 1):
        vals = cols[i]
        if names[i] is None and all(_CONDITION.search(v) for v in vals) and "condition" not in names:
            names[i] = "condition"
    for i in range(1, n - 1):
        if names[i] is None and all(_MODELS.search(v) for v in cols[i]) and "models" not in names:
            names[i] = "models"
    for i in range(1, n - 1):
        if names[i] is None and all("__" in v for v in cols[i]) and "task" not in names:
            names[i] = "task"
    rest = [i for i in range(n - 1) if names[i] is None]
    if rest:
        names[rest[-1]] = "scenario"
        for j, i in enumerate(rest[:-1]):
            names[i] = "task" if "task" not in names else f"part{j + 1}"
    return "/".join("{" + str(x) + "}" for x in names)


def _pattern(rel: str) -> str:
    """A file's glob: top-level files by name; files in a subdirectory by ``dir/*.ext`` (their
    names are agents, artifacts...), except audit levels (``l0_checks.jsonl``), kept by name."""
    parts = rel.split("/")
    if len(parts) > 1:
        stem, ext = os.path.splitext(parts[-1])
        if re.search(r"(^|[_-])l[0-2]([_-]|$)", stem.lower()):
            return rel
        return "/".join(parts[:-1] + [f"*{ext}"])
    return rel


def _pick(keys: Counter | set, synonyms: tuple[str, ...], taken: set[str]) -> str | None:
    low = {k.lower(): k for k in keys}
    for s in synonyms:
        if s in low and low[s] not in taken:
            return low[s]
    return None


def _dotted_keys(records: list) -> Counter:
    """Keys of records, with one level of nested objects as dotted keys (``body.text``)."""
    c: Counter = Counter()
    for r in records:
        if not isinstance(r, dict):
            continue
        for k, v in r.items():
            c[k] += 1
            if isinstance(v, dict) and len(v) <= 12:
                for k2 in v:
                    c[f"{k}.{k2}"] += 1
    return c


def _map_keys(keys: Counter, synonyms: dict[str, tuple[str, ...]], records: list) -> dict[str, Any]:
    """canonical field -> the key holding it (a list of keys when files or families differ: the
    first one a record has wins)."""
    out: dict[str, Any] = {}
    taken: set[str] = set()
    top = Counter({k: n for k, n in keys.items() if "." not in k})
    low = {k.lower(): k for k in top}
    for name, syn in synonyms.items():
        found: list[str] = []
        for cand in syn:
            k = low.get(cand)
            if k is None or k in taken:
                continue
            sample = [r.get(k) for r in records if isinstance(r, dict) and k in r]
            if name == "content" and sample and all(isinstance(v, dict) for v in sample):
                sub = [d for d in keys if d.startswith(k + ".")]
                inner = _pick(Counter({x.split(".", 1)[1]: 1 for x in sub}), ("text", "content", "value", "message"),
                              set())
                if inner is None:
                    continue
                k = f"{k}.{inner}"
            if name in ("turn", "parent_turn", "hop") and not all(isinstance(v, int) for v in sample):
                continue
            if name == "evidence_turns" and not all(isinstance(v, (int, list)) for v in sample):
                continue
            found.append(k)
        # a second key only when some records lack the first (another file or family names it so)
        if found:
            first = found[0].split(".")[0]
            extra = [k for k in found[1:] if any(isinstance(r, dict) and first not in r and k.split(".")[0] in r
                                                 for r in records)]
            keys_used = [found[0], *extra]
            out[name] = keys_used[0] if len(keys_used) == 1 else keys_used
            taken.update(k.split(".")[0] for k in keys_used)
    return out


def _first(record: Any, spec: Any) -> Any:
    """The value of the first key of `spec` (a key or a list of keys) that `record` has."""
    if not isinstance(record, dict) or spec is None:
        return None
    for k in [spec] if isinstance(spec, str) else spec:
        if k in record:
            return record[k]
    return None


def _vocab(values: Counter, words: dict, canonical: tuple) -> tuple[dict, list]:
    table: dict = {}
    unknown = []
    for v in values:
        if not isinstance(v, str):
            continue
        low = v.strip().lower().replace("-", "_").replace(" ", "_")
        target = next((c for c, ws in words.items() if low in ws or low == str(c).lower()), None)
        if target is None:
            unknown.append(v)
        elif v != target or v not in canonical:
            table[v] = target
    return table, unknown


def _classify(group: FileGroup) -> tuple[str | None, str | None]:
    pat = group.pattern.lower()
    stem = os.path.splitext(pat.rsplit("/", 1)[-1])[0]
    top = pat.split("/")[0]
    keys = {k.lower() for k in group.keys if "." not in k}
    recs = [r for r in group.sample if isinstance(r, dict)]
    if pat.endswith((".log",)) or "log" in stem and not pat.endswith((".json", ".jsonl")):
        return "log", None
    if top in ("artifacts", "artifact", "files", "attachments", "outputs") and "/" in pat:
        recs_keys = {k.lower() for k in group.keys}
        if pat.endswith((".json", ".jsonl")) and recs_keys & {"file", "path", "filename", "name"} \
                and recs_keys & {"turn", "turn_id", "at_turn"}:
            return "artifact_index", None
        return "artifact", None
    if pat.endswith((".md", ".txt")):
        if any(w in stem for w in ("scenario", "task", "brief", "readme", "description", "prompt")):
            return "scenario_text", None
        return None, None
    if not pat.endswith((".json", ".jsonl", ".ndjson", ".yaml", ".yml")):
        return None, None
    if any(w in top for w in ("private", "secret", "hidden")) and "/" in pat:
        return "private_state", None
    roles = {str(r.get("role")).lower() for r in recs if "role" in r}
    if roles and roles <= _CHAT_ROLES and "/" in pat:
        return "trajectory", None
    checkish = keys & set(CHECK_SYNONYMS["check_id"][:5]) and keys & set(CHECK_SYNONYMS["passed"])
    modeish = keys & (set(JUDGE_SYNONYMS["mode"][:8]) | {"verdict"})
    if checkish and modeish and "/" not in pat or "audit" in stem and "/" not in pat:
        return "audits", None
    if any(w in stem for w in ("check", "l0", "l1")) or (keys & set(CHECK_SYNONYMS["check_id"][:5])
                                                         and keys & set(CHECK_SYNONYMS["passed"][:4])
                                                         and not keys & set(JUDGE_SYNONYMS["mode"][:6])):
        level = "L0" if "l0" in stem else ("L1" if "l1" in stem else None)
        return "checks", level
    if any(w in stem for w in ("judg", "l2", "verdict", "llm_audit")) or keys & {"verdict", "failure_mode",
                                                                                 "failure_modes"}:
        return "judgments", None
    if "audit" in stem:
        return "audits", None
    if "hop" in stem or (keys and keys <= {"hop", "turn", "seq", "from", "to", "hop_index", "depth", "at_turn"}):
        return "hops", None
    if any(w in stem for w in ("metric", "score", "outcome", "result", "econ", "eval")):
        return "metrics", None
    if any(w in stem for w in ("scenario", "task", "brief", "setup")):
        return "scenario", None
    actorish = keys & set(EVENT_SYNONYMS["actor"])
    textish = keys & set(EVENT_SYNONYMS["content"])
    kindish = keys & set(EVENT_SYNONYMS["kind"])
    if "/" in pat and (textish or roles):
        return "trajectory", None
    if actorish and textish and any(w in stem for w in ("conv", "messag", "dialog", "transcript", "chat", "wire",
                                                       "talk")):
        return "conversation", None
    if kindish or "event" in stem:
        return "events", None
    if actorish and textish:
        return "conversation", None
    return None, None


# --------------------------------------------------------------------------- the inspection

def inspect_tree(root: str | os.PathLike, taxonomy: Any = None, *, dry_runs: bool = True) -> Inspection:
    """Walk `root` and infer how to read it (see the module docstring). When the tree uses some of
    a2annotate's own file names, both the built-in profile and the one inferred from the keys seen
    are tried on a sample of the runs, and the one whose import raises fewer warnings is chosen
    (a tie: the built-in); `Inspection.candidates` and `choice` say so."""
    root = Path(root)
    foreign = _inspect_foreign(root, taxonomy)
    if not foreign.run_dirs and not foreign.single_run and dry_runs and not has_builtin_names(root):
        from app.ingest.inspect_runs import inspect_runs

        held = inspect_runs(root)  # no run directories: files holding runs (several per file, or one each)
        if held is not None:
            held.loose_files = foreign.loose_files  # and what plain `import` (no profile) makes of each
            _loose_readers(root, held)
            return held
    if not has_builtin_names(root):
        if dry_runs:
            foreign.dry = sample_dry_run(root, foreign.profile)
            foreign.sampled_runs = len(foreign.dry.runs) + len(foreign.dry.errors)
        _loose_readers(root, foreign)
        suggest(foreign)
        return foreign
    builtin = _inspect_builtin(root)
    if not dry_runs:
        return builtin
    tried = []
    for ins in (builtin, foreign):
        ins.dry = sample_dry_run(root, ins.profile)
        ins.sampled_runs = len(ins.dry.runs) + len(ins.dry.errors)
        tried.append(ins)
    score = [(len(i.dry.errors), sum(c for c, _ in i.dry.warnings.values())) for i in tried]
    chosen = builtin if score[0] <= score[1] else foreign
    names = ["a2annotate (built-in names)", f"{foreign.profile.name} (inferred from the keys seen)"]
    chosen.candidates = [(n, len(i.dry.runs), len(i.dry.errors), sum(c for c, _ in i.dry.warnings.values()))
                         for n, i in zip(names, tried)]
    chosen.choice = (f"chose {names[0] if chosen is builtin else names[1]}: fewest rejected runs, then fewest "
                     f"warnings on the {chosen.sampled_runs} run(s) sampled")
    _loose_readers(root, chosen)
    suggest(chosen)
    return chosen


def _inspect_builtin(root: Path) -> Inspection:
    ins = Inspection(root=os.fspath(root))
    if True:
        ins.builtin = True
        ins.profile = load_profile("a2annotate")
        ins.profile.inferred = True
        from app.ingest.readers.tree import builtin_role, is_run_dir, load_mapping

        mp = load_mapping(None)
        for here, files in _walk(root):
            if is_run_dir(files, mp):
                ins.run_dirs.append(here.relative_to(root).as_posix())
        for rel_dir in ins.run_dirs[:SAMPLE_RUNS]:
            d = root / rel_dir
            for sub, files in _walk(d):
                for f in files:
                    rel = (sub / f).relative_to(d).as_posix()
                    role = builtin_role(rel)
                    g = ins.groups.setdefault(_pattern(rel), FileGroup(_pattern(rel)))
                    g.files += 1
                    new_role, new_param = role if role else (None, None)
                    if g.files > 1 and g.param != new_param:
                        new_param = None  # files of one pattern name different agents: each by its own name
                    g.role, g.param = new_role, new_param
                    recs, list_key = _records(sub / f)
                    g.records += len(recs)
                    g.keys.update(_dotted_keys(recs))
                    if len(g.sample) < SAMPLE_RECORDS:
                        g.sample.extend(recs[: SAMPLE_RECORDS - len(g.sample)])
                    if list_key:
                        g.list_key = list_key
        for g in ins.groups.values():
            g.mapped = {k: k for k in _canonical_keys(g.role) if k in g.keys}
        ins.unmapped = [g.pattern for g in ins.groups.values() if g.role is None]
        return ins


def _canonical_keys(role: str | None) -> tuple[str, ...]:
    from app.ingest.canonical import AUDIT_KEYS, CHECK_KEYS, EVENT_KEYS, RUN_KEYS, SCENARIO_KEYS

    return {"metadata": RUN_KEYS + ("agents", "principals", "scenario"), "scenario": SCENARIO_KEYS,
            "conversation": EVENT_KEYS + ("turn", "to", "from"), "events": EVENT_KEYS + ("turn",),
            "trajectory": EVENT_KEYS + ("turn", "role"), "checks": CHECK_KEYS, "audits": AUDIT_KEYS,
            "judgments": AUDIT_KEYS}.get(role or "", ())


def _inspect_foreign(root: Path, taxonomy: Any) -> Inspection:
    from app.ingest.profiled import load_taxonomy

    ins = Inspection(root=os.fspath(root))
    manifest = find_manifest(root)
    ins.manifest = manifest
    runs, markers = find_run_dirs(root)
    ins.run_dirs = [r.relative_to(root).as_posix() for r in runs]
    if ins.run_dirs == ["."]:
        ins.run_dirs = []
        ins.single_run = True
    for p in sorted(root.iterdir()) if root.is_dir() and not ins.single_run else []:
        if p.is_file() and not (manifest and p.name == manifest["file"]):
            ins.loose_files.append(p.name)
    rels = ins.run_dirs
    by_depth: dict[int, list[str]] = defaultdict(list)
    for r in rels:
        by_depth[len(r.split("/"))].append(r)
    templates = [t for d in sorted(by_depth, reverse=True) if (t := path_template(by_depth[d]))]
    ins.path_template = (templates[0] if len(templates) == 1 else templates) if templates else None
    ins.path_examples = rels[:3]
    # group the files of a sample of runs
    for rel_dir in (["."] if ins.single_run else rels[:SAMPLE_RUNS]):
        d = root / rel_dir
        for sub, files in _walk(d):
            for f in files:
                rel = (sub / f).relative_to(d).as_posix()
                pat = _pattern(rel)
                g = ins.groups.setdefault(pat, FileGroup(pat))
                g.files += 1
                recs, list_key = _records(d / rel)
                if list_key:
                    g.list_key = list_key
                g.records += len(recs)
                g.keys.update(_dotted_keys(recs))
                if len(g.sample) < SAMPLE_RECORDS:
                    g.sample.extend(recs[: SAMPLE_RECORDS - len(g.sample)])
    for g in ins.groups.values():
        if any(g.pattern == m for m in markers):
            g.role = "metadata"
        else:
            g.role, g.param = _classify(g)
    ins.family_shapes = _family_shapes(root, ins)
    ins.profile = _build_profile(ins, root, markers, taxonomy if taxonomy is not None else load_taxonomy(None))
    ins.unmapped = [g.pattern for g in ins.groups.values() if g.role is None]
    return ins


#: families looked at for differences in shape (one run each beyond the sample)
MAX_FAMILIES = 50


def _family_shapes(root: Path, ins: Inspection) -> list[tuple[str, str | None, dict[str, list[str]]]]:
    """Per file pattern, the top-level keys that some families' files have and others lack, read
    from the sampled runs plus the first run of every family the sample missed (so that a family
    sorted after the sample is looked at too). Only when the path names a family."""
    tpl = ins.path_template if isinstance(ins.path_template, str) else None
    if not tpl or not tpl.startswith("{family}/") or ins.single_run:
        return []
    by_family: dict[str, list[str]] = defaultdict(list)
    for rel in ins.run_dirs:
        by_family[rel.split("/", 1)[0]].append(rel)
    if len(by_family) < 2 or len(by_family) > MAX_FAMILIES:
        return []
    sampled = set(ins.run_dirs[:SAMPLE_RUNS])
    keys: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for family, rels in by_family.items():
        for rel_dir in [r for r in rels if r in sampled] or rels[:1]:
            d = root / rel_dir
            for sub, files in _walk(d):
                for f in files:
                    rel = (sub / f).relative_to(d).as_posix()
                    pat = _pattern(rel)
                    if pat not in ins.groups:
                        continue
                    recs, _ = _records(d / rel)
                    keys[pat][family].update(k for r in recs if isinstance(r, dict) for k in r)
    out = []
    for pat, fams in keys.items():
        if len(fams) < len(by_family):
            continue  # a file some families lack altogether: no difference of shape to map
        common = set.intersection(*fams.values())
        own = {f: sorted(k - common) for f, k in sorted(fams.items()) if k - common}
        if own:
            out.append((pat, ins.groups[pat].role, own))
    return out


def _build_profile(ins: Inspection, root: Path, markers: list[str], taxonomy: Any) -> Profile:
    spec: dict[str, Any] = {"profile": 1, "name": f"inferred-{root.name or 'tree'}",
                            "description": f"Inferred by `a2annotate inspect` from {root}; edit freely."}
    if ins.single_run:
        spec["run_dirs"] = {"depth": 0}
    else:
        spec["run_dirs"] = {"marker": markers} if markers else {"depth": len(ins.run_dirs[0].split("/"))
                                                                if ins.run_dirs else 1}
    if ins.path_template:
        spec["path"] = ins.path_template
        first = ins.path_template if isinstance(ins.path_template, str) else ins.path_template[0]
        names = re.findall(r"\{(\w+)\}", first)
        sid = [n for n in names if n in ("family", "task", "scenario") or n.startswith("part")]
        if sid:
            spec["scenario_id"] = "/".join("{" + n + "}" for n in sid)
    if ins.manifest:
        spec["manifest"] = ins.manifest
    files: dict[str, str] = {}
    for g in sorted(ins.groups.values(), key=lambda g: (g.role is None, g.pattern)):
        if g.role:
            files[g.pattern] = g.role + (f":{g.param}" if g.param else "")
    spec["files"] = files
    keys: dict[str, dict] = {}
    records: dict[str, str] = {}
    values: dict[str, dict] = {}
    by_role: dict[str, list[FileGroup]] = defaultdict(list)
    for g in ins.groups.values():
        if g.role:
            by_role[g.role].append(g)
            if g.list_key and g.role in ("conversation", "events", "trajectory", "hops", "checks", "judgments"):
                records[g.role] = g.list_key

    def merged(role: str) -> tuple[Counter, list]:
        c: Counter = Counter()
        s: list = []
        for g in by_role.get(role, []):
            c.update(g.keys)
            s.extend(g.sample)
        return c, s

    # run metadata
    mkeys, msample = merged("metadata")
    meta_map = _map_keys(Counter({k: n for k, n in mkeys.items()}), META_SYNONYMS, msample)
    if meta_map:
        keys["metadata"] = meta_map
    if "status" in meta_map:
        seen = Counter(_first(r, meta_map["status"]) for r in msample if isinstance(r, dict))
        ins.values["status"] = seen
        table, unknown = _vocab(seen, STATUS_WORDS, ("completed", "failed", "timeout", "error"))
        if table:
            values["status"] = table
        ins.unmapped.extend(f"status value {u!r}" for u in unknown)
    agent_specs: list[dict] = []
    for r in msample:
        one = _agents_spec([r])
        if one and all(a["from"] != one["from"] for a in agent_specs):
            agent_specs.append(one)
    if agent_specs:
        spec["agents"] = agent_specs[0] if len(agent_specs) == 1 else agent_specs
    agents = agent_specs[0] if agent_specs else None
    roles = set()
    for r in msample:
        for a in agent_specs:
            v = r.get(a["from"]) if isinstance(r, dict) else None
            if isinstance(v, dict):
                roles |= set(v)
            elif isinstance(v, list):
                roles |= {str(x.get(a.get("role", "role"))) for x in v if isinstance(x, dict)}
    # events of all kinds
    chat_roles: Counter = Counter()
    for role in ("conversation", "events", "trajectory"):
        ekeys, esample = merged(role)
        if not esample:
            continue
        syn = dict(EVENT_SYNONYMS)
        if role == "trajectory" and any(isinstance(r, dict) and str(r.get("role", "")).lower() in _CHAT_ROLES
                                        for r in esample):
            syn = {"chat_role": ("role",), **{k: v for k, v in syn.items() if k != "actor"}}
            chat_roles.update(str(r.get("role")) for r in esample if isinstance(r, dict) and "role" in r)
        m = _map_keys(ekeys, syn, esample)
        if m:
            keys[role] = m
        for fld, words, canon in (("visibility", VISIBILITY_WORDS, ("shared", "private")),
                                  ("kind", KIND_WORDS, ())):
            if fld in m:
                seen = Counter(v for r in esample if (v := _first(r, m[fld])) is not None)
                ins.values.setdefault(fld, Counter()).update(seen)
                table, unknown = _vocab(seen, words, canon or ("message", "tool_call", "tool_result",
                                                               "state_update", "artifact", "discovery",
                                                               "delegation", "log"))
                if fld == "kind" and role == "events":  # harness event types: log events, type kept
                    table.update({u: "log" for u in unknown})
                    unknown = []
                if table:
                    values.setdefault(fld, {}).update(table)
                ins.unmapped.extend(f"{fld} value {u!r} ({role})" for u in unknown)
    if chat_roles:
        values["chat_role"] = {r: ("private_state" if r.lower() in ("system", "developer") else
                                   {"kind": "tool_result", "actor": "agent"} if r.lower() in ("tool", "function") else
                                   {"kind": "message", "actor": "agent"} if r.lower() == "assistant" else
                                   {"kind": "message", "actor": "system"})
                               for r in sorted(chat_roles)}
    akeys, asamp = merged("artifact_index")
    if asamp:
        m = _map_keys(akeys, {"file": ("file", "path", "filename", "name"), "turn": ("turn", "turn_id", "at_turn"),
                              "actor": ("filed_by", "actor", "by", "author", "agent", "owner"),
                              "visibility": ("visibility", "scope")}, asamp)
        if m:
            keys["artifact_index"] = m
    # hops, checks, judgments
    hkeys, hsample = merged("hops")
    if hsample:
        m = _map_keys(hkeys, HOP_SYNONYMS, hsample)
        if m:
            keys["hops"] = m
    ckeys, csample = merged("checks")
    if csample:
        m = _map_keys(ckeys, CHECK_SYNONYMS, csample)
        keys["checks"] = m
        if "passed" in m:
            seen = Counter(_first(r, m["passed"]) for r in csample if isinstance(r, dict))
            ins.values["passed"] = seen
            table = {}
            for v in seen:
                if isinstance(v, str):
                    low = v.strip().lower()
                    for tv, ws in PASSED_WORDS.items():
                        if low in ws:
                            table[v] = tv
                    if v not in table:
                        ins.unmapped.append(f"check result {v!r}")
            if table:
                values["passed"] = table
    jkeys, jsample = merged("judgments")
    asample = merged("audits")[1]
    if jsample or asample:
        m = _map_keys(jkeys + merged("audits")[0], JUDGE_SYNONYMS, jsample + asample)
        keys["judgments"] = m
        if asample:
            keys.setdefault("checks", _map_keys(merged("audits")[0], CHECK_SYNONYMS, asample))
        audits: dict[str, Any] = {"taxonomy": getattr(taxonomy, "key", "a2-failures")}
        no_failure, modes = set(), {}
        for r in jsample + asample:
            if not isinstance(r, dict):
                continue
            for fld in ("verdict", "mode"):
                v = _first(r, m.get(fld))
                for x in v if isinstance(v, list) else [v]:
                    if not isinstance(x, str):
                        continue
                    if x.strip().lower() in NO_FAILURE_WORDS:
                        no_failure.add(x)
                    elif fld == "mode":
                        ins.mode_names[x] += 1
        for name in ins.mode_names:
            code = _taxonomy_code(taxonomy, name)
            if code is None:
                ins.unknown_modes.append(name)
            elif code != name:
                modes[name] = code
        if no_failure:
            audits["no_failure"] = sorted(no_failure)
        if modes:
            audits["modes"] = modes
        spec["audits"] = audits
    # metrics -> aggregate score and per-principal outcomes
    mk, msamp = merged("metrics")
    if msamp:
        spec["metrics"] = _metrics_spec(msamp, roles, msample, agents)
    # private state
    private = []
    if values.get("chat_role") and any(v == "private_state" for v in values["chat_role"].values()):
        private.append({"from": "system_message"})
    skeys, ssample = merged("scenario")
    for r in ssample:
        if isinstance(r, dict):
            for k, v in r.items():
                if isinstance(v, dict) and roles and set(v) & roles:
                    private.append({"from": "scenario", "key": f"{k}.{{role}}"})
                    break
            break
    for g in by_role.get("private_state", []):
        private.append({"from": "file", "glob": g.pattern.replace("*", "{role}")})
    if private:
        spec["private_state"] = private
    if keys:
        spec["keys"] = keys
    if records:
        spec["records"] = records
    if values:
        spec["values"] = values
    if by_role.get("events"):
        spec.setdefault("defaults", {})["events"] = {"actor": "system"}
    prof = load_profile(spec)
    prof.inferred = True
    return prof


def _taxonomy_code(taxonomy: Any, name: str) -> str | None:
    if taxonomy is None:
        return name
    try:
        return taxonomy.mode(name)["code"]
    except LookupError:
        return None


def _agents_spec(msample: list) -> dict | None:
    for r in msample:
        if not isinstance(r, dict):
            continue
        for k, v in r.items():
            if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
                inner = Counter(kk for x in v.values() for kk in x)
                model = _pick(inner, _MODEL_KEYS, set())
                if model is None:
                    continue
                spec = {"from": k, "id": "{role}", "model": model}
                p = _pick(inner, _PRINCIPAL_KEYS, set())
                if p:
                    spec["principal"] = p
                h = _pick(inner, _HARNESS_KEYS, set())
                if h:
                    spec["harness"] = h
                return spec
            if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                inner = Counter(kk for x in v for kk in x)
                model = _pick(inner, _MODEL_KEYS, set())
                role = _pick(inner, ("role", "name", "id", "agent"), set())
                ident = _pick(inner, ("id", "agent_id", "name"), set())
                if role is None or (model is None and k.lower() not in ("agents", "participants", "roles")):
                    continue
                spec = {"from": k, "role": role, "id": "{" + (ident or "role") + "}"}
                if model:
                    spec["model"] = model
                p = _pick(inner, _PRINCIPAL_KEYS, set())
                if p:
                    spec["principal"] = p
                h = _pick(inner, _HARNESS_KEYS, set())
                if h:
                    spec["harness"] = h
                return spec
    return None


def _flat(doc: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and not prefix:
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def _metrics_spec(sample: list, roles: set[str], msample: list, agents: dict | None) -> dict:
    flat: dict[str, Any] = {}
    for r in sample:
        if isinstance(r, dict):
            for k, v in _flat(r).items():
                flat.setdefault(k, v)
    spec: dict[str, Any] = {}
    hits = []
    for r in sample:  # one key per metrics file shape (families name their score differently)
        if not isinstance(r, dict):
            continue
        fr = _flat(r)
        if any(h in fr for h in hits):
            continue
        for cand in _AGG_KEYS:
            hit = next((k for k in fr if k.rsplit(".", 1)[-1].lower() == cand
                        and isinstance(fr[k], (int, float)) and not isinstance(fr[k], bool)), None)
            if hit:
                hits.append(hit)
                break
    if hits:
        spec["aggregate_score"] = hits[0] if len(hits) == 1 else hits
    # principal ids: acts_for values; map role -> principal
    principals: dict[str, dict] = {}
    for role in sorted(roles):
        prefix = role.lower() + "_"
        own = [k for k in flat if k.rsplit(".", 1)[-1].lower().startswith(prefix)]
        rule: dict[str, Any] = {}
        nums = [k for k in own if isinstance(flat[k], (int, float)) and not isinstance(flat[k], bool)]
        pref = [k for k in nums if re.search(r"surplus|score|utility|capture|payoff|profit|value", k)]
        if pref or nums:
            rule["score"] = (pref or nums)[0]
        bools = [k for k in own if isinstance(flat[k], bool) and re.search(r"success|ok|won|met|satisf|closed|deal|achieved|reached", k)]
        conditions = []
        if bools:
            rule["success"] = bools[0]
        for k, v in flat.items():
            if isinstance(v, list) and re.search(r"violation|breach|infraction", k, re.I):
                conditions.append({"key": k, "mentions_none": True})
        if conditions and "success" not in rule:
            rule["success"] = conditions
        metrics = sorted(set(own) | {c["key"] for c in conditions})
        if metrics:
            rule["metrics"] = metrics
        if rule:
            principals[role] = rule
    if principals:
        spec["principals"] = principals
    return spec


# --------------------------------------------------------------------------- output

def infer_profile(root: str | os.PathLike) -> Profile:
    """The profile `import` uses for a tree given without `--profile`."""
    root = Path(root)
    if has_builtin_names(root):
        p = load_profile("a2annotate")
        p.inferred = True
        return p
    ins = inspect_tree(root)
    if (not ins.run_dirs and not ins.single_run) or ins.profile is None:
        p = load_profile("a2annotate")
        p.inferred = True
        return p
    return ins.profile


def render(ins: Inspection) -> str:
    """The report `a2annotate inspect` prints: what it looked at, and only that."""
    out = [f"inspected {ins.root}"]
    if ins.candidates:
        out.append("profiles tried on a sample of the runs (runs, rejected, warnings):")
        for name, runs, rejected, warnings in ins.candidates:
            out.append(f"  {name}: {runs} run(s), {rejected} rejected, {warnings} warning(s)")
        out.append(ins.choice or "")
    elif ins.builtin:
        out.append("layout: a2annotate's own names (built-in profile 'a2annotate')")
    rf = ins.runs_found
    if rf is not None:
        how = ("one run per file" if rf.each == "file" else
               f"several runs per file, the list at {rf.records!r}" if rf.records else
               "several runs per file (the array itself, or one a line)")
        out.append(f"runs held in files ({how}): {sum(n for _, n in rf.files)} run(s) in {len(rf.files)} file(s)")
        for name, n in rf.files[:12]:
            out.append(f"  {name}: {n} run(s)")
        if len(rf.files) > 12:
            out.append(f"  ... and {len(rf.files) - 12} more file(s)")
        spec = (ins.profile.spec.get("runs") or {}) if ins.profile else {}
        for role, j in (spec.get("join") or {}).items():
            out.append(f"  shared with each run as its {role}: {j['from']!r}"
                       + (f" (the item whose {j['key']!r} is the run's {j['run_key']!r})" if j.get("key") else "")
                       + (f" from {j['file']}" if j.get("file") else ""))
    else:
        out.append(f"run directories: {len(ins.run_dirs)}" + ("  (PATH is itself one run directory)"
                                                               if ins.single_run else ""))
    if ins.path_template:
        shown = ins.path_template if isinstance(ins.path_template, str) else " | ".join(ins.path_template)
        out.append(f"path pattern: {shown}   (e.g. {', '.join(ins.path_examples[:2])})")
    if ins.manifest:
        m = ins.manifest
        out.append(f"manifest: {m['file']} (run directory in {m['path']!r}"
                   + (f", run id in {m['run_id']!r}" if m.get("run_id") else "") + ") - read as a manifest, not a run")
    if ins.loose_files:
        out.append(f"files outside run directories: {len(ins.loose_files)}" if rf is None else
                   f"files at the top, as plain `import` (no profile) reads them: {len(ins.loose_files)}")
        for name, reader, tried in ins.loose_readers:
            if reader:
                out.append(f"  {name}: read by {reader!r}")
            else:
                out.append(f"  {name}: no reader takes it: " + "; ".join(f"{n}: {r}" for n, _, r in tried))
    sampled = min(len(ins.run_dirs), SAMPLE_RUNS) if not ins.single_run else 1
    if rf is not None:
        out.append("")
        out.append(f"parts of the run records by role, from {min(sum(n for _, n in rf.files), SAMPLE_RECORDS)} "
                   "run(s) sampled (part: role, records); keys with how many records have them, * = mapped to nothing:")
    elif not ins.groups:
        out.append("")
        out.append("no run directories found: no file was sampled for keys" if not ins.run_dirs and
                   not ins.single_run else "the run directories hold no files")
    else:
        out.append("")
        out.append(f"files by role, from {sampled} run directorie(s) sampled (pattern: role, files, records); "
                   "keys with how many records have them, * = mapped to nothing:")
    for g in sorted(ins.groups.values(), key=lambda g: g.pattern):
        role = (g.role + (f":{g.param}" if g.param else "")) if g.role else "UNMAPPED"
        out.append(f"  {g.pattern}: {role}, " + (f"{g.files} file(s)" + (f", {g.records} record(s)" if g.records else "")
                                                  if rf is None else f"{g.records} record(s)"))
        if not g.keys:
            continue
        unmapped = set(unmapped_keys(ins, g)) if g.role else {k for k in g.keys if "." not in k}
        shown = [f"{k}{'*' if k in unmapped else ''} ({n})" for k, n in g.keys.most_common(40) if "." not in k]
        out.append("      keys: " + ", ".join(shown))
        sugg = ins.suggestions.get(g.pattern, {})
        for k in [k for k, _ in g.keys.most_common() if k in unmapped][:20]:
            ex = _example(g.sample, k)
            line = f"      unmapped {k}: e.g. {_short(ex)!r}" if ex is not None else f"      unmapped {k}"
            prop = next(((pk, f, why) for pk, (f, why) in sugg.items()
                         if pk.split("[")[0] == k or pk.split(".")[0] == k), None)
            if prop:
                line += f"  -> suggest {prop[1]}: {prop[0]!r} ({prop[2].split(' (e.g.')[0]})"
            out.append(line)
    if any(ins.values.values()):
        out.append("")
        out.append("values seen:")
        for name, c in ins.values.items():
            if c:
                out.append(f"  {name}: " + ", ".join(f"{v!r} ({n})" for v, n in c.most_common(20)))
    if ins.mode_names:
        out.append("audit mode names: " + ", ".join(f"{m!r} ({n})" for m, n in ins.mode_names.most_common(30)))
    out.append("")
    if ins.profile is not None and not ins.builtin:
        sp = ins.profile.spec
        mapped = []
        if sp.get("agents"):
            ag = sp["agents"]
            mapped.append("agents from " + ("the actors seen" if isinstance(ag, dict) and ag.get("from") == "actors"
                                            else f"metadata {(ag if isinstance(ag, dict) else ag[0])['from']!r}"))
        if (sp.get("metrics") or {}).get("principals"):
            mapped.append("per-principal outcomes from metrics for " + ", ".join(sp["metrics"]["principals"]))
        if sp.get("private_state"):
            mapped.append("private state from " + ", ".join(s["from"] for s in sp["private_state"]))
        if mapped:
            out.append("maps: " + "; ".join(mapped))
    if ins.groups and rf is None:
        files = [g.pattern for g in ins.groups.values() if g.role is None]
        out.append("files no role takes (not imported; listed as unused files): "
                   + (", ".join(files) or f"none of the {len(ins.groups)} file pattern(s) sampled"))
        values = [u for u in ins.unmapped if u not in files]
        values += [f"mode {m!r} (no taxonomy match; add to audits.modes)" for m in ins.unknown_modes]
        if ins.builtin:
            out.append("values and modes: the built-in names read canonical values as they are")
        else:
            out.append("values and modes not mapped (kept in metadata on import, reported as warnings): "
                       + (", ".join(values) or "none among the values sampled"))
    if ins.dry is not None and (ins.dry.runs or ins.dry.errors):
        d = ins.dry
        n_w = sum(c for c, _ in d.warnings.values())
        out.append("")
        what = "run(s), every one" if rf is not None else "sampled run(s)"
        out.append(f"dry run on {len(d.runs) + len(d.errors)} {what}: {len(d.runs)} would be stored, "
                   f"{len(d.errors)} rejected; agents {', '.join(d.agents) or 'none'}; principals "
                   f"{', '.join(d.principals) or 'none'}; events by 'system': {d.system_events}")
        out.append(f"warnings the import would raise: {n_w}" + (", by cause:" if n_w else ""))
        for cause, (n, where) in sorted(d.warnings.items(), key=lambda kv: -kv[1][0])[:15]:
            out.append(f"  {n} x {cause} (first at {where})")
        for e in d.errors[:5]:
            out.append(f"  rejected: {e}")
        out.append(f"notices (kept verbatim in metadata, no text lost): {d.notices}")
        if rf is not None:
            out.append("files the profile does not read (listed as unused on import): "
                       + (", ".join(d.unused[:12]) or f"none (every file of {ins.root} was read)"))
    if ins.family_shapes:
        out.append("families whose files differ in shape (keys only some families have; a `blocks:` entry per "
                   "family is proposed in the starter profile):")
        for pat, role, own in ins.family_shapes:
            out.append(f"  {pat} ({role or 'no role'}): " + "; ".join(
                f"{fam}: {', '.join(ks[:8])}{' ...' if len(ks) > 8 else ''}" for fam, ks in own.items()))
    if ins.suggest_agents:
        out.append("suggest agents: {from: actors} (the log's actors are named in no metadata)")
    if ins.suggestions or ins.suggest_agents:
        out.append("suggested mappings are written into the starter profile as comments (--write-profile)")
    return "\n".join(out)


def profile_text(ins: Inspection) -> str:
    header = (f"Import profile written by `a2annotate inspect {ins.root}`.\n"
              "Edit it, then: a2annotate import PATH --profile THIS_FILE [--report report.jsonl]\n"
              "Reference: docs/importing.md")
    if not ins.profile:
        return ""
    text = dump_profile(ins.profile, header)
    text = _with_suggestions(text, ins) if ins.suggestions or ins.suggest_agents else text
    return text + _family_blocks(ins) if ins.family_shapes else text


def _family_blocks(ins: Inspection) -> str:
    """A commented ``blocks:`` entry per family whose files have keys of their own: each maps the
    family's own keys to the fields the profile reads them as (where the profile maps them at
    all), so that one family's key is not tried for another's; keys the profile does not map are
    named in a comment."""
    keys_spec = (ins.profile.spec.get("keys") or {}) if ins.profile else {}
    per_family: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    loose: dict[str, list[str]] = defaultdict(list)
    for pat, role, own in ins.family_shapes:
        fields = keys_spec.get(role or "") or {}
        syn = {**EVENT_SYNONYMS, **SUGGEST_SYNONYMS} if role in _EVENT_ROLES else META_SYNONYMS if role == "metadata" \
            else {}
        for fam, ks in own.items():
            mapped: dict[str, str] = {}
            for k in ks:  # the field the profile reads the key as, else the field its name suggests
                field_ = next((f for f, cand in fields.items() if k == cand or (isinstance(cand, list) and k in cand)),
                              None) or next((f for f, words in syn.items() if k.lower() in words), None)
                if field_ is not None:
                    mapped.setdefault(field_, k)
            if mapped and role:
                per_family[fam].setdefault(role, {}).update(mapped)
            rest = [k for k in ks if k not in mapped.values()]
            if rest:
                loose[fam].append(f"{pat}: {', '.join(rest)}")
    lines = ["", "# The families' files differ in shape (keys only some families have, from at least one run of",
             "# each family). A block per family maps its own keys; delete the '#~ ' to accept",
             "# (docs/importing.md, \"Per-family and per-task blocks\"):"]
    if not per_family:
        lines.append("# (none of those keys is mapped yet: map them under keys:, then a block per family)")
    else:
        lines.append(f"{MARK}blocks:")
    for fam in sorted(set(per_family) | set(loose)):
        if fam in per_family:
            lines.append(f"{MARK}  - when: {{family: {json.dumps(fam)}}}")
            lines.append(f"{MARK}    keys:")
            for role, mapped in per_family[fam].items():
                lines.append(f"{MARK}      {role}: " + json.dumps(mapped))
        for note in loose.get(fam, []):
            lines.append(f"#   family {fam}, keys no field takes yet: {note}")
    return "\n".join(lines) + "\n"


def _with_suggestions(text: str, ins: Inspection) -> str:
    """The profile text with each suggestion as a commented line (``#~ ``) under its role in
    ``keys:``, and a commented ``keep:`` block for text that maps to no canonical field: delete
    the ``#~ `` in front of a line to accept it (the role's line too when the role has no keys yet)."""
    if ins.builtin:
        return text + "\n# keys nothing maps (the built-in names take canonical keys only): " + ", ".join(
            sorted({k for sg in ins.suggestions.values() for k in sg})) + "\n"
    roles: dict[str, list[str]] = {}
    keep: dict[str, list[str]] = {}
    for pattern, sugg in ins.suggestions.items():
        g = ins.groups[pattern]
        for key, (fieldname, why) in sugg.items():
            if fieldname == "keep":
                keep.setdefault(g.role, []).append(key)
            else:
                roles.setdefault(g.role, []).append(f"{fieldname}: {json.dumps(key)}  # suggested: {why}")
    lines = text.splitlines()
    out: list[str] = []
    in_keys = False
    done: set[str] = set()

    def flush_missing() -> None:
        for role, items in roles.items():
            if role not in done:
                out.append(f"{MARK}  {role}:")
                out.extend(f"{MARK}    {x}" for x in items)
                done.add(role)

    for line in lines:
        if in_keys and line and not line.startswith(" "):
            flush_missing()
            in_keys = False
        out.append(line)
        if line.startswith("keys:"):
            in_keys = True
            continue
        if in_keys and line.startswith("  ") and not line.startswith("   ") and line.rstrip().endswith(":"):
            role = line.strip()[:-1]
            if role in roles:
                out.extend(f"{MARK}    {x}" for x in roles[role])
                done.add(role)
    if in_keys:
        flush_missing()
    if len(done) < len(roles):  # the profile maps no keys yet: the whole block commented
        out.append(f"{MARK}keys:")
        flush_missing()
    if ins.suggest_agents:
        out.append(f"{MARK}agents: {{from: actors}}  # suggested: the log's actors are named in no metadata; "
                   "add principal: ID, and principals: {from: actors, match: [NAME]} for a user")
    if keep:
        out.append(f"{MARK}keep:  # suggested: keys whose text maps to no canonical field, kept in metadata on purpose")
        out.extend(f"{MARK}  {role}: {json.dumps(sorted(set(keys)))}" for role, keys in keep.items())
    return "\n".join(out) + "\n"


#: what starts a suggested line of a starter profile: delete it to accept the suggestion
MARK = "#~ "


# --------------------------------------------------------------------------- dry runs through the registry

@dataclass
class DryRun:
    """What `import PATH` would produce, found by reading PATH exactly as the import does (the
    registry's reader, the inferred profile for trees) and storing nothing."""

    path: str
    reader: str | None = None
    reason: str | None = None
    #: every reader asked, with its score and reason (best first)
    tried: list[tuple[str, float, str]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: warning cause -> (count, first example location)
    warnings: dict[str, list] = field(default_factory=dict)
    notices: int = 0
    unused: list[str] = field(default_factory=list)
    agents: Counter = field(default_factory=Counter)
    principals: Counter = field(default_factory=Counter)
    kinds: Counter = field(default_factory=Counter)
    system_events: int = 0
    events_without_text: int = 0


def warning_cause(message: str) -> str:
    """A warning's cause: its message with the particulars (quoted values, numbers, key lists) taken out."""
    m = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    m = re.sub(r"\b\d+\b", "N", m)
    m = re.sub(r":\s[^;]*\(N\)(, [^;]*\(N\))*", ": …", m)
    return m[:160]


def dry_run(path: str | os.PathLike, fmt: str | None = None, profile: Any = None) -> DryRun:
    """Read `path` as `import` would and tally what it would store (nothing is written)."""
    from app.ingest.detect import iter_path
    from app.ingest.registry import registry

    p = Path(path)
    out = DryRun(path=os.fspath(path))
    reg = registry()
    pick = reg.pick(p)
    out.tried = [(t.name, t.sniff.score, t.sniff.reason) for t in pick.tried]
    out.reader = fmt or pick.name
    out.reason = pick.sniff.reason if pick.sniff is not None and not fmt else None
    for item in iter_path(p, format=fmt, profile=profile):
        _tally(out, item)
    return out


def _tally(out: DryRun, item: Any) -> None:
    out.unused.extend(item.unused_files)
    out.notices += len(item.notices)
    for w in item.warnings:
        cause = warning_cause(str(w.get("message", "")))
        slot = out.warnings.setdefault(cause, [0, w.get("location") or item.source])
        slot[0] += 1
    if item.error is not None:
        out.errors.append(str(item.error))
        return
    if item.run is None:
        return
    run = item.run
    out.runs.append(run["run_id"])
    out.agents.update(a["id"] for a in run["agents"])
    out.principals.update(pr["id"] for pr in run["principals"])
    for e in run["events"]:
        out.kinds[e["kind"]] += 1
        out.system_events += e["actor"] == "system"
        out.events_without_text += e.get("content") in (None, "") and e["kind"] in ("message", "tool_result")


def sample_dry_run(root: Path, profile: Profile | None, limit: int = SAMPLE_RUNS) -> DryRun:
    """The tree read with `profile` as `import` would, up to `limit` runs (nothing stored)."""
    from app.ingest.readers.tree import iter_tree

    out = DryRun(path=os.fspath(root), reader="tree", reason=f"profile {profile.name!r}" if profile else None)
    if profile is None:
        return out
    n = 0
    for item in iter_tree(root, profile=profile):
        _tally(out, item)
        n += item.run is not None or item.error is not None
        if n >= limit:
            break
    return out


def _loose_readers(root: Path, ins: Inspection) -> None:
    """For each file outside run directories: the reader the registry picks, or why each declined."""
    from app.ingest.registry import registry

    if not root.is_dir():
        return
    reg = registry()
    for name in ins.loose_files[:50]:
        pick = reg.pick(root / name, dirs=False)
        ins.loose_readers.append((name, pick.name, [(t.name, t.sniff.score, t.sniff.reason) for t in pick.tried]))


# --------------------------------------------------------------------------- proposals for unmapped keys

#: names that propose a field only in suggestions (never taken by the inference itself)
SUGGEST_SYNONYMS = {"call_id": ("tool_call_id", "call_id", "tool_use_id"), "tool_calls": ("tool_calls",)}
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_EVENT_ROLES = ("conversation", "events", "trajectory")


def _example(sample: list, key: str) -> Any:
    for r in sample:
        if isinstance(r, dict) and key in r and r[key] not in (None, "", [], {}):
            return r[key]
    return None


def _short(v: Any, n: int = 50) -> str:
    t = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    return t if len(t) <= n else t[: n - 3] + "..."


def _top(path: str) -> str:
    """The top-level key a profile path reads (``to_string(task_id)`` -> ``task_id``)."""
    from app.ingest.profile import is_plain_path, root_key

    if is_plain_path(path):
        return path.split(".")[0]
    try:
        return root_key(path) or path
    except ValueError:
        return path.split(".")[0].split("[")[0]


def unmapped_keys(ins: Inspection, g: FileGroup) -> list[str]:
    """The top-level keys of a file group that the chosen profile maps to nothing."""
    if g.role is None:
        return []
    if ins.builtin:
        known = set(_canonical_keys(g.role))
    else:
        keymap = ((ins.profile.spec.get("keys") or {}) if ins.profile else {})
        rk = keymap.get("judgments" if g.role == "audits" else g.role, {})
        known = {_top(k) for v in rk.values() for k in ([v] if isinstance(v, str) else v)}
        from app.ingest.profile import ROLE_FIELDS

        kr = "judgments" if g.role == "audits" else g.role
        known |= {f for f in ROLE_FIELDS.get(kr, ()) if not rk.get(f)}  # a canonical name maps itself
        sp = ins.profile.spec if ins.profile else {}
        if g.role == "metrics":
            m = sp.get("metrics") or {}
            for v in [m.get("aggregate_score"), m.get("status")]:
                known |= {k.split(".")[0] for k in ([v] if isinstance(v, str) else v or [])}
            for pspec in (m.get("principals") or {}).values():
                known |= {str(pspec.get("score", "")).split(".")[0]}
                known |= {str(x).split(".")[0] for x in pspec.get("metrics") or []}
                succ = pspec.get("success")
                known |= {str(c.get("key", "")).split(".")[0] for c in succ} if isinstance(succ, list) else \
                    {str(succ or "").split(".")[0]}
        if g.role == "scenario":
            known |= {"private", "brief", "description", "title"} & set(g.keys)
            for src in sp.get("private_state") or []:
                if src.get("from") == "scenario":
                    known.add(str(src.get("key", "private.{role}")).split(".")[0])
        if g.role == "metadata":
            sp = ins.profile.spec if ins.profile else {}
            for part in ("agents", "principals"):
                spec = sp.get(part)
                for one in spec if isinstance(spec, list) else [spec] if spec else []:
                    known.add(str(one.get("from", "")).split(".")[0])
            known.update((sp.get("metrics") or {}).get("principals") or {})
    keep = set(((ins.profile.spec.get("keep") or {}).get(g.role) or ()) if ins.profile else ())
    return [k for k, _ in g.keys.most_common() if "." not in k and k not in known and k not in keep]


def suggest(ins: Inspection) -> None:
    """Propose a canonical field for each unmapped key, by its name (the synonyms above, then
    partial matches) and by its values (ISO times -> ts, prose -> content, content parts -> a
    JMESPath join, OpenAI-style tool calls -> tool_calls, speaker names -> actor)."""
    keymap = ((ins.profile.spec.get("keys") or {}) if ins.profile and not ins.builtin else {})
    for g in ins.groups.values():
        if g.role not in (*_EVENT_ROLES, "metadata"):
            continue
        taken = set(keymap.get(g.role) or {})
        if ins.builtin:
            taken |= {k for k in _canonical_keys(g.role) if k in g.keys}
        out: dict[str, tuple[str, str]] = {}
        syn = EVENT_SYNONYMS if g.role in _EVENT_ROLES else META_SYNONYMS
        actors = set()
        for r in g.sample:
            if isinstance(r, dict):
                for k in ("actor", "from", "sender", "speaker", "author", "source"):
                    if isinstance(r.get(k), str):
                        actors.add(r[k])
        for key in unmapped_keys(ins, g):
            low = key.lower()
            value = _example(g.sample, key)
            field_: str | None = None
            why = ""
            for name, words in (*syn.items(), *(SUGGEST_SYNONYMS.items() if g.role in _EVENT_ROLES else ())):
                if name not in taken and (low in words or any(w in low for w in words if len(w) > 3)):
                    field_, why = name, f"the name {key!r} is a {name} key in other logs"
                    break
            if field_ is None and g.role == "metadata" and isinstance(value, dict):
                for sub in value:  # a nested scenario / task object: {"id": ..., "domain": ...}
                    target = "scenario_id" if sub == "id" and re.search("task|scenario|env", low) else next(
                        (n for n, w in META_SYNONYMS.items() if sub.lower() in w and n != "run_id"), None)
                    if target and target not in taken:
                        taken.add(target)
                        out[f"{key}.{sub}"] = (target, f"the key {sub!r} of {key!r} (e.g. {_short(value[sub])!r})")
                if any(k.startswith(f"{key}.") for k in out):
                    continue
            if field_ is None and g.role in _EVENT_ROLES:
                if isinstance(value, str) and _ISO.match(value) and "ts" not in taken:
                    field_, why = "ts", "its values are timestamps"
                elif isinstance(value, list) and value and all(isinstance(x, dict) and "function" in x for x in value) \
                        and "tool_calls" not in taken:
                    field_, why = "tool_calls", "its values are OpenAI-style tool calls"
                elif isinstance(value, list) and value and all(isinstance(x, dict) and "text" in x for x in value) \
                        and "content" not in taken:
                    field_, why = "content", "its values are content parts"
                    key = f"{key}[?text].text | join('\\n', @)"
                elif isinstance(value, str) and value in actors and "actor" not in taken and "recipients" in taken:
                    field_, why = "actor", "its values are speakers' names"
                elif isinstance(value, str) and value in actors and "recipients" not in taken:
                    field_, why = "recipients", "its values are speakers' names"
                elif isinstance(value, str) and " " in value and "content" not in taken:
                    field_, why = "content", "its values are prose"
            if field_ is not None:
                taken.add(field_)
                out[key] = (field_, f"{why} (e.g. {_short(value)!r})" if value is not None else why)
            elif any(carries_text(r.get(key)) for r in g.sample if isinstance(r, dict)):
                out[key] = ("keep", f"text that maps to no canonical field (e.g. {_short(value)!r}): "
                                    "kept in metadata on purpose")
        if out:
            ins.suggestions[g.pattern] = out
    d = ins.dry
    if d is not None and ins.profile is not None and not ins.builtin and not ins.profile.spec.get("agents") \
            and any("is not an agent id" in c for c in d.warnings):
        ins.suggest_agents = True



def render_dry_run(d: DryRun, limit: int = 12) -> str:
    lines = [f"{d.path}: read by {d.reader!r}" + (f" ({d.reason})" if d.reason else "")
             if d.reader else f"{d.path}: no reader takes it"]
    lines.append("readers asked (score, reason):")
    for name, score, reason in d.tried:
        lines.append(f"  {name}: {score:.2f} {reason}")
    lines.append(f"import would store: {len(d.runs)} run(s), reject {len(d.errors)}")
    for rid in d.runs[:limit]:
        lines.append(f"  run {rid}")
    if len(d.runs) > limit:
        lines.append(f"  ... and {len(d.runs) - limit} more")
    if d.runs:
        lines.append("agents: " + ", ".join(f"{a} ({n})" for a, n in d.agents.most_common(limit)))
        lines.append("principals: " + (", ".join(f"{a} ({n})" for a, n in d.principals.most_common(limit))
                                       or "(none: every agent acts for no principal)"))
        lines.append("events by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(d.kinds.items())))
        lines.append(f"events by 'system': {d.system_events}; messages/tool results without text: "
                     f"{d.events_without_text}")
    for e in d.errors[:limit]:
        lines.append(f"  rejected: {e}")
    total = sum(c for c, _ in d.warnings.values())
    lines.append(f"warnings the import would raise: {total}" + (", by cause:" if total else ""))
    for cause, (n, where) in sorted(d.warnings.items(), key=lambda kv: -kv[1][0])[:limit]:
        lines.append(f"  {n} x {cause} (first at {where})")
    lines.append(f"notices (kept verbatim in metadata, no text lost): {d.notices}")
    if d.unused:
        lines.append(f"files no reader takes: {len(d.unused)}")
        for u in d.unused[:limit]:
            lines.append(f"  {u}")
    if not d.runs and not d.errors and not d.unused:
        lines.append("nothing to import here")
    if not d.reader or (not d.runs and d.errors):
        lines.append("no reader reads this as runs: write an import profile (see docs/importing.md) or a "
                     "reader plugin (docs/readers.md)")
    return "\n".join(lines)
