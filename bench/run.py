"""`make bench`: run every benchmark and write bench/RESULTS.md with the machine noted."""
from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from pathlib import Path

HERE = Path(__file__).parent


def machine() -> str:
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 1024 / 1024:.0f} GiB RAM"
    except OSError:
        pass
    return (f"{platform.node()} · {platform.machine()} · {os.cpu_count()} cores · {mem} · "
            f"Python {platform.python_version()} · {platform.platform()}")


def main() -> None:
    quick = "--quick" in sys.argv
    from bench import bench_agreement, bench_import, bench_run_page

    sections = [("Import", bench_import.main), ("Agreement", bench_agreement.main),
                ("Run page", bench_run_page.main)]
    from bench import bench_detectors; sections.append(("Detectors", bench_detectors.main))  # noqa: E702, I001
    out = ["# Benchmark results", "",
           f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on: {machine()}.", "",
           "Machines here are shared and noisy: read the ratio column (against a baseline measured in the "
           "same run), not the absolute seconds.", ""]
    for title, fn in sections:
        print(f"running {title} ...", flush=True)
        rows = fn(quick=quick)
        out += [f"## {title}", "", "| what | time / amount | ratio to baseline |", "|---|---|---|", *rows, ""]
    (HERE / "RESULTS.md").write_text("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
