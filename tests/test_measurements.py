"""The typed records a policy's emulated run hands to the report, and their JSON forms
(``measurements.json``), which the run-directory readers (:mod:`experiment.export`) rely on."""

from __future__ import annotations

import json

import pytest

from emulator.cpu import CpuSampler
from experiment.export import wave_records
from experiment.measurements import PortSamplerStats, WaveLinks
from experiment.report import LinkRow, link_rows
from measure.cpu import CpuSummary
from measure.fidelity import LinkCheck, assess


def _wave(index=0, marks=None, ecn=None) -> WaveLinks:
    return WaveLinks(index, ("a", "b"), 12.0, 2.0, (100.0, 105.0), {("h1", "e1"): 900, ("e1", "h1"): 1000},
                     {("e1", "h1"): 800}, marks, ecn)


def test_wave_json_is_the_documented_layout_sorted_by_link():
    d = json.loads(json.dumps(_wave(marks={("e1", "h1"): 3}).to_dict()))
    assert d == {"index": 0, "jobs": ["a", "b"], "duration_s": 12.0, "startup_s": 2.0, "window_s": [100.0, 105.0],
                 "link_bytes": [["e1", "h1", 1000], ["h1", "e1", 900]], "window_link_bytes": [["e1", "h1", 800]],
                 "window_link_marks": [["e1", "h1", 3]], "ecn": None}


def test_ecn_not_measured_stays_none_never_zeros():
    d = _wave().to_dict()
    assert d["window_link_marks"] is None and _wave().job_marks() == {}
    marked = _wave(ecn={"jobs": {"a": {"pkts": 5, "bytes": 50, "marks": 2}, "b": {"pkts": 1, "bytes": 9, "marks": 0}}})
    assert marked.job_marks() == {"a": 2, "b": 0}


def test_export_reads_the_waves_the_runner_writes():
    """Arrival of wave 1 = wave 0's measured run, (duration - start-up) / dilation."""
    waves = tuple(w.to_dict() for w in (_wave(0), _wave(1)))
    placements = [{"job": "a", "wave": 0}, {"job": "b", "wave": 1}]
    got = wave_records(placements, waves, dilation=2.0)
    assert [(w.index, w.arrival_s, w.measured_run_s) for w in got] == [(0, 0.0, 5.0), (1, 5.0, 5.0)]


def test_link_rows_cover_every_link_with_window_figures_where_sampled():
    class Result:
        link_rate_mbps = {("e1", "h1"): 8.0}  # one orientation serves both directions
        waves = (_wave(marks={("e1", "h1"): 3}),)

    rows = {r.name: r for r in link_rows(Result())}
    assert set(rows) == {"e1->h1", "h1->e1"}
    down, up = rows["e1->h1"], rows["h1->e1"]
    assert isinstance(down, LinkRow) and down.rate_mbps == up.rate_mbps == 8.0
    assert down.window_s == pytest.approx(5.0) and down.window_marks == 3
    assert down.window_utilisation == pytest.approx(800 * 8 / (5.0 * 8e6))
    assert down.wave_utilisation == pytest.approx(1000 * 8 / (12.0 * 8e6))
    assert up.window_bytes is None and up.window_utilisation is None and up.window_marks is None


def test_link_check_json_keeps_only_its_own_evidence():
    busy = LinkCheck("e1->h1", "busy-rate", False, 1.44, 8.0, busy_s=2.0, achieved_mbps=5.0, ratio=0.625)
    assert busy.to_dict() == {"link": "e1->h1", "check": "busy-rate", "ok": False, "limit_ratio": 1.44,
                              "rate_mbps": 8.0, "busy_s": 2.0, "achieved_mbps": 5.0, "ratio": 0.625}
    verdict = assess(CpuSummary(4, 0.2, 0.3, 0.3, None, False), [busy]).to_dict()
    assert verdict["worst_link"] == busy.to_dict() and verdict["slow_links"] == [busy.to_dict()]


def test_cpu_summary_without_samples_has_no_figures():
    got = CpuSampler().summary()
    assert got == CpuSummary() and got.to_dict() == {"samples": 0, "mean": None, "p95": None, "max": None,
                                                    "switch_thread_p95": None, "saturated": None}
    sampler = CpuSampler()
    sampler.samples = [(float(t), t / 100) for t in range(100)]
    got = sampler.summary([(10.0, 29.0)])
    assert (got.samples, got.max, got.saturated) == (20, 0.29, False)
    assert got.mean == pytest.approx(0.195)


def test_port_sampler_stats_json():
    assert PortSamplerStats(40, 0.25, 0.002).to_dict() == {"samples": 40, "interval_s": 0.25, "mean_cost_s": 0.002}


def test_the_sampler_follows_the_busiest_thread_of_each_watched_process():
    """A process spinning on one core and one sleeping, watched by name: the spinning one's busiest thread is
    near a whole core, the sleeping one's near none; a name that stops being listed keeps its samples."""
    import subprocess
    import sys
    import time

    from emulator.cpu import CpuSampler

    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 3: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    watched = {"spin": spin.pid, "idle": idle.pid}
    sampler = CpuSampler(interval_s=0.2, watch=lambda: dict(watched))
    try:
        sampler.start()
        time.sleep(1.5)
        watched.pop("idle")
        time.sleep(0.5)
    finally:
        sampler.stop()
        spin.kill()
        idle.kill()
        spin.wait()
        idle.wait()
    shares = sampler.process_p95()
    assert set(shares) == {"spin", "idle"}
    assert shares["spin"] > 0.5 and shares["idle"] < 0.1, shares
    assert sampler.process_p95([(0.0, 1.0)]) == {}  # no sample inside that window
