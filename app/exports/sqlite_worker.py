"""A short-lived reader process for SQLite exports: runs one SELECT with the ADBC SQLite driver
(rows straight into Arrow, in C) and writes the result to stdout as an Arrow IPC stream.

Why a separate process: ``adbc-driver-sqlite`` links its own copy of the SQLite library.  POSIX
file locks belong to the process, and each SQLite library tracks only its own: when one copy
closes its file or drops a lock, the locks the other copy holds on the same file go with it (the
"disk I/O error" an in-process ADBC reader caused).  In its own process the driver's locks are
ordinary, correct SQLite reader locks, and the app's ``sqlite3`` connections never share them.

The script imports nothing of the app and no pyarrow (only the driver manager and nanoarrow, a
few milliseconds), so the process starts quickly.  It is run by path::

    python sqlite_worker.py <database file> <rows per batch>   (the SQL on stdin)

The statement runs in one read transaction (a WAL snapshot: a writer holding a transaction
elsewhere neither blocks it nor shows up in it).  The pipe's back-pressure keeps memory flat: the
process stops at the next batch until the exporter has read the last one.  Errors go to stderr
with exit status 1.
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import adbc_driver_manager
    import adbc_driver_sqlite
    import nanoarrow.ipc

    path, batch_rows = argv[0], argv[1]
    sql = sys.stdin.read()
    uri = "file:" + path.replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    db = adbc_driver_sqlite.connect(uri)
    conn = adbc_driver_manager.AdbcConnection(db)
    stmt = adbc_driver_manager.AdbcStatement(conn)
    try:
        stmt.set_options(**{adbc_driver_sqlite.StatementOptions.BATCH_ROWS.value: batch_rows})
        stmt.set_sql_query(sql)
        handle, _ = stmt.execute_query()
        out = nanoarrow.ipc.StreamWriter.from_writable(sys.stdout.buffer)
        out.write_stream(handle)
        out.close()
        sys.stdout.buffer.flush()
    finally:
        stmt.close()
        conn.close()
        db.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # the exporter stopped reading (a client went away): nothing to report
        sys.exit(0)
    except Exception as exc:  # noqa: BLE001
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
