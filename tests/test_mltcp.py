"""MLTCP's fluid model (``sim/mltcp.py``) against ``docs/resolutions.md`` (Cassini) §6.3 and its §10 reference.

The §6.3 numbers are checked on the exact model; the spec's time-stepped reference ``mltcp_fluid`` (copied
verbatim below) is run at its own dt = 0.01 ms on other settings, with 30 iterations instead of 60 to keep
the file near 2 s on a busy 2-core machine.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO

from common.errors import ConfigError
from sim.mltcp import (
    FluidJob,
    MltcpParams,
    iterations_to_converge,
    shift_iterations_to_interleave,
    shift_ms,
    simulate,
)

CAPACITY_GBPS = 50.0
ITER_MS = 100.0
COMM_FRACTION = 0.4
COMM_MS = COMM_FRACTION * ITER_MS


# --- the spec's reference (§10), verbatim; noqa marks only its one-line statements ---

def mltcp_fluid(n_jobs=2, T=100.0, a=0.4, C=50.0, S=1.0, I=1.0, gamma=1.0, mltcp=True,  # noqa: E741
                offsets=(0.0, 1.0), iters=60, dt=0.01):
    """Each job computes (1-a)T ms, then sends a*T*C bits; during overlap the link is shared
    in proportion to F(b)^gamma with F(b) = S*b + I (b = this iteration's sent fraction).
    Returns per-job lists of iteration durations (ms)."""
    B = a * T * C / 1000.0                              # Gbit per iteration
    jobs = [dict(left=(1 - a) * T + offsets[k], sent=0.0, comm=False, ends=[]) for k in range(n_jobs)]
    t = 0.0
    while min(len(j['ends']) for j in jobs) < iters:
        act = [j for j in jobs if j['comm']]
        if act:
            w = [((S * j['sent'] / B + I) ** gamma) if mltcp else 1.0 for j in act]
            for j, wi in zip(act, w):  # noqa: B905
                j['sent'] += C * wi / sum(w) * dt / 1000.0
        for j in jobs:
            if not j['comm']:
                j['left'] -= dt
                if j['left'] <= 0: j['comm'], j['sent'] = True, 0.0  # noqa: E701
            elif j['sent'] >= B:
                j['comm'], j['left'] = False, (1 - a) * T; j['ends'].append(t)  # noqa: E702
        t += dt
    return [[e2 - e1 for e1, e2 in zip(j['ends'], j['ends'][1:])] for j in jobs]  # noqa: B905

def iters_to_converge(durs, T=100.0, tol=0.01, hold=5):
    for k in range(len(durs[0]) - hold):
        if all(abs(d[m] - T) <= tol * T for d in durs for m in range(k, k + hold)): return k  # noqa: E701
    return None


# --- helpers ---

def assert_close(ours, theirs, abs_ms):
    """Per-job duration lists of the same shape, equal within abs_ms."""
    assert [len(job) for job in ours] == [len(job) for job in theirs]
    for our_job, their_job in zip(ours, theirs, strict=True):
        assert our_job == pytest.approx(their_job, abs=abs_ms)


def identical_jobs(offsets_ms, comm_fraction=COMM_FRACTION, iter_ms=ITER_MS, capacity_gbps=CAPACITY_GBPS):
    """Jobs of the §6.3 kind, one per offset."""
    return [FluidJob.from_fraction(iter_ms, comm_fraction, capacity_gbps, offset) for offset in offsets_ms]


def section_6_3(params, n_iterations=59):
    """The §6.3 setting: two identical jobs, 1 ms apart (59 durations = the reference's iters=60)."""
    return simulate(identical_jobs((0.0, 1.0)), CAPACITY_GBPS, params, n_iterations)


# --- §6.3: the regression targets ---

def test_fair_sharing_stays_at_139_ms():
    """Fair sharing never separates the two jobs: every iteration takes T + aT - offset = 139 ms."""
    durations = section_6_3(MltcpParams.fair())
    assert all(d == pytest.approx(139.0, abs=1e-9) for job in durations for d in job)


@pytest.mark.parametrize(("slope", "iterations"), [(1.0, 10), (2.0, 6), (4.0, 4)])
def test_mltcp_converges_after_the_spec_iteration_counts(slope, iterations):
    """MLTCP with (S, I) = (1, 1), (2, 1), (4, 1) interleaves after 10, 6, 4 iterations, ending at 100 ms."""
    durations = section_6_3(MltcpParams(slope, 1.0))
    assert iterations_to_converge(durations, ITER_MS) == iterations
    assert [job[-1] for job in durations] == pytest.approx([100.0, 100.0], abs=1e-6)


def test_the_first_mltcp_iteration_matches_its_hand_derivation():
    """S = 2, I = 1: the leader's second iteration takes 132.5 ms, as derived by hand.

    Shares are constant between events for gamma = 1 and equal sizes (rates C F_k / sum F). Iteration 1:
    the leader sends 1 ms alone, then 39 ms of link at share 1.05/2.05, ending at 61 + 76.142857; the
    trailer ends at 140 (the link was busy from 60). Iteration 2: the leader starts at 197.142857, sends
    2.857143 alone, then 37.142857 at share 1.142857/2.142857 from 200: it ends at 269.642857.
    """
    durations = section_6_3(MltcpParams(2.0, 1.0), n_iterations=1)
    assert durations[0] == pytest.approx([132.5], abs=1e-9)


@pytest.mark.parametrize(("slope", "iterations"), [(1.0, 12), (2.0, 8), (4.0, 6)])
def test_the_shift_equation_reaches_99_percent_of_aT_after_the_spec_counts(slope, iterations):
    """The §6.2 shift equation from a 1 ms offset reaches 0.99 aT after 12, 8, 6 iterations."""
    assert shift_iterations_to_interleave(1.0, COMM_MS, MltcpParams(slope, 1.0)) == iterations


def test_the_shift_is_the_spec_formula_for_gamma_1():
    """With gamma = 1 and no cap, shift_ms is S D (aT - D) / (aT I + D S), and 0 without overlap."""
    for slope, intercept in [(1.0, 1.0), (4.0, 1.0), (0.5, 2.0)]:
        params = MltcpParams(slope, intercept)
        for offset in (0.0, 0.5, 3.0, 20.0, 39.9):
            expected = slope * offset * (COMM_MS - offset) / (COMM_MS * intercept + offset * slope)
            assert shift_ms(offset, COMM_MS, params) == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert shift_ms(COMM_MS, COMM_MS, params) == 0.0
        assert shift_ms(55.0, COMM_MS, params) == 0.0


# --- symmetry, fair sharing as a special case, the cap ---

def test_exact_symmetry_never_separates():
    """Two jobs with no offset stay fully overlapped (2aT + (1 - a)T = 140 ms); the shift equation stays at 0."""
    params = MltcpParams(4.0, 1.0)
    durations = simulate(identical_jobs((0.0, 0.0)), CAPACITY_GBPS, params, 40)
    assert all(d == pytest.approx(140.0, abs=1e-9) for job in durations for d in job)
    assert iterations_to_converge(durations, ITER_MS) is None
    assert shift_iterations_to_interleave(0.0, COMM_MS, params) is None
    assert shift_iterations_to_interleave(1.0, COMM_MS, MltcpParams.fair()) is None


def test_slope_0_is_fair_sharing_whatever_the_intercept_and_gamma():
    """slope = 0 gives the same durations as MltcpParams.fair(): fair sharing is not a separate code path."""
    jobs = identical_jobs((0.0, 3.0, 11.0), comm_fraction=0.3)
    fair = simulate(jobs, CAPACITY_GBPS, MltcpParams.fair(), 10)
    assert_close(simulate(jobs, CAPACITY_GBPS, MltcpParams(0.0, 3.0, gamma=0.5), 10), fair, 1e-9)


def test_a_cap_bounds_the_aggression():
    """cap = I is fair sharing, cap >= F(1) changes nothing, a cap in between converges more slowly."""
    jobs = identical_jobs((0.0, 1.0))
    free = simulate(jobs, CAPACITY_GBPS, MltcpParams(4.0, 1.0), 30)
    assert_close(simulate(jobs, CAPACITY_GBPS, MltcpParams(4.0, 1.0, cap=1.0), 30),
                 simulate(jobs, CAPACITY_GBPS, MltcpParams.fair(), 30), 1e-9)
    assert_close(simulate(jobs, CAPACITY_GBPS, MltcpParams(4.0, 1.0, cap=5.0), 30), free, 1e-9)
    assert MltcpParams(4.0, 1.0, cap=3.0).factor(0.75) == 3.0
    capped = simulate(jobs, CAPACITY_GBPS, MltcpParams(4.0, 1.0, cap=2.0), 30)
    assert iterations_to_converge(free, ITER_MS) < iterations_to_converge(capped, ITER_MS)


@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0])
def test_shares_depend_on_f_only_up_to_a_factor(gamma):
    """Scaling slope, intercept and cap by one factor changes no duration (capped or not, any gamma)."""
    jobs = identical_jobs((0.0, 2.0, 7.0), comm_fraction=0.3)
    for cap in (None, 2.5):
        base = simulate(jobs, CAPACITY_GBPS, MltcpParams(4.0, 1.0, gamma, cap), 15)
        scaled = simulate(jobs, CAPACITY_GBPS, MltcpParams(12.0, 3.0, gamma, None if cap is None else 3 * cap), 15)
        assert_close(scaled, base, 1e-9)


