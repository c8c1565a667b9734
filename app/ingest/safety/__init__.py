"""The parsing safety layer: input limits (limits), bounded JSON (safejson) and YAML (safeyaml)."""
