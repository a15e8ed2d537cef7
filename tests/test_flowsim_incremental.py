"""Unit tests of the incremental flow-level simulator (``sim.flowsim.FlowEngine``): driven to the end
it gives what ``simulate`` gives bit for bit; late additions, preemption (``remove``) and restarts
(a job added again as a new run) behave as ``docs/simulator-engines.md`` (Incremental use) says;
``advance`` stops where it should; misuse fails with the offending value."""

import math

import pytest
from conftest import contending_mix, uniform_rates

from common.errors import JobError, TopologyError
from sim.flowsim import FlowEngine, RunState, SimJob, SimOptions, simulate
from topo import fat_tree

B_MBPS = 100.0
B_BYTES_PER_S = B_MBPS * 1e6 / 8
SIZE = 400_000  # a 2-rank ring moves SIZE bytes each way per iteration: SIZE / B alone
ALONE_S = SIZE / B_BYTES_PER_S
SHARED = ("h1", "h5")  # machines in pods 1 and 2
ELSEWHERE = ("h9", "h13")  # pods 3 and 4: no directed link in common with SHARED's paths


def uniform(g, mbps=B_MBPS):
    """Every link at the same rate."""
    return uniform_rates(g, mbps)


def per_iteration_comm(records, job):
    """The slowest rank's communication time of each measured iteration of ``job``."""
    out: dict[int, float] = {}
    for r in records:
        if r.job == job:
            out[r.iteration] = max(out.get(r.iteration, 0.0), r.comm_s)
    return [out[i] for i in sorted(out)]


def run_to_end(engine):
    """Advance ``engine`` until nothing is left; the finished runs' states in the order reported."""
    states = []
    while done := engine.advance(math.inf):
        assert [s.job for s in done] == sorted(s.job for s in done)
        assert all(s.finished and s.end_s == engine.now_s for s in done)
        states.extend(done)
    return states




# -- driven to the end, the engine is simulate() -------------------------------------------------

@pytest.mark.parametrize("options", [SimOptions(), SimOptions(mtu=1500, latency_s=1e-5),
                                     SimOptions(mtu=1500, latency_s=1e-5, burst_bytes=15000.0)])
def test_adding_all_then_advancing_gives_simulate_bit_for_bit(options):
    """All jobs added, then advance(inf) until nothing is left: the same records, estimates and event
    count as simulate(), each finished run reported once with simulate's estimate."""
    g = fat_tree(4)
    jobs = list(reversed(contending_mix()))
    want = simulate(g, uniform(g), jobs, options)
    engine = FlowEngine(g, uniform(g), options)
    for spec in jobs:
        engine.add(spec)
    assert engine.running() == ["a", "b", "c", "d"]
    states = run_to_end(engine)
    assert engine.result() == want
    assert engine.running() == []
    assert sorted(s.job for s in states) == ["a", "b", "c", "d"]
    for state in states:
        assert state.estimate == want.job(state.job)
        assert state.iterations_done == want.job(state.job).iterations
        assert sorted(state.records, key=lambda r: (r.iteration, r.rank)) == \
            [r for r in want.records if r.job == state.job]
    assert engine.now_s == want.end_s


def test_runs_finishing_together_are_reported_together_by_name():
    """Two identical jobs on mirror-image paths finish in one batch: one advance returns both, by name."""
    g = fat_tree(4)
    engine = FlowEngine(g, uniform(g))
    engine.add(SimJob("b", ("h3", "h4"), "ring", (SIZE,), 0.001, 2))
    engine.add(SimJob("a", ("h1", "h2"), "ring", (SIZE,), 0.001, 2))
    done = engine.advance(math.inf)
    assert [s.job for s in done] == ["a", "b"]
    assert done[0].end_s == done[1].end_s == engine.now_s
    assert engine.advance(math.inf) == []


# -- arrivals over time ----------------------------------------------------------------------------

def test_job_added_later_on_a_disjoint_path_runs_as_alone_shifted():
    """A job added at t > 0 on links nobody else uses takes the same time per iteration as alone,
    its iterations shifted by its start; the job already running is untouched, bit for bit."""
    g = fat_tree(4)
    first = SimJob("first", SHARED, "ring", (SIZE,), 0.002, 6)
    late = SimJob("late", ELSEWHERE, "ring", (SIZE,), 0.002, 3, start_s=0.05)
    first_alone = simulate(g, uniform(g), [first])
    late_alone = simulate(g, uniform(g), [SimJob("late", ELSEWHERE, "ring", (SIZE,), 0.002, 3)])
    engine = FlowEngine(g, uniform(g))
    engine.add(first)
    assert engine.advance(0.05) == [] and engine.now_s == 0.05
    assert engine.progress("first") == 1  # an iteration alone is 2 ms of compute and 32 ms of comm
    engine.add(late)
    states = {s.job: s for s in run_to_end(engine)}
    assert states["late"].start_s == 0.05
    assert per_iteration_comm(states["late"].records, "late") == pytest.approx(
        per_iteration_comm(late_alone.records, "late"), rel=1e-9)
    assert sorted(r.start_s for r in states["late"].records) == pytest.approx(
        sorted(0.05 + r.start_s for r in late_alone.records), rel=1e-12)
    assert states["late"].end_s == pytest.approx(0.05 + late_alone.job("late").finish_s, rel=1e-12)
    res = engine.result()
    assert [r for r in res.records if r.job == "first"] == list(first_alone.records)
    assert res.job("first") == first_alone.job("first")