def test_durations_scale_with_time_and_not_with_capacity():
    """Doubling every time doubles every duration; a 4x faster link carrying 4x the bytes changes nothing."""
    params = MltcpParams(2.0, 1.0, gamma=0.5, cap=2.5)
    base = simulate(identical_jobs((0.0, 2.0, 7.0), comm_fraction=0.3), CAPACITY_GBPS, params, 15)
    slow = simulate(identical_jobs((0.0, 4.0, 14.0), comm_fraction=0.3, iter_ms=2 * ITER_MS), CAPACITY_GBPS, params, 15)
    assert_close(slow, [[2 * d for d in job] for job in base], 1e-9)
    fast = simulate(identical_jobs((0.0, 2.0, 7.0), comm_fraction=0.3, capacity_gbps=4 * CAPACITY_GBPS),
                    4 * CAPACITY_GBPS, params, 15)
    assert_close(fast, base, 1e-9)


def test_a_job_alone_runs_at_its_dedicated_link_time():
    """One job on the link takes exactly compute + transfer per iteration, whatever F."""
    job = FluidJob.from_fraction(ITER_MS, COMM_FRACTION, CAPACITY_GBPS, offset_ms=7.0)
    assert (job.compute_ms, job.comm_bytes) == pytest.approx((60.0, 2.5e8))
    assert simulate([job], CAPACITY_GBPS, MltcpParams(4.0, 1.0), 3) == [pytest.approx([100.0] * 3, abs=1e-9)]


