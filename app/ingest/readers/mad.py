"""MAST's MAD dataset: `MAD_full_dataset.json` and `MAD_human_labelled_dataset.json`.

Pure: records in, canonical runs out (no database).

Full file: a JSON array of ``{mas_name, llm_name, benchmark_name, trace_id, trace: {key, index,
trajectory}, mast_annotation: {"1.1": 0|1|null, ...}}``. One run per record, id
``mad/<mas_name>/<llm_name>/<trace_id>/<trace.key>`` (``(mas_name, llm_name, trace_id)`` alone is
not unique in the release). The marks come from MAST's LLM judge: they become audits of source
``mast-llm`` (annotator ``judge:mast-llm``) under the published ``mast`` taxonomy; a record whose
marks are all ``null`` is not annotated, all zeros is an explicit "no failure found".

Human-labelled file: ``{round, mas_name, benchmark_name, trace_id, trace (text), annotations:
[{"failure mode": "<code> <name>\\n<definition>", "annotator_1": bool, "annotator_2": bool,
"annotator_3": bool}]}``. One run per record, id
``mad-human/<round>/<mas_name>/<benchmark>/<trace_id>`` (spaces in id parts become ``_``:
``Round_2``); each annotator becomes the human annotator ``mad:annotator_N`` whose labels are the
modes it marked, under the taxonomy of the round: ``Round 1`` the 18-mode draft (``mast-draft-r1``),
``Round 2``/``Round 3`` the 17-mode draft (``mast-draft-r2``), later rounds the published 14
(``mast``). A code outside the round's taxonomy is reported in ``metadata.import_warnings`` and
kept (in ``metadata.mad``), never mapped by guess. The name and definition text each record
gives a mode is kept in ``metadata.mad.modes``.

Trajectory: the raw log text is kept whole: the run's events are consecutive slices of it
(joined, they give the text back exactly). Where the framework's log style is recognised
(ChatDev, MetaGPT, AG2, Magentic-One, AppWorld, HyperAgent, OpenManus; by ``mas_name`` first,
else by trying each style) the text is split at each agent's turn into per-agent events, with
the text before the first turn as a ``system`` log event; otherwise the run has one log event
holding all of it. Labels are trace-level (no agent, no evidence), as MAST's are.
Group chats (AG2's GroupChat, whose speakers post to the chat manager, and AutoGen AgentChat
teams such as Magentic-One): a turn posted to the chat is ``shared`` with every other member as
recipients (``data.group_chat``); a message addressed to one agent stays addressed to it, and an
event with no recipient (a note, the preamble) is ``private``.

Anything else in a record goes to ``metadata`` (never dropped). A record is rejected only when
it cannot be a run: no id at all, or no trajectory text.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.ingest.canonical import Location, parse_ts
from app.ingest.items import ImportItem, error_item, item_from_raw
from app.ingest.readers import peek
from app.ingest.readers.base import Reader, Sniff
from app.ingest.readers.canonical import BOM
from app.ingest.safety import safejson

JUDGE_SOURCE = "mast-llm"
HUMAN_PREFIX = "mad:"
PUBLISHED = "mast"
#: taxonomy key and mode codes of each draft (codes as the rounds number them)
DRAFTS = {
    "mast-draft-r1": [f"{c}.{i}" for c, n in ((1, 5), (2, 6), (3, 4), (4, 3)) for i in range(1, n + 1)],
    "mast-draft-r2": [f"{c}.{i}" for c, n in ((1, 7), (2, 7), (3, 3)) for i in range(1, n + 1)],
}
PUBLISHED_CODES = [f"{c}.{i}" for c, n in ((1, 5), (2, 6), (3, 3)) for i in range(1, n + 1)]
TAXONOMY_CODES = {**DRAFTS, PUBLISHED: PUBLISHED_CODES}
FULL_KEYS = ("mas_name", "llm_name", "benchmark_name", "trace_id", "trace", "mast_annotation")
HUMAN_KEYS = ("round", "mas_name", "benchmark_name", "trace_id", "trace", "annotations")
PRINCIPAL = "user"
#: actor names that stand for the system's user (the principal), not for an agent
USER_NAMES = ("user", "User", "Human", "human")
MAX_ID = 200


def taxonomy_for_round(round_value: Any) -> str:
    """Returns the taxonomy key of a human annotation round: Round 1 -> mast-draft-r1, Rounds 2
    and 3 -> mast-draft-r2, any later round (or none given) -> mast."""
    m = re.search(r"\d+", str(round_value or ""))
    n = int(m.group()) if m else None
    if n == 1:
        return "mast-draft-r1"
    if n in (2, 3):
        return "mast-draft-r2"
    return PUBLISHED


# --------------------------------------------------------------------------- shape detection

def record_kind(obj: Any) -> str | None:
    """Returns "mad-full", "mad-human" or None for one record."""
    if not isinstance(obj, dict):
        return None
    if "run_id" in obj:
        return None
    if isinstance(obj.get("annotations"), list) and ("round" in obj or isinstance(obj.get("trace"), str)):
        return "mad-human"
    if "mast_annotation" in obj or (isinstance(obj.get("trace"), dict) and "trajectory" in obj["trace"]):
        return "mad-full"
    return None


def looks_like_mad_keys(keys: set[str]) -> bool:
    """True when a record's top-level keys are MAD's (full or human-labelled)."""
    if "run_id" in keys:
        return False
    return "mast_annotation" in keys or ({"annotations", "round"} <= keys) or (
        {"mas_name", "trace"} <= keys and ("trace_id" in keys or "annotations" in keys))


# --------------------------------------------------------------------------- trajectory splitters

@dataclass
class Segment:
    """A slice ``text[start:end]`` said by ``actor`` (None: the system) to ``recipients``."""

    start: int
    end: int = 0
    actor: str | None = None
    recipients: list[str] = field(default_factory=list)
    kind: str = "message"
    data: dict[str, Any] = field(default_factory=dict)
    ts: str | None = None


def _clean_actor(name: str | None) -> str | None:
    if name is None:
        return None
    name = " ".join(str(name).replace("**", "").split()).strip(" :'\"")
    return name[:MAX_ID] or None


def _headers(text: str, pattern: re.Pattern, build) -> list[Segment]:
    out = []
    for m in pattern.finditer(text):
        seg = build(m)
        if seg is not None:
            out.append(seg)
    return out


_CHATDEV = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) INFO\] (?P<actor>[A-Za-z][\w .-]*?): "
    r"\*\*(?P<a>[^*\n]+?)<->(?P<b>[^*\n]+?) on : (?P<phase>[\w ]+?), turn (?P<turn>\d+)\*\*", re.M)


def _split_chatdev(text: str) -> list[Segment]:
    def build(m):
        actor = _clean_actor(m["actor"])
        a, b = _clean_actor(m["a"]), _clean_actor(m["b"])
        other = b if a == actor else a
        return Segment(m.start(), actor=actor, recipients=[other] if other and other != actor else [],
                       data={"phase": m["phase"].strip(), "turn": int(m["turn"]), "logged_at": m["ts"]})
    return _headers(text, _CHATDEV, build)


_DASHES = re.compile(r"^-{20,}[ \t]*$", re.M)
_METAGPT_FROM = re.compile(r"^FROM:[ \t]*(?P<actor>[^\n]+?)[ \t]*$", re.M)
_METAGPT_TO = re.compile(r"^TO:[ \t]*(?P<to>[^\n]+?)[ \t]*$", re.M)
_METAGPT_NEW = re.compile(r"NEW MESSAGES:[ \t]*\n\s*(?P<actor>[A-Za-z][\w .()-]{0,80}?):", re.M)


def _split_metagpt(text: str) -> list[Segment]:
    if not re.search(r"^===.*===", text, re.M) and not _METAGPT_FROM.search(text):
        return []
    cuts = [m.start() for m in _DASHES.finditer(text)]
    segs = []
    for i, start in enumerate(cuts):
        end = cuts[i + 1] if i + 1 < len(cuts) else len(text)
        block = text[start:end]
        m = _METAGPT_FROM.search(block) or _METAGPT_NEW.search(block)
        if m is None:
            continue
        to = _METAGPT_TO.search(block)
        recipients = [r for r in (_clean_actor(x) for x in re.split(r"[,;]", to["to"])) if r] if to else []
        segs.append(Segment(start, actor=_clean_actor(m["actor"]), recipients=recipients))
    return segs


_AG2_YAML = re.compile(r"^[ \t]*-?[ \t]*content:", re.M)
_AG2_NAME = re.compile(r"^[ \t]*name:[ \t]*(?P<name>[^\n]+?)[ \t]*$", re.M)
_AG2_ROLE = re.compile(r"^[ \t]*role:[ \t]*(?P<role>[^\n]+?)[ \t]*$", re.M)
_AG2_CONSOLE = re.compile(r"^(?P<actor>[A-Za-z_][\w.\- ]{0,80}?) \(to (?P<to>[A-Za-z_][\w.\- ]{0,80}?)\):[ \t]*$", re.M)


def _split_ag2(text: str) -> list[Segment]:
    console = _headers(text, _AG2_CONSOLE, lambda m: Segment(
        m.start(), actor=_clean_actor(m["actor"]), recipients=[_clean_actor(m["to"])]))
    if len(console) >= 2:
        return console
    starts = [m.start() for m in _AG2_YAML.finditer(text)]
    segs = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        block = text[start:end]
        names = list(_AG2_NAME.finditer(block))
        roles = list(_AG2_ROLE.finditer(block))
        actor = _clean_actor(names[-1]["name"]) if names else (_clean_actor(roles[-1]["role"]) if roles else None)
        segs.append(Segment(start, actor=actor, data={"role": roles[-1]["role"].strip()} if roles else {}))
    return segs if len(segs) >= 2 else console


_MAGENTIC_BLOCK = re.compile(
    r"^-{5,}[ \t]+(?:(?P<type>[A-Za-z]+(?:Message|Event|Request|Result))[ \t]*\()?(?P<actor>[A-Za-z_][\w.\- ]{0,80}?)\)?"
    r"[ \t]+-{5,}[ \t]*$", re.M)
#: Magentic-One's older log lines and Who&When's hand-crafted roles: `Orchestrator (-> WebSurfer)`,
#: `Orchestrator (thought)`, `Orchestrator (termination condition)`
ROLE_ARROW = re.compile(r"^(?P<actor>[^()\n]+?)\s*\((?:->\s*(?P<to>[^()\n]+?)|(?P<note>[^()\n]+?))\)\s*$")
#: a log line `[timestamp], Name (...):` or `[timestamp], Name:`; without a timestamp only `Name (...):`
_MAGENTIC_LINE = re.compile(
    r"^(?:\[[^\]\n]*\][,:]?[ \t]*(?P<role_ts>[A-Za-z_][\w.\- ]{0,60}?(?: \((?:->[ \t]*[\w.\- ]+|[\w ]+)\))?)"
    r"|(?P<role>[A-Za-z_][\w.\- ]{0,60}? \((?:->[ \t]*[\w.\- ]+|[\w ]+)\))):", re.M)


def parse_role(role: str) -> tuple[str, list[str], str | None]:
    """Splits a role such as ``Orchestrator (-> WebSurfer)`` or ``Orchestrator (thought)`` into
    (actor, recipients, note); any other text is the actor itself."""
    text = " ".join(str(role).split())
    m = ROLE_ARROW.match(text)
    if m is None:
        return text, [], None
    actor = m["actor"].strip()
    if m["to"]:
        return actor, [t.strip() for t in re.split(r"[,;]", m["to"]) if t.strip()], None
    return actor, [], m["note"].strip()


def _split_magentic(text: str) -> list[Segment]:
    blocks = _headers(text, _MAGENTIC_BLOCK, lambda m: Segment(
        m.start(), actor=_clean_actor(m["actor"]), data={"message_type": m["type"]} if m["type"] else {}))
    if len(blocks) >= 2:
        return blocks

    def build(m):
        actor, to, note = parse_role(m["role"] or m["role_ts"])
        data = {"note": note} if note else {}
        return Segment(m.start(), actor=_clean_actor(actor), recipients=[_clean_actor(t) for t in to],
                       kind="log" if note else "message", data=data)
    lines = _headers(text, _MAGENTIC_LINE, build)
    return lines if len(lines) >= len(blocks) else blocks


_APPWORLD = re.compile(
    r"^(?:(?P<verb>Response from|Reply from|Message to) (?P<agent>[\w .-]+?) Agent|(?P<exec>Code Execution Output))[ \t]*$",
    re.M)


def _split_appworld(text: str) -> list[Segment]:
    def build(m):
        if m["exec"]:
            return Segment(m.start(), actor=None, kind="tool_result", data={"header": "Code Execution Output"})
        agent = _clean_actor(m["agent"])
        if m["verb"] == "Message to":
            return Segment(m.start(), actor="Supervisor" if agent != "Supervisor" else None, recipients=[agent],
                           data={"header": m.group(0).strip()})
        recipients = ["Supervisor"] if m["verb"] == "Reply from" and agent != "Supervisor" else []
        return Segment(m.start(), actor=agent, recipients=recipients, data={"header": m.group(0).strip()})
    return _headers(text, _APPWORLD, build)


_HYPER = re.compile(
    r"^[ \t]*HyperAgent_\S* - INFO - (?P<who>[A-Za-z][\w\-> ]{0,80}?)(?:'s Response)?:", re.M)


def _split_hyperagent(text: str) -> list[Segment]:
    def build(m):
        who = m["who"].strip()
        recipients: list[str] = []
        if "->" in who:
            who, _, to = who.partition("->")
            recipients = [_clean_actor(to)]
        who = re.sub(r"^Inner-", "", who)
        who = re.sub(r"-Assistant$", "", who)
        return Segment(m.start(), actor=_clean_actor(who), recipients=[r for r in recipients if r])
    return _headers(text, _HYPER, build)


_OPENMANUS = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?) \| (?P<level>[A-Z]+)\s*\| (?P<src>[\w.]+:[\w<>]+:\d+) - "
    r"(?P<msg>[^\n]*)", re.M)
_MANUS_THOUGHT = re.compile(r"(?P<actor>[\w.-]+)'s thoughts:")
_MANUS_TOOLS = re.compile(r"(?P<actor>[\w.-]+) selected \d+ tools?")
_MANUS_RESULT = re.compile(r"Tool '(?P<tool>[^']+)' completed")


def _split_openmanus(text: str) -> list[Segment]:
    def build(m):
        msg = m["msg"]
        data = {"level": m["level"], "logger": m["src"]}
        ts = m["ts"]
        if (t := _MANUS_THOUGHT.search(msg)):
            return Segment(m.start(), actor=_clean_actor(t["actor"]), data=data, ts=ts)
        if (t := _MANUS_TOOLS.search(msg)):
            return Segment(m.start(), actor=_clean_actor(t["actor"]), kind="tool_call", data=data, ts=ts)
        if (t := _MANUS_RESULT.search(msg)):
            return Segment(m.start(), actor=None, kind="tool_result", data={**data, "tool": t["tool"]}, ts=ts)
        return Segment(m.start(), actor=None, kind="log", data=data, ts=ts)
    return _headers(text, _OPENMANUS, build)


#: style name -> splitter; the MAD mas_name values map onto these
SPLITTERS = {
    "chatdev": _split_chatdev,
    "metagpt": _split_metagpt,
    "ag2": _split_ag2,
    "magentic-one": _split_magentic,
    "appworld": _split_appworld,
    "hyperagent": _split_hyperagent,
    "openmanus": _split_openmanus,
}
_STYLE_OF_NAME = {"chatdev": "chatdev", "metagpt": "metagpt", "ag2": "ag2", "autogen": "ag2",
                  "magentic": "magentic-one", "magenticone": "magentic-one", "magneticone": "magentic-one",
                  "appworld": "appworld", "hyperagent": "hyperagent", "openmanus": "openmanus"}


def style_for(mas_name: Any) -> str | None:
    """Returns the log style of a MAD ``mas_name`` (``ChatDev`` -> chatdev, ``Magentic`` ->
    magentic-one, ...), None when unknown."""
    key = re.sub(r"[^a-z0-9]", "", str(mas_name or "").lower())
    for name, style in _STYLE_OF_NAME.items():
        if key.startswith(name):
            return style
    return None


def split_trajectory(text: str, mas_name: Any = None) -> tuple[str | None, list[Segment]]:
    """Returns (style, segments) covering ``text`` exactly: consecutive slices, the first one the
    text before the first turn (system) when there is any. Style None: one segment, all of it."""
    style = style_for(mas_name)
    segs: list[Segment] = []
    if style is not None:
        segs = [s for s in SPLITTERS[style](text) if s.actor or s.kind != "message"]
    if len([s for s in segs if s.actor]) < 1:
        best: tuple[int, str | None, list[Segment]] = (0, None, [])
        for name, fn in SPLITTERS.items():
            found = [s for s in fn(text) if s.actor or s.kind != "message"]
            n = len([s for s in found if s.actor])
            if n >= 2 and n > best[0]:
                best = (n, name, found)
        style, segs = best[1], best[2]
    if not segs:
        return None, [Segment(0, len(text), actor=None, kind="log")]
    segs.sort(key=lambda s: s.start)
    out: list[Segment] = []
    if segs[0].start > 0:
        out.append(Segment(0, actor=None, kind="log", data={"part": "preamble"}))
    out.extend(segs)
    for i, s in enumerate(out):
        s.end = out[i + 1].start if i + 1 < len(out) else len(text)
    return style, [s for s in out if s.end > s.start]


NUL_STANDIN = "\ufffd"


def storable_text(text: str) -> tuple[str, list[int]]:
    """Returns (text with each NUL character, which no database column holds, replaced by U+FFFD,
    the offsets of the NULs), so that the raw text can be given back exactly."""
    if "\x00" not in text:
        return text, []
    return text.replace("\x00", NUL_STANDIN), [i for i, c in enumerate(text) if c == "\x00"]


def trajectory_from_events(events: list[dict[str, Any]], nul_offsets: list[int] | None = None) -> str:
    """The raw trajectory text back from a MAD run's events (their contents joined; the NULs at
    `nul_offsets`, stored as U+FFFD, put back)."""
    text = "".join(e.get("content") or "" for e in events)
    if nul_offsets:
        chars = list(text)
        for i in nul_offsets:
            if 0 <= i < len(chars) and chars[i] == NUL_STANDIN:
                chars[i] = "\x00"
        text = "".join(chars)
    return text


# --------------------------------------------------------------------------- records -> runs

def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False) if isinstance(
        value, (dict, list)) else str(value)


def _id_part(value: Any) -> str:
    return re.sub(r"\s+", "_", str(value).strip()) if value is not None and str(value).strip() else "-"


def _run_id(prefix: str, parts: list[Any]) -> str:
    rid = "/".join([prefix] + [_id_part(p) for p in parts])
    if len(rid) > 300:
        digest = hashlib.sha256(rid.encode("utf-8")).hexdigest()[:16]
        rid = rid[:280] + "~" + digest
    return rid


def _ts(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        parse_ts(value)
        return value.replace(" ", "T", 1)
    except ValueError:
        return None


#: the styles whose runs are group chats: AG2's GroupChat (speakers post to the chat manager, which
#: relays to every member) and AutoGen AgentChat teams (Magentic-One's console blocks)
GROUP_CHAT_STYLES = ("ag2", "magentic-one")
_MANAGER = re.compile(r"chat[_ ]?manager|group[_ ]?chat", re.I)


def _is_group_post(s: Segment) -> bool:
    return not s.recipients or all(_MANAGER.search(r or "") for r in s.recipients)


def group_members(style: str | None, segs: list[Segment]) -> list[str]:
    """The members of the group chat a trajectory was recorded in (first appearance order), or []
    when it is none: the style is a group chat's and at least two speakers post to the chat (no
    recipient, or the chat manager). Messages to one named recipient stay addressed to it."""
    if style not in GROUP_CHAT_STYLES:
        return []
    posters = {s.actor for s in segs if s.actor and s.kind == "message" and _is_group_post(s)}
    if len(posters) < 2:
        return []
    members: list[str] = []
    for s in segs:
        for name in (s.actor, *s.recipients):
            if name and name != "system" and name not in members:
                members.append(name)
    return members


def _events_and_agents(text: str, mas_name: Any, llm: Any) -> tuple[str | None, list[dict], list[dict]]:
    style, segs = split_trajectory(text, mas_name)
    agents: dict[str, dict] = {}
    events = []
    for s in segs:  # the system's user speaks for the principal
        s.actor = PRINCIPAL if s.actor in USER_NAMES else s.actor
        s.recipients = [PRINCIPAL if r in USER_NAMES else r for r in s.recipients]
    members = group_members(style, segs)
    for seq, s in enumerate(segs):
        actor = s.actor or "system"
        for name in [s.actor, *s.recipients]:
            if name and name not in agents and name not in (PRINCIPAL, "system"):
                agents[name] = {"id": name, "principal": PRINCIPAL, "role": name,
                                "model": _text(llm), "harness": _text(mas_name)}
        recipients = [r for r in s.recipients if r and r != actor]
        data = {"style": style, "offset": s.start, **s.data}
        if members and s.actor and s.kind == "message" and _is_group_post(s):
            # a turn posted to the group chat reaches every member
            recipients = [m for m in members if m != actor]
            data["group_chat"] = True
        ev = {"seq": seq, "kind": s.kind if s.actor or s.kind != "message" else "log", "actor": actor,
              "recipients": recipients, "visibility": "shared" if recipients else "private",
              "content": text[s.start:s.end], "data": data}
        ts = _ts(s.ts)
        if ts:
            ev["ts"] = ts
        events.append(ev)
    return style, events, list(agents.values())


def _scenario(benchmark: Any, mas: Any) -> dict[str, Any]:
    bench = _text(benchmark) or "unknown"
    return {"id": f"mad/{bench}"[:300], "family": bench[:100], "title": bench,
            "description": f"A {_text(mas) or 'multi-agent system'} run on {bench} (MAST's MAD dataset)."}


def _principal() -> dict[str, Any]:
    return {"id": PRINCIPAL, "name": "The system's user", "kind": "person"}


def full_record_to_run(obj: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Returns (raw canonical run, None, None), or (None, field, message) when the record cannot be a run."""
    trace = obj.get("trace")
    warnings: list[str] = []
    if not isinstance(trace, dict):
        if isinstance(trace, str):
            trace = {"trajectory": trace}
        else:
            return None, "trace", "required: an object {key, index, trajectory}"
    text = trace.get("trajectory")
    if not isinstance(text, str) or not text.strip():
        return None, "trace.trajectory", "required: the trajectory text (a run needs events)"
    if obj.get("trace_id") is None and trace.get("key") is None and trace.get("index") is None:
        return None, "trace_id", "required: trace_id or trace.key (a run needs an id)"
    mas, llm = obj.get("mas_name"), obj.get("llm_name")
    run_id = _run_id("mad", [mas, llm, obj.get("trace_id"), trace.get("key", trace.get("index"))])
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    text, nuls = storable_text(text)
    if nuls:
        warnings.append(f"trace.trajectory: {len(nuls)} NUL character(s) stored as U+FFFD (offsets in "
                        "metadata.mad.nul_offsets; the MAD export puts them back)")
    style, events, agents = _events_and_agents(text, mas, llm)
    marks = obj.get("mast_annotation")
    audits: list[dict] = []
    audited_by: list[dict] = []
    annotated: list[str] = []
    unannotated: list[str] = []
    if marks is None:
        marks_ok: dict = {}
    elif not isinstance(marks, dict):
        warnings.append(f"mast_annotation: expected an object of mode code -> 0|1|null, got {type(marks).__name__}; "
                        "kept in metadata.mad.mast_annotation, no labels")
        marks_ok = {}
    else:
        marks_ok = marks
    for code, value in marks_ok.items():
        code = str(code).strip()
        if isinstance(value, bool):
            value = int(value)
        if value is None:
            unannotated.append(code)
            continue
        if value not in (0, 1):
            warnings.append(f"mast_annotation.{code}: expected 0, 1 or null, got {value!r}; taken as not annotated")
            unannotated.append(code)
            continue
        if code not in PUBLISHED_CODES:
            warnings.append(f"mast_annotation.{code}: not a mode of the published MAST taxonomy; kept in metadata")
            continue
        annotated.append(code)
        if value == 1:
            audits.append({"source": JUDGE_SOURCE, "level": "L2", "mode": code,
                           "metadata": {"taxonomy": PUBLISHED}})
    if annotated:
        audited_by.append({"source": JUDGE_SOURCE, "taxonomy": PUBLISHED})
    mad_meta = {"file": "full", "mas_name": mas, "llm_name": llm, "benchmark_name": obj.get("benchmark_name"),
                "trace_id": obj.get("trace_id"), "trace_key": trace.get("key"), "trace_index": trace.get("index"),
                "style": style, "mast_annotation": marks, "trajectory_sha256": digest}
    if nuls:
        mad_meta["nul_offsets"] = nuls
    extra_trace = {k: v for k, v in trace.items() if k not in ("key", "index", "trajectory")}
    if extra_trace:
        mad_meta["trace_extra"] = extra_trace
    metadata: dict[str, Any] = {"mad": mad_meta, "audited_by": audited_by}
    for k, v in obj.items():
        if k not in FULL_KEYS:
            metadata.setdefault("mad_extra", {})[k] = v
    if warnings:
        metadata["import_warnings"] = warnings
    return {"run_id": run_id, "scenario": _scenario(obj.get("benchmark_name"), mas), "status": "completed",
            "principals": [_principal()], "agents": agents, "events": events, "audits": audits,
            "metadata": metadata}, None, None


