"""Fidelity monitor: can a run's timings be trusted as a network measurement?

In the spirit of Mininet-HiFi, two checks over a run's measurement windows:

* **CPU**: whole-machine utilisation and the busiest switch-datapath thread (see
  :mod:`testbed.cpu`); a 95th percentile at or above 95% of either means the emulator itself
  may have been the bottleneck;
* **link rate**: a switch port whose FIFO held a standing queue (at least
  ``MIN_BACKLOG_PACKETS`` full-size packets) at ``MIN_STRETCH_SAMPLES`` or more consecutive
  samples is taken as saturated over that stretch, so it must have sent at its configured
  rate. Over all such stretches of a port (at least ``MIN_BUSY_S`` in total), achieved =
  bytes sent / stretch time; a port that achieved less than ``MIN_RATE_RATIO`` of its rate
  could not be served fast enough by the machine (CPU, softirq or the shaper's timer).
  Samples are instants: a queue that drained and refilled between two samples counts as
  busy, so bursty traffic can understate the achieved rate; the stretch and backlog minimums
  keep such false alarms rare, and the per-port figures are in the results for inspection.

A run failing either check is flagged untrustworthy, with the reasons, in the report and
its JSON.
"""

from __future__ import annotations

from common.units import MEGA

MIN_RATE_RATIO = 0.9
MIN_BUSY_S = 1.0
MIN_STRETCH_SAMPLES = 3
MIN_BACKLOG_PACKETS = 4


def _inside(t: float, windows) -> bool:
    return windows is None or any(a <= t <= b for a, b in windows)


def saturated_stretches(rows: list[dict], min_backlog_bytes: float, windows=None) -> list[tuple[dict, dict]]:
    """``(first, last)`` sample of every run of at least ``MIN_STRETCH_SAMPLES`` consecutive
    samples (inside the windows) with a backlog of at least ``min_backlog_bytes``."""
    out, run = [], []
    for r in [*rows, None]:
        if r is not None and _inside(r["t"], windows) and (r.get("backlog_bytes") or 0) >= min_backlog_bytes:
            run.append(r)
            continue
        if len(run) >= MIN_STRETCH_SAMPLES:
            out.append((run[0], run[-1]))
        run = []
    return out


def busy_rates(samples: dict[tuple[str, str], list[dict]], rates_mbps: dict[tuple[str, str], float],
               windows=None, mtu: int = 1500) -> list[dict]:
    """Achieved rate of every port over the stretches its FIFO held a standing queue.

    Returns:
        One dict per directed link with at least ``MIN_BUSY_S`` of saturated time: ``link``,
        ``busy_s``, ``achieved_mbps``, ``rate_mbps``, ``ratio``; sorted by ratio.
    """
    out = []
    for link, rows in samples.items():
        busy_s, sent = 0.0, 0
        for a, b in saturated_stretches(rows, MIN_BACKLOG_PACKETS * (mtu + 14), windows):
            busy_s += b["t"] - a["t"]
            sent += b["sent_bytes"] - a["sent_bytes"]
        if busy_s < MIN_BUSY_S:
            continue
        rate = rates_mbps.get(link) or rates_mbps.get((link[1], link[0]))
        achieved = sent * 8 / busy_s / MEGA
        out.append({"link": f"{link[0]}->{link[1]}", "busy_s": round(busy_s, 3), "achieved_mbps": achieved,
                    "rate_mbps": rate, "ratio": achieved / rate})
    return sorted(out, key=lambda d: d["ratio"])


def assess(cpu: dict, links: list[dict], min_ratio: float = MIN_RATE_RATIO) -> dict:
    """The verdict from a CPU summary (:meth:`testbed.cpu.CpuSampler.summary`) and :func:`busy_rates`.

    Returns:
        ``trustworthy`` (bool), ``reasons`` (list of strings), ``cpu_p95``, ``saturated_links``
        (how many ports were busy long enough to check), ``slow_links`` (those below the ratio),
        ``worst_link_ratio``.
    """
    reasons = []
    if cpu.get("saturated"):
        sw = cpu.get("switch_thread_p95")
        reasons.append(f"CPU saturated (p95 machine {cpu['p95']:.0%}"
                       + (f", busiest switch thread {sw:.0%}" if sw is not None else "")
                       + " >= 95%): timings may reflect the emulator, not the network")
    slow = [d for d in links if d["ratio"] < min_ratio]
    if slow:
        worst = slow[0]
        reasons.append(f"{len(slow)} busy link(s) ran below {min_ratio:.0%} of their rate (worst "
                       f"{worst['link']}: {worst['achieved_mbps']:.2f} of {worst['rate_mbps']:g} Mbit/s while "
                       f"backlogged)")
    return {"trustworthy": not reasons, "reasons": reasons, "cpu_p95": cpu.get("p95"),
            "saturated_links": len(links), "slow_links": slow,
            "worst_link_ratio": links[0]["ratio"] if links else None}
