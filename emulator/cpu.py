"""CPU utilisation sampling while an experiment runs.

On a 2-core machine the emulator itself can become the bottleneck in two ways, both sampled
every ``interval_s`` in a background thread:

* the whole machine (``/proc/stat``): workers, shapers and switches together use every core;
* the switch datapath's busiest thread: with the userspace datapath one ``ovs-vswitchd``
  thread forwards every packet of every switch, so it can saturate one core while the machine
  as a whole looks half idle (``/proc/<pid>/task/*/stat`` of ``ovs-vswitchd``).

A 95th percentile at or above 95% of either marks the CPU as saturated; such a run's
timings may reflect the emulator rather than the network (see :mod:`measure.fidelity`).
"""

from __future__ import annotations

import os
import threading
import time

from measure.cpu import CpuSummary, summarise

OVS_PIDFILE = "/var/run/openvswitch/ovs-vswitchd.pid"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _read_cpu() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields), idle


def ovs_pid() -> int | None:
    """PID of the running ``ovs-vswitchd``, or None."""
    try:
        with open(OVS_PIDFILE) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def thread_ticks(pid: int) -> dict[int, int]:
    """CPU ticks (user + system) used so far by every thread of ``pid``."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return out


class CpuSampler:
    """Samples machine and switch-thread CPU utilisation every ``interval_s`` in a background thread."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []  # (wall time s, machine utilisation 0..1)
        self.switch_samples: list[tuple[float, float]] = []  # (wall time s, busiest ovs-vswitchd thread 0..1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Begin sampling."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval_s + 1)
            self._thread = None

    def _loop(self) -> None:
        pid = ovs_pid()
        total0, idle0 = _read_cpu()
        ticks0, t0 = (thread_ticks(pid) if pid else {}), time.monotonic()
        while not self._stop.wait(self.interval_s):
            total1, idle1 = _read_cpu()
            ticks1, t1 = (thread_ticks(pid) if pid else {}), time.monotonic()
            dt = total1 - total0
            now = time.time()
            if dt > 0:
                self.samples.append((now, 1.0 - (idle1 - idle0) / dt))
            if ticks1 and t1 > t0:
                busiest = max(ticks1[t] - ticks0.get(t, ticks1[t]) for t in ticks1)
                self.switch_samples.append((now, min(1.0, busiest / CLK_TCK / (t1 - t0))))
            total0, idle0, ticks0, t0 = total1, idle1, ticks1, t1

    def summary(self, windows: list[tuple[float, float]] | None = None) -> CpuSummary:
        """Mean, 95th percentile and peak machine utilisation, the busiest switch thread's 95th
        percentile, and whether the CPU saturated (either 95th percentile >= 95%).

        Args:
            windows: only count samples inside these ``(t0, t1)`` wall-clock intervals (for
                example the measured iterations, excluding worker start-up).
        """
        def inside(t):
            return windows is None or any(a <= t <= b for a, b in windows)

        return summarise([x for t, x in self.samples if inside(t)],
                         [x for t, x in self.switch_samples if inside(t)])