# --- agreement with the spec's reference ---

REFERENCE_CASES = {
    "3 jobs, a = 0.3": dict(n_jobs=3, a=0.3, S=2.0, offsets=(0.0, 2.0, 5.0)),
    "a = 0.25": dict(a=0.25, S=4.0, offsets=(0.0, 3.0)),
    "gamma = 0.5": dict(gamma=0.5, S=4.0, offsets=(0.0, 2.0)),
    "3 jobs, gamma = 0.5, a = 0.2": dict(n_jobs=3, a=0.2, gamma=0.5, S=8.0, offsets=(0.0, 4.0, 9.0)),
    "a = 0.6, cannot interleave": dict(a=0.6, S=2.0, offsets=(0.0, 3.0)),
}


def simulate_like_reference(case, iters):
    """simulate() on a reference case (identical jobs, I = 1): the reference's iters - 1 durations."""
    jobs = identical_jobs(case["offsets"][:case.get("n_jobs", 2)], comm_fraction=case.get("a", 0.4))
    return simulate(jobs, CAPACITY_GBPS, MltcpParams(case["S"], 1.0, gamma=case.get("gamma", 1.0)), iters - 1)


@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_simulate_agrees_with_the_reference(name):
    """On other settings the exact model and the reference (dt = 0.01 ms, 30 iterations) agree within 5 dt."""
    case, iters = REFERENCE_CASES[name], 30
    reference = mltcp_fluid(iters=iters, **case)
    ours = simulate_like_reference(case, iters)
    assert_close(ours, [job[:iters - 1] for job in reference], 0.05)
    assert iterations_to_converge(ours, ITER_MS) == iters_to_converge(reference)


