"""Live capture: runs that arrive while they happen (POST /v1/traces, the A2A recording proxy).

Raw records (spans, wire envelopes) are kept as they came (`capture_record`), so a run can be
rebuilt from everything received so far through the one importer of its format and stored through
the one loader; `live_run` says which runs are still recording. See app.capture.service.
"""
