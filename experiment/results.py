"""A run's results directory: its name, its JSON files, and its status."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from common.errors import PlacementError
from common.jsonfile import write_json_atomic
from common.specs import safe_name

RUN_STATUSES = ("running", "complete", "incomplete", "interrupted", "failed")


def make_run_dir(name: str, base: str) -> str:
    """Create ``<base>/<timestamp>-<name>/`` (a numbered variant if it exists) and return its path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = os.path.join(base, f"{stamp}-{safe_name(name)}")
    n = 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(base, f"{stamp}-{safe_name(name)}-{n}")
    os.makedirs(path)
    return path


def write_json(path: str, obj) -> None:
    """Write JSON with a stable layout, atomically (:func:`common.jsonfile.write_json_atomic`)."""
    write_json_atomic(path, obj, default=str)


def write_status(run_dir: str, status: str, detail: str | None = None) -> None:
    """``status.json`` of a run directory: one of :data:`RUN_STATUSES`, when, and why (for
    ``incomplete`` and ``failed``). A directory whose status is still ``running`` belongs to a run
    that is in progress or was killed."""
    assert status in RUN_STATUSES, status
    write_json(os.path.join(run_dir, "status.json"), {"status": status, "detail": detail, "time": time.time()})


class PolicyIncomplete(PlacementError):
    """Some policies could not place every job; the others' results were written."""


def incomplete(run_dir: str, failed: Sequence[str], total: int, what: str = "policies") -> PolicyIncomplete:
    """The error of a run in which ``failed`` (labels, the first three named) of ``total`` ``what``
    could not place every job."""
    named = ", ".join(failed[:3]) + (", ..." if len(failed) > 3 else "")
    return PolicyIncomplete(f"{len(failed)} of {total} {what} could not place every job ({named}); results of the "
                            f"others are in {run_dir}")


def finish(run_dir: str, failed: Sequence[str], total: int, what: str = "policies") -> None:
    """Mark the run ``complete``, or ``incomplete`` and raise :func:`incomplete`'s error when some of
    its ``total`` ``what`` (``failed``) could not place every job."""
    if failed:
        err = incomplete(run_dir, failed, total, what)
        write_status(run_dir, "incomplete", str(err))
        raise err
    write_status(run_dir, "complete")
