"""A decision's common line and the pace that moves it (``jobs.pace``), the keeper that follows it
(``jobs.phase``), a worker's follower taking a moved line, and the emulator's feed from records
(``emulator.pacing``)."""

from __future__ import annotations

import json
import os
import time

import pytest

from emulator.pacing import PaceFeed
from jobs.pace import Line, Member, Pace, Paces
from jobs.phase import DriftRule, PhaseKeeper, ShiftFollower, starts_path, write_shift
from placement.base import TimeShift


def test_a_line_reads_by_pieces_and_changes_from_an_instant_on():
    line = Line.starting(10.0)
    assert line.read(10.5) == pytest.approx(0.5) and line.read(9.0) == pytest.approx(-1.0)
    line.change(11.0, stretch=2.0)  # from 11 s on, one line second per two wall seconds
    assert line.read(13.0) == pytest.approx(2.0) and line.stretch(13.0) == 2.0 and line.stretch(10.9) == 1.0
    line.change(13.0, back_s=0.25)  # set back: reads 0.25 less from 13 s on
    assert line.read(13.0) == pytest.approx(1.75) and line.read(15.0) == pytest.approx(2.75)
    assert line.read(12.0) == pytest.approx(1.5)  # the past is as it was
    assert line.since(13.5).pieces == [(13.0, 1.75, 2.0)] and Line(line.to_list()) == line
    line.change(12.0, back_s=1.0)  # not before the last piece: from 13 s
    assert line.read(13.0) == pytest.approx(0.75) and len(line.pieces) == 3


@pytest.mark.parametrize("pieces", [[], [(0.0, 0.0, 0.0)], [(1.0, 0.0, 1.0), (0.0, 0.0, 1.0)], [(0.0, 1.0)]])
def test_a_line_rejects_pieces_that_are_not_a_clock(pieces):
    with pytest.raises(ValueError, match="line: pieces"):
        Line(pieces)


def pace_of_two(window=10, tolerance=0.005):
    return Pace(Line.starting(0.0), {"a": Member(0.0, 1.0, 0.02), "b": Member(0.5, 1.0, 0.02)}, window, tolerance)


def test_the_pace_restretches_to_the_slowest_jobs_median_period():
    """a iterates in 1.00 s and b in 1.10 s: from b's third natural period the line runs at 1.10."""
    pace = pace_of_two()
    for k in range(4):
        pace.started("a", k * 1.0)
    starts_b = [0.5 + 1.1 * k for k in range(4)]
    pace.started("b", starts_b[0])
    changed = []
    for t in starts_b[1:]:
        changed.append(pace.observe("b", t, t))
        pace.started("b", t)
    assert pace.restretches == [(starts_b[3], pytest.approx(1.1))]
    assert changed[-1] and pace.line.stretch(10.0) == pytest.approx(1.1)


def test_a_late_job_sets_the_line_back_and_an_early_one_does_not():
    pace = pace_of_two()
    pace.started("a", 0.0)
    assert not pace.observe("a", 0.99, 0.99)  # early by 10 ms: the keeper waits, the line stays
    pace.started("a", 1.0)
    assert pace.observe("a", 2.05, 2.05)  # late by 50 ms, beyond 20: the line comes to a
    assert pace.moves == [("a", 2.05, pytest.approx(0.05))]
    assert pace.error_s("a", 2.05) == pytest.approx(0.0, abs=1e-12)
    assert pace.error_s("b", 2.55) == pytest.approx(0.0, abs=1e-12)  # b's instants moved as much
    assert pace.error_s("b", 2.5) == pytest.approx(-0.05)  # b, on time before, now early


def test_changes_timed_ahead_are_not_taken_twice():
    """On the emulator a change takes effect a guard later; a start before it was timed against the
    old line and moves it no further."""
    pace = pace_of_two()
    pace.started("a", 0.0)
    assert pace.observe("a", 1.05, at_s=2.6)  # seen late, effective from 2.6 s
    pace.started("a", 1.05)
    assert pace.error_s("a", 2.05) == pytest.approx(0.05)  # before 2.6 s: as late against the old line
    assert not pace.observe("a", 2.05, at_s=3.6)
    assert len(pace.moves) == 1 and pace.error_s("a", 3.05) == pytest.approx(0.0, abs=1e-12)


def test_a_job_that_leaves_no_longer_sets_the_pace():
    pace, paces = pace_of_two(), Paces()
    paces.join(pace, ["a", "b"])
    later = pace_of_two()
    paces.join(later, ["b"])  # a later decision shifted b again
    assert set(pace.members) == {"a"} and paces.of["b"] is later
    paces.leave("a")
    assert not pace.members and not pace.observe("a", 5.0, 5.0)


def test_a_paced_rule_gives_one_line_to_a_decisions_keepers():
    rule = DriftRule()
    keepers, pace = rule.keepers(100.0, [TimeShift("a", 0.0, 0.5), TimeShift("b", 0.25, 0.5)], scale=2.0)
    assert keepers["a"].line is keepers["b"].line is pace.line
    assert keepers["a"].pace is pace and keepers["b"].job == "b" and keepers["b"].follow
    assert pace.members["b"] == Member(0.5, 1.0, pytest.approx(0.02))  # dilated: shift, period, threshold
    unpaced, none = DriftRule(pace=False).keepers(100.0, [TimeShift("a", 0.0, 0.5)])
    assert none is None and not unpaced["a"].follow and unpaced["a"].pace is None
    assert DriftRule(realign=False).keepers(0.0, [TimeShift("a", 0.0, 0.5)])[1] is None


