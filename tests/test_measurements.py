"""The typed records a policy's emulated run hands to the report, and their JSON forms
(``measurements.json``), which the run-directory readers (:mod:`experiment.reporting.export`) rely on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import wait_until

from emulator.cpu import CLK_TCK, CpuSampler, _busiest, thread_ticks
from experiment.reporting.export import wave_records
from experiment.reporting.measurements import PortSamplerStats, WaveLinks
from experiment.reporting.report import LinkRow, link_rows
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


def test_the_busiest_thread_share_is_its_tick_rise_over_the_interval():
    """Two thread_ticks readings dt apart: the busiest thread's ticks gained, in seconds over dt; a
    thread that appeared between them counts nothing (its earlier ticks are unknown); at most 1."""
    before = {1: 100, 2: 50}
    after = {1: 100 + CLK_TCK, 2: 50 + CLK_TCK // 2, 3: 10 * CLK_TCK}
    assert _busiest(before, after, 2.0) == 0.5
    assert _busiest(before, after, 4.0) == 0.25
    assert _busiest(before, after, 0.5) == 1.0
    assert _busiest({1: 7}, {1: 7}, 1.0) == 0.0


class _Machine:
    """/proc-style counters on a virtual clock, for :mod:`emulator.cpu`: every reading of the monotonic
    clock moves it on 2 s, and every counter is a function of the clock: the machine a quarter busy, the
    switch's busiest thread three quarters, the process ``spin`` a whole core on its busiest thread,
    ``half`` half a core (restarted under a new pid at the fourth listing), ``idle`` nothing (listed
    three times only)."""

    OVS, SPIN, HALF, HALF2, IDLE = 10, 20, 30, 31, 40

    def __init__(self):
        self.t = 0.0
        self.listings = 0

    def monotonic(self) -> float:
        self.t += 2.0
        return self.t

    def time(self) -> float:
        return 1000.0 + self.t

    def read_cpu(self) -> tuple[int, int]:
        return int(2 * CLK_TCK * self.t), int(1.5 * CLK_TCK * self.t)  # two cores, 3/4 of them idle

    def thread_ticks(self, pid: int) -> dict[int, int]:
        used = int(CLK_TCK * self.t)  # a whole core since the clock's start
        return {self.OVS: {self.OVS: used * 3 // 4, self.OVS + 1: used // 8},
                self.SPIN: {self.SPIN: used, self.SPIN + 1: used // 4},
                self.HALF: {self.HALF: used // 2}, self.HALF2: {self.HALF2: used // 2},
                self.IDLE: {self.IDLE: 7}}[pid]

    def watch(self) -> dict[str, int]:
        self.listings += 1
        listed = {"spin": self.SPIN, "half": self.HALF if self.listings < 4 else self.HALF2}
        return {**listed, "idle": self.IDLE} if self.listings <= 3 else listed


def test_the_sampler_turns_counter_readings_into_shares_of_its_intervals(monkeypatch):
    """The sampling loop fed counters on a virtual clock (:class:`_Machine`): every interval's machine
    utilisation is 0.25, the switch's busiest thread 0.75, each watched process's busiest thread its
    share (1.0, 0.5, 0.0), a process is compared only with itself (no sample across a restart), a name
    no longer listed keeps the samples it had, and windows pick samples by their wall-clock time."""
    import emulator.cpu

    machine = _Machine()
    monkeypatch.setattr(emulator.cpu, "time", machine)
    monkeypatch.setattr(emulator.cpu, "_read_cpu", machine.read_cpu)
    monkeypatch.setattr(emulator.cpu, "thread_ticks", machine.thread_ticks)
    monkeypatch.setattr(emulator.cpu, "ovs_pid", lambda: machine.OVS)
    sampler = CpuSampler(interval_s=0.001, watch=machine.watch)
    sampler.start()
    try:
        wait_until(lambda: len(sampler.process_samples.get("spin", ())) >= 6, what="six sampling intervals")
    finally:
        sampler.stop()
    spin = sampler.process_samples["spin"]
    rounds = len(spin)
    assert spin == [(1002.0 + 2 * r, 1.0) for r in range(1, rounds + 1)]  # round r reads the clock at 2 (r + 1)
    assert sampler.process_samples["half"] == [(t, 0.5) for t, _ in spin if t != 1008.0]  # the restart's round
    assert sampler.process_samples["idle"] == [(1004.0, 0.0), (1006.0, 0.0)]
    assert sampler.samples == [(t, 0.25) for t, _ in spin]
    assert sampler.switch_samples == [(t, 0.75) for t, _ in spin]
    assert sampler.summary() == CpuSummary(rounds, 0.25, 0.25, 0.25, 0.75, False)
    assert sampler.process_p95() == {"half": 0.5, "idle": 0.0, "spin": 1.0}
    assert sampler.process_p95([(1003.0, 1005.0)]) == {"half": 0.5, "idle": 0.0, "spin": 1.0}
    assert sampler.process_p95([(1007.5, 1010.5)]) == {"half": 0.5, "spin": 1.0}
    assert sampler.process_p95([(0.0, 1.0)]) == {}  # no sample inside that window


def _child(code: str) -> subprocess.Popen:
    """A Python process running ``code``, stdin and stdout piped."""
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _blocked(p: subprocess.Popen) -> bool:
    """``p`` is asleep (state S in /proc), here: blocked reading its stdin."""
    with open(f"/proc/{p.pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "S"


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        p.kill()
        p.wait()


# Spins until its own CPU time reaches 0.3 s, prints that time (os.times: the kernel's counters of
# this process, as /proc's), then blocks reading stdin.
BURN_THEN_BLOCK = ("import os, sys, time\n"
                   "while time.process_time() < 0.3: pass\n"
                   "c = os.times(); print(c.user + c.system, flush=True)\n"
                   "sys.stdin.readline()\n")


def test_thread_ticks_are_the_cpu_time_a_process_counts_itself_and_none_while_it_is_blocked():
    """A real process that burned 0.3 s of CPU and then blocks: its threads' ticks add up to the CPU time
    it read from the kernel itself (within the rounding of user and system time, a tick each), and they
    do not move while it is blocked, over a window in which a spinning process gained 20 ticks: counters,
    whatever the machine's load."""
    burner = _child(BURN_THEN_BLOCK)
    spin = _child("while True: pass")
    try:
        own_s = float(burner.stdout.readline())
        wait_until(lambda: _blocked(burner), what="the burner blocked on its stdin")
        first = thread_ticks(burner.pid)
        ticks = sum(first.values())
        assert abs(ticks - own_s * CLK_TCK) <= 2 and ticks >= 0.3 * CLK_TCK - 2, (first, own_s)
        start = sum(thread_ticks(spin.pid).values())
        wait_until(lambda: sum(thread_ticks(spin.pid).values()) >= start + 20, 60, "20 ticks of the spinner")
        assert thread_ticks(burner.pid) == first
    finally:
        _stop(burner, spin)


def test_the_sampler_follows_each_watched_process_by_its_pid():
    """The sampler over real processes watched by name: a process blocked throughout has every sample
    exactly 0.0, whatever else runs; a spinning one's samples show the CPU it got (above 0 once it ran)."""
    idle = _child("import sys\nprint('ready', flush=True)\nsys.stdin.readline()\n")
    spin = _child("while True: pass")
    sampler = CpuSampler(interval_s=0.05, watch=lambda: {"spin": spin.pid, "idle": idle.pid})
    try:
        assert idle.stdout.readline() == "ready\n"
        wait_until(lambda: _blocked(idle), what="the idle process blocked on its stdin")
        sampler.start()
        wait_until(lambda: any(x > 0 for _, x in sampler.process_samples.get("spin", ())), 60,
                   "a sample of the spinner's CPU")
        wait_until(lambda: len(sampler.process_samples.get("idle", ())) >= 3, 60, "three samples of the idle one")
    finally:
        sampler.stop()
        _stop(idle, spin)
    assert {x for _, x in sampler.process_samples["idle"]} == {0.0}
    assert all(0 <= x <= 1 for _, x in sampler.process_samples["spin"])
