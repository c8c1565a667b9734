"""The capture sidecar: what never crosses the wire (principals, private state), per agent.

Given to `a2annotate record --sidecar FILE` or to POST /v1/traces (`?sidecar=` is not accepted; the
server reads the file named by the CAPTURE_SIDECAR setting), as YAML or JSON::

    scenario: {id: travel/lisbon, family: commerce, alignment: cooperative}   # optional
    agents:
      planner: {principal: dana, objective: "Plan a trip under $900", constraints: ["no red-eye"],
                model: model-a, harness: my-harness, role: planner, private_state: {budget_usd: 900}}
    principals:                                                                # optional details
      dana: {name: "Dana (traveller)", kind: person}

`apply_sidecar(run, sidecar)` fills a raw canonical run (before normalisation): agents named in the
sidecar get principal/model/harness/role/private_state (the wire's values are kept where the sidecar
says nothing), each principal named becomes a principal with the agent's objective and constraints,
and the scenario replaces the ``unknown`` placeholder. Pure; no database.
"""
from __future__ import annotations

import json
import os
from typing import Any

AGENT_FIELDS = ("principal", "model", "harness", "role", "private_state")


class SidecarError(ValueError):
    pass


def load_sidecar(path: str | os.PathLike | None) -> dict[str, Any]:
    """Read and check a sidecar file (YAML or JSON); {} for None. Raises SidecarError naming the field."""
    if not path:
        return {}
    import yaml

    try:
        if os.fspath(path).endswith(".json"):
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        else:
            from app.ingest.safety import safeyaml  # aliases, nesting, size and values bounded

            doc = safeyaml.load_file(path)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise SidecarError(f"{path}: cannot read the sidecar: {exc}") from None
    return check_sidecar(doc, str(path))


def check_sidecar(doc: Any, where: str = "sidecar") -> dict[str, Any]:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise SidecarError(f"{where}: a sidecar must be a mapping with 'agents'")
    unknown = set(doc) - {"agents", "principals", "scenario"}
    if unknown:
        raise SidecarError(f"{where}: unknown key {sorted(unknown)[0]!r} (expected agents, principals, scenario)")
    agents = doc.get("agents") or {}
    if isinstance(agents, list):  # [{id: ..., ...}]
        agents = {a.get("id"): {k: v for k, v in a.items() if k != "id"} for a in agents if isinstance(a, dict)}
    if not isinstance(agents, dict):
        raise SidecarError(f"{where}: field agents: must be a mapping agent name -> fields")
    for name, spec in agents.items():
        if not isinstance(name, str) or not isinstance(spec, dict):
            raise SidecarError(f"{where}: field agents.{name}: must be a mapping")
        bad = set(spec) - set(AGENT_FIELDS) - {"objective", "constraints"}
        if bad:
            raise SidecarError(f"{where}: field agents.{name}.{sorted(bad)[0]}: unknown (expected "
                               f"{', '.join(AGENT_FIELDS + ('objective', 'constraints'))})")
        if "constraints" in spec and not (isinstance(spec["constraints"], list)
                                          and all(isinstance(c, str) for c in spec["constraints"])):
            raise SidecarError(f"{where}: field agents.{name}.constraints: must be a list of strings")
        if "private_state" in spec and not isinstance(spec["private_state"], dict):
            raise SidecarError(f"{where}: field agents.{name}.private_state: must be a mapping")
    principals = doc.get("principals") or {}
    if not isinstance(principals, dict):
        raise SidecarError(f"{where}: field principals: must be a mapping principal id -> fields")
    scenario = doc.get("scenario")
    if scenario is not None and not (isinstance(scenario, dict) and isinstance(scenario.get("id"), str)
                                     and isinstance(scenario.get("family"), str)):
        raise SidecarError(f"{where}: field scenario: needs 'id' and 'family' strings")
    return {"agents": agents, "principals": principals, **({"scenario": scenario} if scenario else {})}


def apply_sidecar(run: dict[str, Any], sidecar: dict[str, Any] | None) -> dict[str, Any]:
    """Fill `run` (a raw canonical run) from `sidecar`; returns the run (changed in place)."""
    if not sidecar:
        return run
    agents = run.setdefault("agents", [])
    by_id = {a.get("id"): a for a in agents if isinstance(a, dict)}
    principals = run.setdefault("principals", [])
    p_by_id = {p.get("id"): p for p in principals if isinstance(p, dict)}
    for name, spec in (sidecar.get("agents") or {}).items():
        agent = by_id.get(name)
        if agent is None:
            continue  # an agent that took no part in this run
        for k in AGENT_FIELDS:
            if spec.get(k) is not None:
                agent[k] = spec[k]
        pid = spec.get("principal")
        if pid:
            p = p_by_id.get(pid)
            if p is None:
                details = (sidecar.get("principals") or {}).get(pid) or {}
                p = {"id": pid, **{k: details[k] for k in ("name", "kind") if details.get(k) is not None}}
                principals.append(p)
                p_by_id[pid] = p
            if spec.get("objective") and not p.get("objective"):
                p["objective"] = spec["objective"]
            if spec.get("constraints"):
                p["constraints"] = list(dict.fromkeys((p.get("constraints") or []) + spec["constraints"]))
    if sidecar.get("scenario") and (run.get("scenario") or {}).get("id") in (None, "unknown"):
        run["scenario"] = dict(sidecar["scenario"])
    return run
