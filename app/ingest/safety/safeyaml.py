"""YAML (run.yaml, scenario.yaml of a run directory) within the input limits.

`yaml.safe_load` raises RecursionError on deep nesting and expands aliases without bound (nine
aliases of nine aliases, eight levels deep, make 2 GB of JSON from 300 bytes). `load` refuses
aliases, nesting deeper than MAX_JSON_DEPTH and inputs longer than MAX_RECORD_BYTES, raising
`yaml.YAMLError` with the reason like any other malformed YAML.

`load_file` reads a configuration file (an import profile, a tree mapping, a sidecar) within
tighter bounds: at most `max_bytes` are read (a longer file is refused before it is parsed) and
at most `max_nodes` values are built (PyYAML builds about 20,000 a second here; two million keys
took 92 s and 3.7 GB), each breach a `YAMLLimitError` naming the file and line."""
from __future__ import annotations

import os
from typing import Any

import yaml
from yaml.events import AliasEvent

from app.ingest.safety.limits import InputLimits, input_limits

#: largest configuration file read by `load_file` (built-in profiles are 1-4 KB)
MAX_CONFIG_BYTES = 256 * 1024
#: most values (mappings, sequences, scalars) of a configuration file read by `load_file`
MAX_CONFIG_NODES = 20_000


class YAMLLimitError(yaml.YAMLError):
    pass


def load(text: str, limits: InputLimits | None = None, *, max_nodes: int | None = None) -> Any:
    """`yaml.safe_load` of `text` within the limits (see the module docstring); `max_nodes`, when
    given, bounds the number of values built."""
    lim = limits or input_limits()
    if len(text) > lim.max_record_bytes:
        raise YAMLLimitError(f"longer than {lim.max_record_bytes} bytes (limit MAX_RECORD_BYTES)")

    class Loader(yaml.SafeLoader):
        depth = 0
        nodes = 0

        def compose_node(self, parent, index):
            if self.check_event(AliasEvent):
                mark = self.peek_event().start_mark
                raise YAMLLimitError(f"aliases (*name) are not accepted (line {mark.line + 1})")
            self.nodes += 1
            if max_nodes is not None and self.nodes > max_nodes:
                mark = self.peek_event().start_mark
                raise YAMLLimitError(f"more than {max_nodes} values at line {mark.line + 1}")
            self.depth += 1
            try:
                if self.depth > lim.max_json_depth:
                    mark = self.peek_event().start_mark
                    raise YAMLLimitError(f"nested deeper than {lim.max_json_depth} levels at line {mark.line + 1} "
                                         "(limit MAX_JSON_DEPTH)")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_file(path: str | os.PathLike, limits: InputLimits | None = None, *, max_bytes: int = MAX_CONFIG_BYTES,
              max_nodes: int | None = MAX_CONFIG_NODES) -> Any:
    """A configuration file's YAML (or JSON) within the limits of `load` plus `max_bytes` and
    `max_nodes`. Raises OSError (FileNotFoundError for a missing file), UnicodeDecodeError, or
    `yaml.YAMLError` (a `YAMLLimitError` for a breached limit) whose message names the line."""
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise YAMLLimitError(f"the file is longer than {max_bytes} bytes")
    text = data.decode("utf-8")
    return load(text.removeprefix("\ufeff"), limits, max_nodes=max_nodes)
