"""Exports are streamed: a 20,000-event run goes out chunk by chunk, never whole in memory."""
from __future__ import annotations

import tracemalloc

from sqlmodel import Session

from app.demo.generator import generate_long_run
from app.exports.service import EVENT_CHUNK_SIZE, ExportOptions, export_stream
from app.ingest.loader import store_run

N_EVENTS = 20_000


def test_a_20k_event_export_is_streamed(engine):
    run = generate_long_run(N_EVENTS, seed=1).run
    with Session(engine) as s:
        store_run(s, run)
        s.commit()
    n = len(run["events"])
    assert n >= N_EVENTS

    # CSV: Python's peak memory while writing the whole file stays a fraction of the file
    opts = ExportOptions(chunk_size=500)
    tracemalloc.start()
    try:
        size = blocks = 0
        for block in export_stream(engine, "events", "csv", opts):
            size += len(block)
            blocks += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert opts.counts["events"] == n
    assert size > 3_000_000, size  # several MB of CSV
    assert blocks == 1 + -(-n // 500)  # the header, then one block per chunk of 500 rows
    # generous bound: the rows as Python objects take ~10x their CSV size, so a whole-file build
    # would exceed the output size many times over
    assert peak < size / 2, (peak, size)

    # Parquet (default chunk size for events): the first row group is sent after reading one chunk
    opts = ExportOptions()
    stream = export_stream(engine, "events", "parquet", opts)
    first = next(stream)
    assert first[:4] == b"PAR1" and len(first) > 1000
    assert opts.counts["events"] == EVENT_CHUNK_SIZE  # only the first chunk has been read so far
    rest = list(stream)
    assert opts.counts["events"] == n
    assert len(rest) == -(-n // EVENT_CHUNK_SIZE)  # one block per remaining row group + the footer
    assert rest[-1][-4:] == b"PAR1"