def test_the_reference_converges_onto_simulate_as_dt_shrinks():
    """The reference's error against the exact model is O(dt): 5x smaller dt, at least 3x closer (gamma = 0.5)."""
    case, iters = REFERENCE_CASES["gamma = 0.5"], 8
    ours = simulate_like_reference(case, iters)

    def error_ms(dt):
        reference = mltcp_fluid(iters=iters, dt=dt, **case)
        return max(abs(r - o) for ref_job, our_job in zip(reference, ours, strict=True)
                   for r, o in zip(ref_job, our_job, strict=False))

    assert error_ms(0.002) < error_ms(0.01) / 3


# --- convergence metric, errors, purity ---

def test_iterations_to_converge_counts_the_last_window_and_per_job_ideals():
    """The last full window counts, and each job can have its own ideal time."""
    durations = [[130.0, 100.0, 100.5], [90.0, 50.0, 50.2]]
    assert iterations_to_converge(durations, [100.0, 50.0], hold=2) == 1
    assert iterations_to_converge(durations, [100.0, 50.0], hold=3) is None
    assert iterations_to_converge(durations, 100.0, hold=2) is None


@pytest.mark.parametrize("intercept", [0.0, -1.0])
def test_a_non_positive_intercept_is_rejected(intercept):
    """intercept <= 0 raises ConfigError naming the intercept (a starting flow would starve, §6.4 item 4)."""
    with pytest.raises(ConfigError, match="intercept must be > 0"):
        MltcpParams(slope=1.0, intercept=intercept)


@pytest.mark.parametrize(("kwargs", "field"), [
    (dict(slope=-1.0, intercept=1.0), "slope"),
    (dict(slope=1.0, intercept=1.0, gamma=0.0), "gamma"),
    (dict(slope=1.0, intercept=2.0, cap=1.0), "cap"),
])
def test_other_bad_params_are_rejected(kwargs, field):
    """A negative slope, gamma <= 0 or a cap below the intercept raise ConfigError naming the field."""
    with pytest.raises(ConfigError, match=field):
        MltcpParams(**kwargs)


def test_bad_jobs_and_links_are_rejected():
    """No job, a capacity <= 0, no bytes or a negative compute time raise ConfigError."""
    params = MltcpParams(1.0, 1.0)
    with pytest.raises(ConfigError, match="at least one job"):
        simulate([], CAPACITY_GBPS, params, 3)
    with pytest.raises(ConfigError, match="capacity"):
        simulate(identical_jobs((0.0,)), 0.0, params, 3)
    with pytest.raises(ConfigError, match="comm_bytes"):
        FluidJob(compute_ms=60.0, comm_bytes=0.0)
    with pytest.raises(ConfigError, match="compute_ms"):
        FluidJob(compute_ms=-1.0, comm_bytes=1.0)


def test_the_module_is_pure():
    """Importing sim.mltcp loads no experiment, emulator or placement module (checked in a fresh interpreter)."""
    code = ("import sys, sim.mltcp; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('experiment', 'emulator', 'placement', 'mininet', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=60, cwd=REPO)
    assert out.stdout.strip() == "[]"
