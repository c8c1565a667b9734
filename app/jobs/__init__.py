"""Background jobs: heavy work (REST imports, exports, detector runs, ...) runs in worker
processes, never inside a web request.

* The **queue** is huey's (`app.jobs.queue`): a SQLite file for one machine (the default, no
  server needed), Redis for workers on several machines, or ``immediate`` (tests).
* The **state** of each job lives in the database (`app.jobs.models.Job`), where every app
  process and worker sees it: queued, running, done, failed or cancelled, with progress, result
  and error.
* A **handler** per kind (`app.jobs.handlers`) does the work through a `JobContext` that reports
  progress, is told of a cancel, and stops the job the moment its CPU or wall-clock budget is
  spent (`JOB_CPU_SECONDS`, `JOB_WALL_SECONDS`).
* A job whose worker died (kill -9, a lost machine) is noticed by its stale heartbeat and
  started again, or failed once out of retries (`app.jobs.service.reap_stale`).
"""
