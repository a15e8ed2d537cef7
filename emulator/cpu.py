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
from collections.abc import Callable, Mapping

from measure.cpu import CpuSummary, percentile95, summarise

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
    """Samples machine and switch-thread CPU utilisation every ``interval_s`` in a background thread,
    and the busiest thread of each process ``watch()`` names then (name -> pid; INA's aggregators
    and parameter servers, which come and go)."""

    def __init__(self, interval_s: float = 0.5, watch: Callable[[], Mapping[str, int]] | None = None):
        self.interval_s = interval_s
        self.watch = watch
        self.samples: list[tuple[float, float]] = []  # (wall time s, machine utilisation 0..1)
        self.switch_samples: list[tuple[float, float]] = []  # (wall time s, busiest ovs-vswitchd thread 0..1)
        self.process_samples: dict[str, list[tuple[float, float]]] = {}  # name -> (wall time s, busiest thread)
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

    def _watched(self) -> dict[str, int]:
        try:
            return dict(self.watch()) if self.watch is not None else {}
        except RuntimeError:  # its processes changed while listed: next time
            return {}

    def _loop(self) -> None:
        pid = ovs_pid()
        total0, idle0 = _read_cpu()
        ticks0, t0 = (thread_ticks(pid) if pid else {}), time.monotonic()
        watched0 = {name: (p, thread_ticks(p)) for name, p in self._watched().items()}
        while not self._stop.wait(self.interval_s):
            total1, idle1 = _read_cpu()
            ticks1, t1 = (thread_ticks(pid) if pid else {}), time.monotonic()
            watched1 = {name: (p, thread_ticks(p)) for name, p in self._watched().items()}
            dt = total1 - total0
            now = time.time()
            if dt > 0:
                self.samples.append((now, 1.0 - (idle1 - idle0) / dt))
            if ticks1 and t1 > t0:
                self.switch_samples.append((now, _busiest(ticks0, ticks1, t1 - t0)))
            for name, (p, ticks) in watched1.items():
                before = watched0.get(name)
                if ticks and before is not None and before[0] == p and t1 > t0:
                    self.process_samples.setdefault(name, []).append((now, _busiest(before[1], ticks, t1 - t0)))
            total0, idle0, ticks0, t0, watched0 = total1, idle1, ticks1, t1, watched1

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

    def process_p95(self, windows: list[tuple[float, float]] | None = None) -> dict[str, float]:
        """Each watched process's busiest thread: the 95th percentile of its share of one core over
        the samples inside ``windows`` (all: None); processes without such a sample left out."""
        out = {}
        for name, samples in sorted(self.process_samples.items()):
            inside = [x for t, x in samples if windows is None or any(a <= t <= b for a, b in windows)]
            if inside:
                out[name] = percentile95(inside)
        return out


def _busiest(before: Mapping[int, int], after: Mapping[int, int], dt_s: float) -> float:
    """The busiest thread's share of one core between two :func:`thread_ticks` readings ``dt_s`` apart."""
    return min(1.0, max(after[t] - before.get(t, after[t]) for t in after) / CLK_TCK / dt_s)
