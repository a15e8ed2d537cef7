"""A job's time shift kept against a common origin (``jobs.phase``, spec §5.4 and §5.3 [REC]): the
one-time wait, the phase error of every iteration, and re-alignment only after a window of drift."""

from __future__ import annotations

import pytest

from jobs.phase import PhaseKeeper, drift_threshold_s, phase_error_s


def test_the_first_wait_is_the_specs_one_time_sleep():
    """§5.4: d = (φ − (next_start mod T)) mod T with φ = (origin + shift) mod T; the start is then aligned."""
    k = PhaseKeeper(origin_s=10.0, shift_s=0.3, period_s=1.0)
    assert k.wait_s(12.45) == pytest.approx(0.85)  # aligned instants ... 12.3, 13.3: wait until 13.3
    assert k.errors_s == [pytest.approx(0.0)]
    k2 = PhaseKeeper(origin_s=10.0, shift_s=0.3, period_s=1.0)
    assert k2.wait_s(10.3) == 0.0  # already on an aligned instant: no whole-period wait


def test_phase_errors_are_wrapped_to_half_a_period_either_side():
    assert phase_error_s(13.4, 10.3, 1.0) == pytest.approx(0.1)
    assert phase_error_s(13.2, 10.3, 1.0) == pytest.approx(-0.1)
    assert phase_error_s(13.8, 10.3, 1.0) == pytest.approx(-0.5)  # [-T/2, T/2)


def test_the_drift_threshold_is_2_ms_or_2_percent_of_the_period():
    assert drift_threshold_s(0.05) == 0.002 and drift_threshold_s(0.5) == pytest.approx(0.01)
    assert PhaseKeeper(0.0, 0.0, 0.5).threshold_s == pytest.approx(0.01)


def test_noise_within_the_threshold_costs_no_wait():
    """Errors within the threshold are recorded and never corrected."""
    k = PhaseKeeper(0.0, 0.0, 1.0)
    starts = [0.0] + [i + (0.015 if i % 2 else -0.015) for i in range(1, 30)]
    waits = [k.wait_s(t) for t in starts]
    assert waits == [0.0] * 30 and k.realignments == 0
    assert max(abs(e) for e in k.errors_s[1:]) == pytest.approx(0.015)


def test_a_job_that_drifts_is_realigned_once_a_window_of_iterations_erred():
    """A job 5 ms slower than its period: past 20 ms of error from the 5th iteration on, realigned at the
    14th (ten in a row beyond it), its error 0 after the wait, then counting again."""
    k = PhaseKeeper(0.0, 0.0, 1.0, window=10)
    t, waits = 0.0, []
    for _ in range(40):
        w = k.wait_s(t)
        waits.append(w)
        t += w + 1.005
    realigned = [i for i, w in enumerate(waits) if w > 0]
    assert realigned == [14, 28] and k.realignments == 2
    assert waits[14] == pytest.approx(1.0 - 0.070)  # late by 70 ms: wait for the next aligned instant
    assert k.errors_s[14] == pytest.approx(0.0, abs=1e-9)
    assert k.summary()["realignments"] == 2 and k.summary()["max_abs_error_s"] == pytest.approx(0.065)  # the 13th


def test_a_keeper_rejects_a_period_that_is_not_positive():
    with pytest.raises(ValueError, match="period_s"):
        PhaseKeeper(0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="window"):
        PhaseKeeper(0.0, 0.0, 1.0, window=0)


def test_a_shift_file_takes_effect_after_its_guard(tmp_path):
    """A follower reads the job's shift file at every iteration, and applies it from the first iteration
    starting ``guard_s`` after it was written, so ranks that see it at different iterations agree."""
    from jobs.phase import ShiftFollower, write_shift

    path = str(tmp_path / "shift.json")
    follower = ShiftFollower(path)
    assert follower.wait_s(99.0) == 0.0 and follower.record() is None  # no file yet
    write_shift(path, PhaseKeeper(origin_s=100.0, shift_s=0.3, period_s=1.0), written_s=100.0, guard_s=0.5)
    assert follower.wait_s(100.2) == 0.0 and follower.keeper is None  # read, not yet in effect
    assert follower.wait_s(100.6) == pytest.approx(0.7)  # the first wait: to 101.3
    assert follower.record()["first"] is True
    assert ShiftFollower(None).wait_s(5.0) == 0.0


def test_a_shifted_jobs_figures_count_the_iterations_beyond_the_threshold():
    """From a rank's records (dilated x2): the first wait's iteration is not counted; of the others one erred
    beyond its 40 ms (wall) threshold."""
    from types import SimpleNamespace

    from jobs.phase import phase_figures

    def rec(i, error, first=False):
        return SimpleNamespace(iteration=i, phase={"shift_s": 0.2, "error_s": error, "threshold_s": 0.04,
                                                   "realignments": 0, "first": first, "stretch": 1.01})

    records = [rec(2, 0.03), rec(0, 0.5, first=True), rec(1, -0.05), rec(3, 0.01)]
    figures = phase_figures(records, dilation=2.0)
    assert figures["phase_errors_beyond"] == 1 and figures["phase_error_max_s"] == pytest.approx(0.025)
    assert figures["pace_stretch"] == 1.01 and figures["time_shift_s"] == pytest.approx(0.1)
    assert phase_figures([SimpleNamespace(iteration=0, phase=None)])["phase_errors_beyond"] is None
    k = PhaseKeeper(0.0, 0.0, 1.0, threshold_s=0.02, window=100)
    for t in (0.0, 1.01, 2.03, 3.05):
        k.wait_s(t)
    assert k.summary()["beyond"] == 2 and k.summary()["stretch"] == 1.0
