"""Run and stop the processes an experiment starts, by PID only."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from common.errors import EmulationError


def run(argv: list[str], timeout_s: float = 30.0, check: bool = True, input_text: str | None = None
        ) -> subprocess.CompletedProcess:
    """Run a short command with a timeout (``input_text`` on its standard input); raise
    ``EmulationError`` with its output on failure."""
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, input=input_text)
    except subprocess.TimeoutExpired:
        raise EmulationError(f"{' '.join(argv)} did not finish within {timeout_s:g} s") from None
    if check and cp.returncode != 0:
        raise EmulationError(f"{' '.join(argv)} exited {cp.returncode}: {(cp.stderr or cp.stdout).strip()}")
    return cp


def run_in_session(argv: list[str], timeout_s: float = 30.0) -> subprocess.CompletedProcess:
    """A short command in its own session (a terminal's Ctrl-C does not reach it), its output
    captured; its exit status is the caller's to judge.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout_s``.
    """
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, start_new_session=True)


def stop_process(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """Stop a process we started and its process group: SIGTERM, then SIGKILL after ``grace_s``."""
    if proc.poll() is not None:
        return
    signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        signal_group(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to a process, or to its whole group when it leads one (a session leader such
    as a node shell: its children too); a process already gone is not an error."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def process_start_time(pid: int) -> int | None:
    """Start time of a live process in clock ticks since boot (``/proc/<pid>/stat`` field 22), or
    None when it does not exist or is a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(") ", 1)[1].split()
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else int(fields[19])


def pid_alive(pid: int) -> bool:
    """True when a process with this PID exists (and is not a zombie)."""
    return process_start_time(pid) is not None


def wait_for(predicate, timeout_s: float, interval_s: float = 0.05, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value; raise ``TimeoutError`` naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)
