"""Unit tests (no root) of the fidelity monitor's per-port link check (``measure.fidelity``):
the virtual-queue lag check, its tolerance and limit, the busy-rate fallback, and their place
in the run verdict.

Every port runs at 8 Mbit/s = 1 000 000 bytes/s, so 1 ms of virtual backlog is 1 000 bytes;
the shaper's token bucket is two frames, 3 028 bytes (:func:`measure.shaping.burst_bytes`), and a full
frame at MTU 1500 is 1 514 bytes.
"""

from __future__ import annotations

import pytest

from measure import fidelity
from measure.cpu import CpuSummary
from measure.fidelity import assess, lag_bytes, lag_limit_bytes, lag_tolerance_bytes, link_checks, port_lags

RATE = 8.0
LINK = ("e1", "h1")
RATES = {LINK: RATE}
FRAME = 1514
BUCKET_MS = 2 * FRAME / 1000  # the shaper's bucket, in ms of virtual backlog at 1 000 000 bytes/s
CPU_OK = CpuSummary(samples=10, mean=0.4, p95=0.5, max=0.6, saturated=False)


def row(t: float, real_bytes: int, virtual_ms: float, skew_s: float = 0.0, sent: int = 0) -> dict:
    """One port sample: real FIFO backlog, virtual backlog (ms at 8 Mbit/s), read skew."""
    return {"t": t, "link": list(LINK), "backlog_bytes": real_bytes, "vq_backlog_ns": int(virtual_ms * 1e6),
            "vq_read_skew_s": skew_s, "sent_bytes": sent}


def test_lag_is_real_backlog_minus_the_virtual_fifo_beyond_the_bucket():
    """50 ms of virtual backlog = 50 000 bytes, 46 972 beyond the 3 028-byte bucket; real 51 972: lag 5 000."""
    assert lag_bytes(row(0, 51_972, 50), RATE, 1500) == pytest.approx(5_000)
    assert lag_bytes(row(0, 0, 3), RATE, 1500) == 0  # a virtual backlog within the bucket is no FIFO
    assert lag_bytes(row(0, 0, 50), RATE, 1500) == pytest.approx(-46_972)  # read out of step: negative


def test_tolerance_is_the_read_skew_at_the_rate_plus_two_frames():
    """20 ms of skew at 1 000 000 bytes/s is 20 000 bytes; plus 2 x 1 514."""
    assert lag_tolerance_bytes(row(0, 0, 0, skew_s=0.02), RATE, 1500) == pytest.approx(20_000 + 2 * FRAME)
    assert lag_tolerance_bytes({"t": 0}, RATE, 1500) == 2 * FRAME  # samples without a skew: frames only


def test_limit_is_a_tenth_of_a_second_of_the_rate_or_half_the_fifo():
    """0.1 s at 1 000 000 bytes/s = 100 000 bytes; a 100-packet FIFO caps it at 75 700."""
    assert fidelity.MAX_LAG_S == 0.1 and fidelity.LAG_SLACK_FRAMES == 2
    assert lag_limit_bytes(RATE, 1500) == pytest.approx(100_000)
    assert lag_limit_bytes(RATE, 1500, queue_packets=100) == pytest.approx(75_700)
    assert lag_limit_bytes(RATE, 1500, queue_packets=1000) == pytest.approx(100_000)


def test_port_that_kept_up_passes_although_its_queue_drained_between_samples():
    """Backlog at every sample, tracking the virtual one within its skew: ok, excess 0, whatever the bytes
    sent between samples (the busy-rate check would see a low rate here)."""
    rows = [row(t, real, virt, skew_s=0.03, sent=int(t * 500_000))
            for t, real, virt in ((0.0, 48_448, BUCKET_MS + 47.4), (0.25, 10_598, BUCKET_MS + 13.6),
                                   (0.5, 28_766, BUCKET_MS + 23.7), (0.75, 6_056, BUCKET_MS + 3.7))]
    (got,) = port_lags({LINK: rows}, RATES)
    assert got.ok and got.check == "virtual-queue" and got.samples == 4
    assert got.excess_bytes == 0 and got.max_lag_bytes == pytest.approx(28_766 - 23_700)


def test_port_behind_its_rate_fails_with_its_excess():
    """A port 30% slow for a second: the real FIFO grows to 150 000 bytes while the ideal port holds
    20 000; excess = 130 000 - 2 x 1 514 over a 100 000 limit."""
    rows = [row(0.0, 0, 0), row(0.5, 70_000, BUCKET_MS + 10), row(1.0, 150_000, BUCKET_MS + 20)]
    (got,) = port_lags({LINK: rows}, RATES)
    assert not got.ok
    assert got.excess_bytes == pytest.approx(130_000 - 2 * FRAME)
    assert got.excess_s == pytest.approx((130_000 - 2 * FRAME) / 1e6)
    assert got.limit_ratio == pytest.approx((130_000 - 2 * FRAME) / 100_000)


def test_a_lag_within_the_read_skew_passes_and_the_same_lag_without_skew_fails():
    """Lag 110 000 bytes: with 100 ms of read skew (100 000 bytes) it is within tolerance; without it fails."""
    assert port_lags({LINK: [row(0, 110_000, BUCKET_MS, skew_s=0.1)]}, RATES)[0].ok
    assert not port_lags({LINK: [row(0, 110_000, BUCKET_MS)]}, RATES)[0].ok


def test_only_samples_inside_the_windows_are_checked():
    """A lagging sample outside the measurement windows does not count."""
    rows = [row(0.0, 150_000, BUCKET_MS), row(10.0, 0, 0)]
    (got,) = port_lags({LINK: rows}, RATES, windows=[(5.0, 20.0)])
    assert got.ok and got.samples == 1
    assert port_lags({LINK: rows}, RATES, windows=[(30.0, 40.0)]) == []


def test_ports_without_a_virtual_queue_fall_back_to_the_busy_rate_check():
    """RED or no marker: no vq_backlog_ns in the rows, so link_checks uses the backlog-stretch rate check;
    a port with both kinds of rows in one run gets the virtual-queue check."""
    full = 10 * FRAME
    red_rows = [{"t": t / 4, "backlog_bytes": full, "sent_bytes": int(t / 4 * 500_000)} for t in range(9)]
    other = ("e2", "h3")
    got = link_checks({LINK: red_rows, other: [row(0, 0, 0)]}, {**RATES, other: RATE})
    by_link = {d.link: d for d in got}
    assert by_link["e1->h1"].check == "busy-rate" and by_link["e2->h3"].check == "virtual-queue"
    assert by_link["e1->h1"].ratio == pytest.approx(0.5) and not by_link["e1->h1"].ok
    assert [d.link for d in got] == ["e1->h1", "e2->h3"]  # worst first


def test_a_failed_link_flags_the_run_and_names_the_port():
    """The run verdict names the worst failing port and its lag; the counts per method are reported."""
    bad = port_lags({LINK: [row(0, 150_000, BUCKET_MS)]}, RATES)
    good = port_lags({("e2", "h3"): [row(0, 0, 0)]}, {("e2", "h3"): RATE})
    got = assess(CPU_OK, good + bad)
    assert not got.trustworthy and len(got.reasons) == 1
    assert "e1->h1" in got.reasons[0] and "fell behind" in got.reasons[0]
    assert got.link_checks == {"virtual-queue": 2, "busy-rate": 0}
    assert got.links_checked == 2 and got.worst_link.link == "e1->h1"
    assert [d.link for d in got.slow_links] == ["e1->h1"]
    assert assess(CPU_OK, good).trustworthy
