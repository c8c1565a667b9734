"""`make bench`: run every benchmark and write bench/RESULTS.md with the machine noted.

    python -m bench.run            # 2,500-run sizes (growth rows: 250 -> 2,500), medians of 3
    BENCH_LARGE=1 python -m bench.run   # also 25,000 runs (growth rows: 2,500 -> 25,000); slow
    python -m bench.run --quick    # tiny sizes, one repetition (the suite's smoke test runs this)

The "## Scale" section (`make bench-scale`, bench/bench_scale.py) of the RESULTS.md it rewrites is
kept as it is, before the notes.

Environment: BENCH_REPEAT (repetitions, default 3), BENCH_DIR (corpora and databases, default a
temp folder), A2A_TEST_PG_ADMIN_URL (PostgreSQL; rows say "not measured" when it is unreachable).
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from pathlib import Path

HERE = Path(__file__).parent

SECTIONS = (
    ("Import", "bench_import"),
    ("Coefficients", "bench_coefficients"),
    ("Agreement", "bench_agreement"),
    ("Exports", "bench_export"),
    ("Reports", "bench_reports"),
    ("Run page", "bench_run_page"),
    ("Detectors", "bench_detectors"),
    ("Judges", "bench_judges"),
    ("Server", "bench_server"),
    ("Live capture under attack", "bench_capture"),
)


def machine() -> str:
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 1024 / 1024:.0f} GiB RAM"
    except OSError:
        pass
    try:
        load = "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = ""
    return (f"{platform.node()} · {platform.machine()} · {os.cpu_count()} cores · {mem} · "
            f"Python {platform.python_version()} · {platform.platform()} · {load} at the start")


#: sections of RESULTS.md written by other benchmarks (`make bench-scale`): kept when it is rewritten
KEPT = ("## Scale",)


def kept_sections(path: Path | None) -> str:
    """The KEPT sections of the RESULTS.md at ``path`` (each up to the next "## " heading), as they are."""
    if path is None or not path.exists():
        return ""
    lines = path.read_text().splitlines()
    out: list[str] = []
    for title in KEPT:
        if title in lines:
            i = lines.index(title)
            j = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
            out += lines[i:j]
    return "\n".join(out).strip()


def run(quick: bool = False, out_path: Path | None = None, only: list[str] | None = None) -> str:
    """Run the sections (all, or those named in ``only``); write and return the markdown."""
    import importlib

    from bench.common import HEADER

    repeat = os.environ.get("BENCH_REPEAT", "1" if quick else "3")
    os.environ["BENCH_REPEAT"] = repeat
    out = ["# Benchmark results", "",
           f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on: {machine()}.", "",
           f"Every time is the median of {repeat} runs; every ratio is against a baseline measured in the same "
           "run on the same data. The machine is shared and noisy: read the ratio column, not the absolute "
           "seconds." + (" **Quick mode: tiny sizes, not meaningful.**" if quick else ""), ""]
    for title, module in SECTIONS:
        if only and module not in only and title.lower() not in only:
            continue
        print(f"running {title} ...", file=sys.stderr, flush=True)
        mod = importlib.import_module(f"bench.{module}")
        rows = mod.main(quick=quick)
        out += [f"## {title}", "", *getattr(mod, "HEADER", HEADER), *rows, ""]
    kept = kept_sections(out_path)
    if kept:
        out += [kept, ""]
    notes = HERE / "NOTES.md"
    if notes.exists() and not quick:
        out += [notes.read_text().strip(), ""]
    text = "\n".join(out)
    if out_path is not None:
        out_path.write_text(text)
    return text


def main() -> None:
    quick = "--quick" in sys.argv
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    text = run(quick, None if quick else HERE / "RESULTS.md", only or None)
    print(text)


if __name__ == "__main__":
    main()