# -- preemption ------------------------------------------------------------------------------------

def test_removing_a_job_frees_the_shared_bottleneck_at_once():
    """Two rings on the same machines share every link; removing one at t mid-step gives the other
    the full rate from t on (its iteration spanning t lasts 32 ms + (t - its start) / 2, by hand:
    half rate before t, full after), and its later iterations take as long as alone."""
    g = fat_tree(4)
    keep = SimJob("keep", SHARED, "ring", (SIZE,), 0.0, 5)
    alone = per_iteration_comm(simulate(g, uniform(g), [keep]).records, "keep")
    engine = FlowEngine(g, uniform(g))
    engine.add(keep)
    engine.add(SimJob("gone", SHARED, "ring", (SIZE,), 0.0, 5))
    t_remove = 0.1  # iterations 0 and 1 take 64 ms shared; 0.1 is in the second step of iteration 1
    assert engine.advance(t_remove) == []
    assert engine.progress("keep") == engine.progress("gone") == 1
    state = engine.remove("gone")
    assert isinstance(state, RunState)
    assert (state.job, state.finished, state.start_s, state.end_s) == ("gone", False, 0.0, t_remove)
    assert state.iterations_done == 1
    assert {(r.iteration, r.rank) for r in state.records} == {(0, 0), (0, 1)}
    assert state.estimate.iterations == 1 and state.estimate.finish_s == t_remove
    assert state.estimate.comm_mean_s == pytest.approx(2 * ALONE_S, rel=1e-9)
    assert engine.running() == ["keep"]
    done = run_to_end(engine)
    assert [s.job for s in done] == ["keep"]
    records = done[0].records
    comm = per_iteration_comm(records, "keep")
    assert comm[0] == pytest.approx(2 * ALONE_S, rel=1e-9)
    start_1 = min(r.start_s for r in records if r.iteration == 1)
    assert comm[1] == pytest.approx(ALONE_S + (t_remove - start_1) / 2, rel=1e-9)
    assert comm[2:] == pytest.approx(alone[2:], rel=1e-9)
    assert engine.result().records == tuple(sorted(records + state.records,
                                                   key=lambda r: (r.job, r.iteration, r.rank)))


@pytest.mark.parametrize("t_remove", [0.0, 0.005])
def test_stale_timers_of_a_removed_run_are_never_processed(t_remove):
    """A run removed before it starts (t = 0) or while computing (t = 5 ms, with 1 ms of latency per
    transfer) leaves timers in the heap; none of them is processed: it records nothing more, and
    the other job's records and the event count are those of that job alone."""
    g = fat_tree(4)
    options = SimOptions(latency_s=1e-3)
    keep = SimJob("keep", SHARED, "ring", (SIZE,), 0.01, 3)
    alone = simulate(g, uniform(g), [keep], options)
    engine = FlowEngine(g, uniform(g), options)
    engine.add(SimJob("gone", ("h2", "h6"), "ring", (SIZE,), 0.01, 3, start_s=0.002))
    assert engine.advance(t_remove) == []
    events_before = engine.events
    state = engine.remove("gone")
    assert any(key[1] == ("gone", 0) for _, key, _ in engine.timers)  # stale entries, still queued
    assert state.records == () and state.iterations_done == 0 and state.end_s == t_remove
    engine.add(SimJob("keep", SHARED, "ring", (SIZE,), 0.01, 3, start_s=t_remove))
    run_to_end(engine)
    res = engine.result()
    assert [r for r in res.records if r.job == "gone"] == []
    assert res.events - events_before == alone.events
    if t_remove == 0.0:  # same start as alone: the same run, bit for bit
        assert [r for r in res.records if r.job == "keep"] == list(alone.records)
    assert per_iteration_comm(res.records, "keep") == pytest.approx(per_iteration_comm(alone.records, "keep"),
                                                                     rel=1e-9)


