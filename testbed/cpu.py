"""CPU utilisation sampling while an experiment runs.

On a 2-core machine the emulator itself (OVS userspace datapath, workers) can become the
bottleneck. The sampler reads ``/proc/stat`` periodically and reports mean and peak
utilisation; a run whose CPU saturated is flagged in its results.
"""

from __future__ import annotations

import threading
import time

SATURATED_FRACTION = 0.95


def _read_cpu() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields), idle


class CpuSampler:
    """Samples whole-machine CPU utilisation every ``interval_s`` in a background thread."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []  # (wall time s, utilisation 0..1)
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
        total0, idle0 = _read_cpu()
        while not self._stop.wait(self.interval_s):
            total1, idle1 = _read_cpu()
            dt = total1 - total0
            if dt > 0:
                self.samples.append((time.time(), 1.0 - (idle1 - idle0) / dt))
            total0, idle0 = total1, idle1

    def summary(self, windows: list[tuple[float, float]] | None = None) -> dict:
        """Mean, 95th percentile and peak utilisation, and whether the CPU saturated.

        Args:
            windows: only count samples inside these ``(t0, t1)`` wall-clock intervals (for
                example the measured iterations, excluding worker start-up).
        """
        u = sorted(x for t, x in self.samples if windows is None or any(a <= t <= b for a, b in windows))
        if not u:
            return {"samples": 0, "mean": None, "p95": None, "max": None, "saturated": None}
        p95 = u[min(len(u) - 1, int(0.95 * len(u)))]
        return {"samples": len(u), "mean": sum(u) / len(u), "p95": p95, "max": u[-1],
                "saturated": p95 >= SATURATED_FRACTION}
