"""A run's results directory: its name, its JSON files, and its status."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence

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


def _invoker() -> tuple[int, int] | None:
    """The uid and gid of the user who ran ``sudo``, when this process runs as root under it."""
    if os.geteuid() != 0:
        return None
    try:
        uid, gid = int(os.environ["SUDO_UID"]), int(os.environ["SUDO_GID"])
    except (KeyError, ValueError):
        return None
    return (uid, gid) if uid != 0 else None


@contextlib.contextmanager
def handed_to_invoker(base: str) -> Iterator[None]:
    """Under ``sudo``, give what the block creates in the results directory ``base`` (and the
    directories it creates on the way to ``base``) to the user who ran ``sudo``, also when the block
    fails; only new entries are touched. Elsewhere a no-op."""
    owner = _invoker()
    if owner is None:
        yield
        return
    base = os.path.abspath(base)
    if os.path.isdir(base):
        before = set(os.listdir(base))
        new = None
    else:  # the topmost directory the block will create on the way to base
        new = base
        while not os.path.exists(os.path.dirname(new)):
            new = os.path.dirname(new)
    try:
        yield
    finally:
        if new is not None:
            tops = [new] if os.path.exists(new) else []
        else:
            tops = [os.path.join(base, e) for e in sorted(set(os.listdir(base)) - before)]
        for top in tops:
            _chown_tree(top, *owner)


def _chown_tree(top: str, uid: int, gid: int) -> None:
    """``chown -R`` without following symbolic links; a file that vanished meanwhile is skipped."""
    paths = [top]
    if os.path.isdir(top) and not os.path.islink(top):
        for root, dirs, files in os.walk(top):
            paths += [os.path.join(root, n) for n in dirs + files]
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.chown(path, uid, gid, follow_symlinks=False)
