"""YAML (run.yaml, scenario.yaml of a run directory) within the input limits.

`yaml.safe_load` raises RecursionError on deep nesting and expands aliases without bound (nine
aliases of nine aliases, eight levels deep, make 2 GB of JSON from 300 bytes). `load` refuses
aliases, nesting deeper than MAX_JSON_DEPTH and inputs longer than MAX_RECORD_BYTES, raising
`yaml.YAMLError` with the reason like any other malformed YAML."""
from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent

from app.ingest.safety.limits import InputLimits, input_limits


class YAMLLimitError(yaml.YAMLError):
    pass


def load(text: str, limits: InputLimits | None = None) -> Any:
    """`yaml.safe_load` of `text` within the limits (see the module docstring)."""
    lim = limits or input_limits()
    if len(text) > lim.max_record_bytes:
        raise YAMLLimitError(f"longer than {lim.max_record_bytes} bytes (limit MAX_RECORD_BYTES)")

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            if self.check_event(AliasEvent):
                mark = self.peek_event().start_mark
                raise YAMLLimitError(f"aliases (*name) are not accepted (line {mark.line + 1})")
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