def test_removed_job_added_again_elsewhere_finishes_as_a_new_run():
    """A preempted job restarted on other machines with its remaining iterations is a new run: it
    runs as alone there, finishes with finished=True, and result() holds both runs."""
    g = fat_tree(4)
    total = 5
    engine = FlowEngine(g, uniform(g))
    engine.add(SimJob("keep", SHARED, "ring", (SIZE,), 0.0, 8))
    engine.add(SimJob("moved", SHARED, "ring", (SIZE,), 0.0, total))
    assert engine.advance(0.1) == []
    first = engine.remove("moved")
    left = total - first.iterations_done
    restart = SimJob("moved", ELSEWHERE, "ring", (SIZE,), 0.0, left, start_s=engine.now_s)
    engine.add(restart)
    assert engine.running() == ["keep", "moved"]
    states = run_to_end(engine)
    again = next(s for s in states if s.job == "moved")
    assert again.finished and again.start_s == 0.1 and again.iterations_done == left
    assert sorted({r.iteration for r in again.records}) == list(range(left))
    alone = simulate(g, uniform(g), [SimJob("moved", ELSEWHERE, "ring", (SIZE,), 0.0, left)])
    assert per_iteration_comm(again.records, "moved") == pytest.approx([ALONE_S] * left, rel=1e-9)
    assert again.end_s == pytest.approx(0.1 + alone.job("moved").finish_s, rel=1e-12)
    res = engine.result()
    assert [e.job for e in res.jobs] == ["keep", "moved", "moved"]
    assert res.jobs[1] == first.estimate and res.jobs[2] == again.estimate
    assert res.end_s == max(s.end_s for s in states)


# -- advance's stopping rule -----------------------------------------------------------------------

def test_advance_stops_at_until_when_no_job_finishes():
    """advance(t) before any job ends returns [] with now_s = t, resumes without changing anything,
    and an idle engine's clock follows a finite until_s and stays put for inf."""
    g = fat_tree(4)
    spec = SimJob("j", SHARED, "ring", (SIZE,), 0.001, 3)
    want = simulate(g, uniform(g), [spec])
    finish_s = want.job("j").finish_s
    engine = FlowEngine(g, uniform(g))
    assert engine.now_s == 0.0
    engine.add(spec)
    for until_s in (finish_s / 3, finish_s / 3, finish_s / 2):
        assert engine.advance(until_s) == []
        assert engine.now_s == until_s
    assert engine.progress("j") == 1
    [state] = engine.advance(math.inf)
    assert state.end_s == engine.now_s == finish_s
    assert engine.result() == want
    assert engine.advance(finish_s + 1.0) == [] and engine.now_s == finish_s + 1.0
    assert engine.advance(math.inf) == [] and engine.now_s == finish_s + 1.0
    idle = FlowEngine(g, uniform(g))
    assert idle.advance(5.0) == [] and idle.now_s == 5.0
    assert idle.advance(math.inf) == [] and idle.now_s == 5.0


# -- misuse ----------------------------------------------------------------------------------------

def test_misuse_fails_with_the_offending_value():
    """A start before now_s, a name still running, an unknown name, an unknown machine and a clock
    going backwards are refused, naming the value; a finished job's name may be reused."""
    g = fat_tree(4)
    engine = FlowEngine(g, uniform(g))
    spec = SimJob("j", SHARED, "ring", (SIZE,), 0.0, 1)
    engine.add(spec)
    assert engine.advance(0.01) == []
    with pytest.raises(JobError, match=r"start_s 0\.0 .*now_s = 0\.01"):
        engine.add(SimJob("k", ELSEWHERE, "ring", (SIZE,), 0.0, 1))
    with pytest.raises(JobError, match="'j' is already running"):
        engine.add(SimJob("j", ELSEWHERE, "ring", (SIZE,), 0.0, 1, start_s=0.02))
    with pytest.raises(JobError, match="no running job 'nope'; running: j"):
        engine.remove("nope")
    with pytest.raises(JobError, match="no running job 'nope'"):
        engine.progress("nope")
    with pytest.raises(TopologyError, match="'h99' is not a machine"):
        engine.add(SimJob("k", ("h99",), "ring", (SIZE,), 0.0, 1, start_s=0.02))
    with pytest.raises(JobError, match=r"cannot advance to 0\.005"):
        engine.advance(0.005)
    with pytest.raises(JobError, match="still running"):
        engine.result()
    [state] = engine.advance(math.inf)
    assert state.job == "j" and state.finished
    with pytest.raises(JobError, match="no running job 'j'; running: none"):
        engine.remove("j")
    engine.add(SimJob("j", ELSEWHERE, "ring", (SIZE,), 0.0, 1, start_s=engine.now_s))
    assert [s.job for s in engine.advance(math.inf)] == ["j"]