_MODE_TEXT = re.compile(r"^\s*(?P<code>\d+(?:\.\d+)?)\s*[.:)-]?\s*(?P<name>[^\n]*)(?:\n(?P<definition>.*))?\Z", re.S)
_ANNOTATOR = re.compile(r"^annotator[_ ]?(?P<n>\d+)$", re.I)


def human_record_to_run(obj: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Returns (raw canonical run, None, None), or (None, field, message) when the record cannot be a run."""
    trace = obj.get("trace")
    text = trace.get("trajectory") if isinstance(trace, dict) else trace
    if not isinstance(text, str) or not text.strip():
        return None, "trace", "required: the trace text (a run needs events)"
    if obj.get("trace_id") is None:
        return None, "trace_id", "required (a run needs an id)"
    mas, rnd = obj.get("mas_name"), obj.get("round")
    tax_key = taxonomy_for_round(rnd)
    codes = TAXONOMY_CODES[tax_key]
    warnings: list[str] = []
    if rnd is None:
        warnings.append("round: missing; labels taken under the published MAST taxonomy (mast)")
    run_id = _run_id("mad-human", [rnd, mas, obj.get("benchmark_name"), obj.get("trace_id")])
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    text, nuls = storable_text(text)
    if nuls:
        warnings.append(f"trace: {len(nuls)} NUL character(s) stored as U+FFFD (offsets in metadata.mad.nul_offsets)")
    style, events, agents = _events_and_agents(text, mas, obj.get("llm_name"))
    anns = obj.get("annotations")
    if not isinstance(anns, list):
        warnings.append(f"annotations: expected a list, got {type(anns).__name__}; no labels")
        anns = []
    modes: dict[str, dict[str, str]] = {}
    marks: dict[str, list[str]] = {}
    unmapped: list[str] = []
    for i, a in enumerate(anns):
        if not isinstance(a, dict):
            warnings.append(f"annotations[{i}]: expected an object, got {type(a).__name__}; skipped")
            continue
        fm = a.get("failure mode", a.get("failure_mode"))
        m = _MODE_TEXT.match(str(fm)) if fm is not None else None
        if m is None:
            warnings.append(f"annotations[{i}].failure mode: no mode code at the start of {str(fm)[:60]!r}; skipped")
            continue
        code = m["code"]
        modes[code] = {"name": m["name"].strip(), "definition": (m["definition"] or "").strip()}
        known = code in codes
        if not known:
            unmapped.append(code)
            warnings.append(f"annotations[{i}].failure mode: {code} is not a mode of {tax_key} (round {rnd!r}); "
                            "kept in metadata.mad, not labelled")
        for key, value in a.items():
            am = _ANNOTATOR.match(str(key))
            if am is None:
                continue
            name = f"{HUMAN_PREFIX}annotator_{am['n']}"
            marks.setdefault(name, [])
            if value is True or value in (1, "1", "true", "True", "yes"):
                if known:
                    marks[name].append(code)
            elif value not in (False, 0, None, "0", "false", "False", "no", ""):
                warnings.append(f"annotations[{i}].{key}: expected true or false, got {value!r}; taken as false")
    audits = []
    audited_by = []
    for name in sorted(marks):
        source = name.removeprefix(HUMAN_PREFIX)
        who = {"annotator_kind": "human", "annotator": name, "taxonomy": tax_key}
        audited_by.append({"source": f"mad-{source}", **who})
        for code in dict.fromkeys(marks[name]):
            audits.append({"source": f"mad-{source}", "mode": code, "metadata": dict(who)})
    mad_meta = {"file": "human", "round": rnd, "taxonomy": tax_key, "mas_name": mas,
                "benchmark_name": obj.get("benchmark_name"), "trace_id": obj.get("trace_id"), "style": style,
                "modes": modes, "annotations": anns, "unmapped_codes": unmapped, "trajectory_sha256": digest}
    if nuls:
        mad_meta["nul_offsets"] = nuls
    metadata: dict[str, Any] = {"mad": mad_meta, "audited_by": audited_by}
    for k, v in obj.items():
        if k not in HUMAN_KEYS:
            metadata.setdefault("mad_extra", {})[k] = v
    if isinstance(trace, dict):
        metadata["mad"]["trace_extra"] = {k: v for k, v in trace.items() if k != "trajectory"}
    if warnings:
        metadata["import_warnings"] = warnings
    return {"run_id": run_id, "scenario": _scenario(obj.get("benchmark_name"), mas), "status": "completed",
            "principals": [_principal()], "agents": agents, "events": events, "audits": audits,
            "metadata": metadata}, None, None


def record_to_item(obj: Any, location: Location) -> ImportItem:
    """One MAD record (full or human-labelled) -> an ImportItem (run, or the error rejecting it)."""
    kind = record_kind(obj)
    if kind is None:
        return error_item(location, "not a MAD record: expected {mas_name, trace: {trajectory}, mast_annotation} "
                                    "or {round, trace, annotations}")
    run, fld, message = (full_record_to_run if kind == "mad-full" else human_record_to_run)(obj)
    if run is None:
        return error_item(location, message, field=fld)
    return item_from_raw(run, location)


# --------------------------------------------------------------------------- files

def iter_mad_file(path: str | os.PathLike, display: str | None = None) -> Iterator[ImportItem]:
    """Yield one item per record of a MAD file: a JSON array (streamed), JSON Lines or one object."""
    name = display if display is not None else os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(3)
        if head != BOM:
            f.seek(0)
        first = b""
        while True:
            ch = f.read(1)
            if not ch or not ch.isspace():
                first = ch
                break
        f.seek(f.tell() - len(first))
        if first == b"[":
            # streamed within the input limits (not ijson: its C backend segfaults on long integers)
            for el in safejson.iter_array(f):
                loc = Location(name, el.line, pointer=f"[{el.index}]")
                if el.error is not None:
                    rest = "; the rest of the file was not read" if el.fatal else ""
                    yield error_item(loc, f"invalid JSON ({el.error}){rest}")
                    if el.fatal:
                        return
                    continue
                yield record_to_item(el.value, loc)
            return
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield error_item(Location(name), f"not UTF-8 text: {exc.reason}")
        return
    try:
        obj = safejson.loads(text)
    except json.JSONDecodeError:
        obj = None
    if obj is not None:
        if isinstance(obj, dict) and isinstance(obj.get("data"), list):
            for i, rec in enumerate(obj["data"]):
                yield record_to_item(rec, Location(name, pointer=f"data[{i}]"))
        else:
            yield record_to_item(obj, Location(name))
        return
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = safejson.loads(line)
        except json.JSONDecodeError as exc:
            yield error_item(Location(name, lineno), f"not valid JSON: {exc.msg} (column {exc.colno})")
            continue
        yield record_to_item(rec, Location(name, lineno))


class MadReader(Reader):
    """MAST's MAD dataset files (full and human-labelled)."""

    name = "mad"
    description = "MAST's MAD dataset: MAD_full_dataset.json and MAD_human_labelled_dataset.json"

    def sniff(self, path: Path) -> Sniff:
        if not peek.is_json_like(path):
            return Sniff(0.0, "not JSON")
        keys = set(peek.record_keys(path))
        if looks_like_mad_keys(keys):
            return Sniff(0.95, "records with MAD's keys (mas_name, trace, mast_annotation or annotations)")
        return Sniff(0.0, "no MAD keys (mast_annotation, or round + annotations)")

    def read(self, path: Path, shown: str) -> Iterator[ImportItem]:
        return iter_mad_file(path, shown)
