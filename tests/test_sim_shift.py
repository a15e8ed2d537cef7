"""Time shifts in the step-level simulator (``FlowEngine.align``, spec §5.4): two jobs whose rings share
links communicate together and each takes twice its time alone; shifted by one job's communication
time against a common origin, they interleave and each takes its time alone; a period that is not the
job's drifts and is put back in phase once per window."""

from __future__ import annotations

import math

import pytest

from common.errors import JobError
from jobs.phase import DriftRule, PhaseKeeper
from placement.base import TimeShift
from sim.flowsim import FlowEngine, SimJob
from topo import fat_tree

RATE_MBPS = 100.0
SIZE = 400_000  # a 2-rank ring sends SIZE bytes each way per iteration: SIZE / rate alone
COMM_S = SIZE * 8 / (RATE_MBPS * 1e6)  # 0.032 s
COMPUTE_S = 0.048
PERIOD_S = COMPUTE_S + COMM_S


def engine_with_two_jobs(iterations=20):
    g = fat_tree(4)
    engine = FlowEngine(g, {(u, v): RATE_MBPS for u, v in g.edges()})
    engine.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), COMPUTE_S, iterations))
    engine.add(SimJob("b", ("h2", "h6"), "ring", (SIZE,), COMPUTE_S, iterations))
    return engine


def finish(engine):
    states = {}
    while done := engine.advance(math.inf):
        states.update((s.job, s) for s in done)
    return states


def comm_of(state):
    return [r.comm_s for r in state.records if r.rank == 0]


def test_jobs_that_communicate_together_share_the_links():
    states = finish(engine_with_two_jobs())
    assert comm_of(states["a"]) == pytest.approx([2 * COMM_S] * 20)
    assert states["a"].phase is None


def test_a_shift_of_one_communication_time_interleaves_them():
    """b aligned on 0 + 40 ms (a at 0): b's Up phase starts when a's ends; every iteration of both is
    alone-fast, the phase errors nil, and b's first iteration waited its shift."""
    engine = engine_with_two_jobs()
    engine.align("a", PhaseKeeper(0.0, 0.0, PERIOD_S))
    engine.align("b", PhaseKeeper(0.0, 0.040, PERIOD_S))
    states = finish(engine)
    for job in "ab":
        assert comm_of(states[job]) == pytest.approx([COMM_S] * 20)
        assert states[job].phase["realignments"] == 0
        assert states[job].phase["max_abs_error_s"] == pytest.approx(0.0, abs=1e-5)  # a barrier late: goes at once
    assert states["b"].phase["first_wait_s"] == pytest.approx(0.040, abs=1e-5)  # less its barrier
    assert states["b"].records[0].start_s == pytest.approx(0.040)


def test_a_period_shorter_than_the_jobs_drifts_and_is_realigned_once_per_window():
    """Kept against 76 ms while it iterates in 80: 4 ms late per iteration, past the 2 ms threshold
    from the first, realigned every tenth iteration."""
    engine = engine_with_two_jobs(iterations=25)
    engine.align("a", DriftRule(window=10, pace=False).keeper(0.0, 0.0, PERIOD_S - 0.004))
    state = finish(engine)["a"]
    assert state.phase["realignments"] == 2 and state.phase["threshold_s"] == pytest.approx(0.002)


def test_without_realignment_a_drifting_job_is_measured_only():
    """``realign: false``: the same drift costs no wait; its phase error grows and is recorded."""
    engine = engine_with_two_jobs(iterations=25)
    engine.align("a", DriftRule(realign=False).keeper(0.0, 0.0, PERIOD_S - 0.004))
    state = finish(engine)["a"]
    assert state.phase["realignments"] == 0 and state.phase["max_abs_error_s"] > 0.02


def two_jobs_b_slower(rule, iterations=30):
    """a and b shifted to interleave by a profile of 80 ms for both, while b computes 4 ms longer:
    each iteration b falls 4 ms further behind a, and from its third their Up phases would meet."""
    g = fat_tree(4)
    engine = FlowEngine(g, {(u, v): RATE_MBPS for u, v in g.edges()})
    engine.add(SimJob("a", ("h1", "h5"), "ring", (SIZE,), COMPUTE_S, iterations))
    engine.add(SimJob("b", ("h2", "h6"), "ring", (SIZE,), COMPUTE_S + 0.004, iterations))
    shifts = [TimeShift("a", 0.0, PERIOD_S), TimeShift("b", 0.040, PERIOD_S)]
    keepers, pace = rule.keepers(0.0, shifts)
    for job, keeper in keepers.items():
        engine.align(job, keeper)
    return finish(engine), pace


def test_paced_jobs_keep_interleaving_when_one_runs_slower_than_its_profile():
    """On one paced line (jobs.pace) the slower b sets the line back by its lateness, and the line runs
    at b's pace from its third natural period: a waits a few ms where it is early, b never waits, and
    neither ever meets the other, every iteration alone-fast, every phase within the threshold."""
    states, pace = two_jobs_b_slower(DriftRule())
    for job in "ab":
        assert comm_of(states[job]) == pytest.approx([COMM_S] * 30)
        assert states[job].phase["max_abs_error_s"] <= states[job].phase["threshold_s"] + 1e-9
    assert states["b"].phase["realignments"] == 0
    assert pace.line.pieces[-1][2] == pytest.approx((PERIOD_S + 0.004) / PERIOD_S)
    assert pace.moves and all(job == "b" for job, _, _ in pace.moves)


def test_unpaced_jobs_that_run_apart_meet_and_wait_most_of_a_period():
    """The same jobs, each keeping the wall clock alone (pace: false): b drifts into a's Up phases,
    both communicate slower there, and b's re-alignment waits most of a period."""
    states, pace = two_jobs_b_slower(DriftRule(pace=False))
    assert pace is None
    assert max(comm_of(states["b"])) > 1.2 * COMM_S
    assert states["b"].phase["realignments"] >= 1


def test_aligning_a_job_that_does_not_run_fails_with_its_name():
    engine = engine_with_two_jobs()
    with pytest.raises(JobError, match="no running job 'zz'"):
        engine.align("zz", PhaseKeeper(0.0, 0.0, 1.0))
