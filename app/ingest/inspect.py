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

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.ingest import safejson
from app.ingest.limits import input_limits
from app.ingest.profile import Profile, dump_profile, load_profile

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


# --------------------------------------------------------------------------- walking

def _walk(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        yield Path(dirpath), sorted(f for f in filenames if not f.startswith("."))


def has_builtin_names(root: Path) -> bool:
    """True when some directory holds a run metadata file by a2annotate's own names."""
    from app.ingest.tree import METADATA_NAMES

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
            from app.ingest import safeyaml  # aliases, nesting and size within the input limits

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

def inspect_tree(root: str | os.PathLike, taxonomy: Any = None) -> Inspection:
    """Walk `root` and infer how to read it (see the module docstring)."""
    from app.ingest.profiled import load_taxonomy

    root = Path(root)
    ins = Inspection(root=os.fspath(root))
    if has_builtin_names(root):
        ins.builtin = True
        ins.profile = load_profile("a2annotate")
        ins.profile.inferred = True
        from app.ingest.tree import builtin_role, is_run_dir, load_mapping

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
                    g.role, g.param = (role if role else (None, None))
        ins.unmapped = [g.pattern for g in ins.groups.values() if g.role is None]
        return ins

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
    ins.profile = _build_profile(ins, root, markers, taxonomy if taxonomy is not None else load_taxonomy(None))
    ins.unmapped = [g.pattern for g in ins.groups.values() if g.role is None]
    return ins


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
    """The report `a2annotate inspect` prints."""
    out = [f"inspected {ins.root}"]
    if ins.builtin:
        out.append("layout: a2annotate's own names (built-in profile 'a2annotate')")
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
        out.append(f"files outside run directories: {', '.join(ins.loose_files)}")
    out.append("")
    out.append("files by role (pattern relative to a run directory: role, files, records):")
    keymap = (ins.profile.spec.get("keys") or {}) if ins.profile else {}
    for g in sorted(ins.groups.values(), key=lambda g: g.pattern):
        role = (g.role + (f":{g.param}" if g.param else "")) if g.role else "UNMAPPED"
        out.append(f"  {g.pattern}: {role}, {g.files} file(s)" + (f", {g.records} record(s)" if g.records else ""))
        if g.keys:
            mapped_keys = set()
            rk = keymap.get("judgments" if g.role == "audits" else (g.role or ""), {})
            for v in rk.values():
                for k in [v] if isinstance(v, str) else v:
                    mapped_keys.add(k)
                    mapped_keys.add(k.split(".")[0])
            shown = []
            for k, n in g.keys.most_common(40):
                mark = "" if k in mapped_keys or "." in k else "*"
                if "." in k and k not in mapped_keys:
                    continue
                shown.append(f"{k}{mark} ({n})")
            out.append("      keys: " + ", ".join(shown))
    if any(ins.values.values()):
        out.append("")
        out.append("values seen:")
        for name, c in ins.values.items():
            if c:
                out.append(f"  {name}: " + ", ".join(f"{v!r} ({n})" for v, n in c.most_common(20)))
    if ins.mode_names:
        out.append("audit mode names: " + ", ".join(f"{m!r} ({n})" for m, n in ins.mode_names.most_common(30)))
    out.append("")
    if ins.profile is not None:
        sp = ins.profile.spec
        mapped = []
        if sp.get("agents"):
            mapped.append(f"agents from metadata {sp['agents']['from']!r}")
        if (sp.get("metrics") or {}).get("principals"):
            mapped.append("per-principal outcomes from metrics for " + ", ".join(sp["metrics"]["principals"]))
        if sp.get("private_state"):
            mapped.append("private state from " + ", ".join(s["from"] for s in sp["private_state"]))
        if mapped:
            out.append("maps: " + "; ".join(mapped))
    files = [g.pattern for g in ins.groups.values() if g.role is None]
    values = [u for u in ins.unmapped if u not in files]
    values += [f"mode {m!r} (no taxonomy match; add to audits.modes)" for m in ins.unknown_modes]
    out.append("files no role takes (not imported; listed as unused files): " + (", ".join(files) or "none"))
    out.append("values and modes not mapped (kept in metadata on import, reported as warnings): "
               + (", ".join(values) or "none"))
    if any(g.keys for g in ins.groups.values()):
        out.append("keys marked * are taken by no canonical field: they are kept in the record's metadata")
    return "\n".join(out)


def profile_text(ins: Inspection) -> str:
    header = (f"Import profile written by `a2annotate inspect {ins.root}`.\n"
              "Edit it, then: a2annotate import PATH --profile THIS_FILE [--report report.jsonl]\n"
              "Reference: docs/importing.md")
    return dump_profile(ins.profile, header) if ins.profile else ""