def test_a_following_keeper_waits_when_early_and_never_when_late():
    k = PhaseKeeper(0.0, 0.0, 1.0, threshold_s=0.02, follow=True)
    assert k.wait_s(0.0) == 0.0
    assert k.wait_s(0.99) == 0.0  # within the threshold
    assert k.wait_s(1.95) == pytest.approx(0.05) and k.realignments == 1  # early: to its instant at once
    assert k.wait_s(3.3) == 0.0  # late: the line comes to it
    assert k.errors_s[-1] == pytest.approx(0.3)


def test_a_follower_takes_a_moved_line_and_keeps_its_history(tmp_path):
    path = str(tmp_path / "shift.json")
    k = PhaseKeeper(100.0, 0.0, 1.0, threshold_s=0.02, follow=True)
    write_shift(path, k, written_s=100.0, guard_s=0.0)
    f = ShiftFollower(path)
    assert f.wait_s(100.0) == 0.0 and f.keeper.waits_s == [0.0]
    k.line.change(101.5, back_s=0.2)
    os.utime(path, ns=(1, 1))  # a rewrite within the clock's resolution still differs in mtime
    write_shift(path, k, written_s=101.0, guard_s=0.5)
    assert f.wait_s(101.0) == 0.0 and len(f.keeper.waits_s) == 2  # same keeper, history kept
    assert f.keeper.line == k.line
    assert f.wait_s(102.0) == pytest.approx(0.2)  # the moved line's instant: 102.2
    other = PhaseKeeper(105.0, 0.3, 1.0)
    write_shift(path, other, written_s=105.0, guard_s=0.0)
    assert f.wait_s(105.0) == pytest.approx(0.3) and f.keeper.origin_s == 105.0  # a new decision


def test_the_emulators_feed_moves_the_line_from_rank_0s_starts_and_rewrites_every_shift_file(tmp_path):
    keepers, pace = DriftRule().keepers(1000.0, [TimeShift("a", 0.0, 1.0), TimeShift("b", 0.5, 1.0)],
                                        at_once=False)
    assert keepers["a"].pace is None  # the ranks' keepers do not hold it: the feed does
    files = {j: str(tmp_path / f"{j}.shift.json") for j in "ab"}
    feed = PaceFeed(pace, keepers, files, guard_s=0.5)

    def announce(job, start, wait, first=False, origin=1000.0):
        entry = {"start_time_s": start, "phase": {"origin_s": origin, "wait_s": wait, "first": first}}
        with open(starts_path(files[job]), "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    announce("a", 999.0, 0.0, origin=990.0)  # an older decision's shift: not this line's
    announce("a", 1000.0, 0.0, first=True)
    announce("a", 1001.0, 0.0)
    assert not feed.poll(now_s=1001.1) and not os.path.exists(files["a"])
    announce("a", 1002.1, 0.0)  # late by 100 ms, beyond half the 20 ms threshold
    with open(starts_path(files["a"]), "a", encoding="utf-8") as f:
        f.write('{"start_time_s": 10')  # a line still being written: read next time
    assert feed.poll(now_s=1002.2)
    assert pace.moves == [("a", 1002.7, pytest.approx(0.1))]
    for job in "ab":
        written = json.load(open(files[job], encoding="utf-8"))
        assert Line(written["line"]) == pace.line.since(1002.2 - 4 * 1.0)
        assert written["origin_s"] == 1000.0 and written["shift_s"] == keepers[job].shift_s
    assert not feed.poll(now_s=1002.3)  # nothing new


def test_rank_0s_follower_announces_each_start_under_a_shift(tmp_path):
    path = str(tmp_path / "shift.json")
    origin = time.time() - 1.0  # a 1,000 s period begun 1 s ago: late by 1 s, within twice 20 s, goes at once
    write_shift(path, PhaseKeeper(origin, 0.0, 1000.0), written_s=origin, guard_s=0.0)
    quiet, loud = ShiftFollower(path), ShiftFollower(path, announce=True)
    for f in (quiet, loud):
        f.start_in_phase()
        assert f.keeper.waits_s == [0.0]
    (line,) = open(starts_path(path), encoding="utf-8").read().splitlines()
    entry = json.loads(line)
    assert entry["phase"] == loud.record() and entry["phase"]["first"]
    assert abs(entry["start_time_s"] - time.time()) < 60


def test_a_followers_start_is_the_instant_after_its_sleep_and_its_error_is_that_instants(tmp_path):
    path = str(tmp_path / "shift.json")
    origin = time.time() - 0.95  # a 1 s period begun 0.95 s ago: early by 0.05 s, waits to its instant
    write_shift(path, PhaseKeeper(origin, 0.0, 1.0), written_s=origin, guard_s=0.0)
    f = ShiftFollower(path)
    start = f.start_in_phase()
    (wait,) = f.keeper.waits_s
    assert wait > 0 and start >= origin + 1.0  # slept until the aligned instant, or beyond it
    assert f.record()["error_s"] == f.keeper.error_s(start) >= 0.0  # the overshoot, not the plan's 0
