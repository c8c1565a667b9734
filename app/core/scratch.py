"""Temporary folders for uploads and unpacked archives: one folder per process under
UPLOAD_DIR (default `<system temp>/a2annotate-uploads`), so that what a crashed process left
behind can be told apart from what a running one is using, and removed (`clean_upload_dirs`,
run when the server starts)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from app.core.config import get_settings


def upload_root() -> Path:
    """The folder holding each server process's upload folder (UPLOAD_DIR, default
    `<system temp>/a2annotate-uploads`)."""
    root = get_settings().upload_dir or Path(tempfile.gettempdir()) / "a2annotate-uploads"
    root.mkdir(parents=True, exist_ok=True)
    return root


def process_dir() -> Path:
    """This process's folder under `upload_root()` (named by its process id)."""
    d = upload_root() / f"pid-{os.getpid()}"
    d.mkdir(exist_ok=True)
    return d


#: the folder (under UPLOAD_DIR) holding uploads handed to import jobs, one folder per job: it
#: outlives the web process that received the upload, so `clean_upload_dirs` keeps it (a worker
#: removes a job's folder when the job ends). Workers on other machines need UPLOAD_DIR on storage
#: they share with the app processes.
JOBS_FOLDER = "jobs"


def job_dir(job_id: str) -> Path:
    """The folder of one job's files (created)."""
    d = upload_root() / JOBS_FOLDER / job_id
    d.mkdir(parents=True, exist_ok=True)
    return d


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_upload_dirs() -> list[str]:
    """Removes the upload folders of processes that no longer run (left by a crash, e.g. kill -9
    mid-upload); returns the names removed."""
    removed = []
    root = upload_root()
    for entry in root.iterdir():
        name = entry.name
        if name == JOBS_FOLDER:
            continue
        pid = int(name[4:]) if name.startswith("pid-") and name[4:].isascii() and name[4:].isdigit() else None
        if pid is not None and (pid == os.getpid() or _alive(pid)):
            continue
        shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
        removed.append(name)
    return removed


