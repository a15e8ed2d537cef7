"""Run and stop the processes an experiment starts, by PID only."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from common.errors import EmulationError


def run(argv: list[str], timeout_s: float = 30.0, check: bool = True) -> subprocess.CompletedProcess:
    """Run a short command with a timeout; raise ``EmulationError`` with its output on failure."""
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise EmulationError(f"{' '.join(argv)} did not finish within {timeout_s:g} s") from None
    if check and cp.returncode != 0:
        raise EmulationError(f"{' '.join(argv)} exited {cp.returncode}: {(cp.stderr or cp.stdout).strip()}")
    return cp


def stop_process(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """Stop a process we started and its process group: SIGTERM, then SIGKILL after ``grace_s``."""
    if proc.poll() is not None:
        return
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def pid_alive(pid: int) -> bool:
    """True when a process with this PID exists (and is not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


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
