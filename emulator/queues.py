"""Sample every switch port's queue, transmit counters and ECN counters while a network runs.

One background thread, every ``interval_s``: one ``tc -s -j qdisc show`` (all switch ports
live in the root namespace) gives each port's FIFO under its shaper: backlog, drops, bytes
and packets sent, and RED's ``marked`` counter where RED is the FIFO; the BPF marker's maps
give its counters and the virtual backlog. Rows go to ``queue_stats.jsonl``, one JSON line
per port and sample, keyed by the directed link the port transmits on (switch -> neighbour).

The two reads are not simultaneous: ``vq_read_skew_s`` is the time from the start of the
``tc`` call to the marker's read, the most by which the virtual backlog is later than the real
one (the fidelity monitor's lag check allows for it, see :func:`measure.fidelity.port_lags`).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

LEAF_HANDLE = "10:"  # the FIFO (or RED) under each port's shaper (TBF), see emulator.net


def parse_tc_qdiscs(text: str, leaf_handle: str = LEAF_HANDLE, dev: str | None = None) -> dict[str, dict]:
    """The leaf qdisc counters per device from ``tc -s -j qdisc show`` output (``dev``: the device of
    ``tc -s -j qdisc show dev DEV`` output, which names none)."""
    out = {}
    for q in json.loads(text or "[]"):
        if q.get("handle") != leaf_handle:
            continue
        out[q.get("dev", dev)] = {"sent_bytes": q.get("bytes"), "sent_pkts": q.get("packets"), "drops": q.get("drops"),
                         "backlog_bytes": q.get("backlog"), "backlog_pkts": q.get("qlen"),
                         "red_marked": q.get("marked")}
    return out


def local_qdiscs() -> dict:
    """Queue counters of every port of this machine (``tc -s -j qdisc show``; empty if it fails)."""
    cp = subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True, timeout=30)
    return parse_tc_qdiscs(cp.stdout) if cp.returncode == 0 else {}


class PortSampler:
    """Writes queue and marker samples of the given ports to a JSONL file in a background thread.

    Args:
        path: the ``queue_stats.jsonl`` to append to.
        ports: interface -> directed link ``(switch, neighbour)`` it transmits on.
        marker: a started :class:`emulator.ecn.BpfMarker`, or None.
        interval_s: sampling period.
        read_qdiscs: returns every port's queue counters (:func:`parse_tc_qdiscs`'s shape); default
            this machine's (``tc``); a network spread over servers reads each server's
            (:meth:`emulator.counters.PortCounters.qdisc_stats`).
    """

    def __init__(self, path: str, ports: dict[str, tuple[str, str]], marker=None, interval_s: float = 0.25,
                 read_qdiscs=None):
        self.read_qdiscs = read_qdiscs or local_qdiscs
        self.path = path
        self.ports = dict(ports)
        self.marker = marker
        self.interval_s = interval_s
        self.samples_taken = 0
        self.cost_s = 0.0  # wall time spent sampling, to report the sampler's own load
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> list[dict]:
        """One sample of every port."""
        t0 = time.time()
        qdiscs = self.read_qdiscs()
        marks = self.marker.port_counters() if self.marker is not None else {}
        t = time.time()
        skew_s = round(t - t0, 6)
        rows = []
        for intf, link in self.ports.items():
            row = {"t": t, "link": list(link), "intf": intf, **qdiscs.get(intf, {})}
            m = marks.get(intf)
            if m is not None:
                row.update({"marks": m["marks"], "ect_pkts": m["ect_pkts"], "marker_pkts": m["pkts"],
                            "over_not_ect": m["over_not_ect"], "vq_drops": m["vq_drops"],
                            "vq_backlog_ns": m["backlog_ns"], "vq_max_backlog_ns": m["max_backlog_ns"],
                            "vq_read_skew_s": skew_s})
            elif row.get("red_marked") is not None:
                row["marks"] = row["red_marked"]
            rows.append(row)
        self.samples_taken += 1
        self.cost_s += time.time() - t0
        return rows

    def start(self) -> None:
        """Begin sampling (the first sample is taken at once)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        with open(self.path, "a") as f:
            while True:
                last = self._stop.is_set()
                try:
                    rows = self.sample()
                except Exception as e:  # noqa: BLE001 - recorded and reported by the runner, never lost
                    self.error = f"{type(e).__name__}: {e}"
                    return
                f.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
                f.flush()
                if last:
                    return
                self._stop.wait(self.interval_s)

    def stop(self) -> None:
        """Stop sampling (idempotent); takes one last sample first."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=30)
        self._thread = None
