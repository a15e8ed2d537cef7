"""Up-phase timelines (``experiment.reporting.timeline``) from either back end's iteration records."""

from __future__ import annotations

import csv

import pytest

from experiment.reporting.report import marks_lines
from experiment.reporting.timeline import (
    COLUMNS,
    UpPhase,
    mean_marks,
    plot_timelines,
    read_timeline_csv,
    up_phases,
    write_timeline_csv,
)
from jobs.records import IterationRecord
from sim.flowsim import SimIterationRecord


def test_an_iteration_spans_its_ranks_first_start_first_up_and_last_end():
    recs = [SimIterationRecord("a", 0, 0, 1.0, 0.5, 0.25, (0.25,)),
            SimIterationRecord("a", 1, 0, 1.1, 0.5, 0.1, (0.1,)),
            SimIterationRecord("b", 0, 0, 1.2, 0.2, 0.3, (0.3,))]
    (a, b) = up_phases(recs)
    assert (a.job, a.start_s, a.up_start_s, a.end_s) == ("a", 0.0, pytest.approx(0.5), pytest.approx(0.75))
    assert (b.start_s, b.up_start_s, b.end_s) == (pytest.approx(0.2), pytest.approx(0.4), pytest.approx(0.7))


def test_emulator_records_are_wall_clock_over_the_dilation(tmp_path):
    def rec(it, start):
        return IterationRecord("j", 0, 2, it, start, 0.3, 0.6, 100, 0.9, "replay", "ring")
    phases = up_phases([rec(0, 1000.0), rec(1, 1000.9)], dilation=3.0)
    assert [(p.start_s, p.up_start_s, p.end_s) for p in phases] == [
        (0.0, pytest.approx(0.1), pytest.approx(0.3)), (pytest.approx(0.3), pytest.approx(0.4), pytest.approx(0.6))]
    path = tmp_path / "timeline.csv"
    write_timeline_csv(str(path), phases)
    rows = list(csv.DictReader(path.open()))
    assert tuple(rows[0]) == COLUMNS and len(rows) == 2
    assert plot_timelines(str(tmp_path), {"p": phases}) == [str(tmp_path / "timelines.png")]
    assert (tmp_path / "timelines.png").stat().st_size > 1000
    assert up_phases([]) == () and plot_timelines(str(tmp_path), {"p": ()}) == []


def test_an_iterations_marks_sum_over_the_ranks_that_measured_them():
    """A job's iteration has the sum of its ranks' ECN marks (ranks without a measure add nothing); an
    iteration no rank measured, and the simulator's records (no such field), have none."""
    def rec(rank, it, marks):
        return IterationRecord("j", rank, 3, it, 1000.0 + it, 0.3, 0.6, 100, 0.9, "replay", "ring", ecn_marks=marks)
    phases = up_phases([rec(0, 0, 4), rec(1, 0, None), rec(2, 0, 7), rec(0, 1, None), rec(1, 1, None),
                        rec(0, 2, 0), rec(1, 2, 0)])
    assert [p.ecn_marks for p in phases] == [11, None, 0]
    (sim,) = up_phases([SimIterationRecord("a", 0, 0, 1.0, 0.5, 0.25, (0.25,))])
    assert sim.ecn_marks is None


def test_timeline_csv_keeps_the_marks_and_older_files_read_as_unmeasured(tmp_path):
    """``timeline.csv`` round-trips each iteration with its marks (an empty cell: not measured); a file
    written before the column reads back with every iteration's marks unmeasured."""
    phases = (UpPhase("a", 0, 0.0, 0.25, 0.5, 12), UpPhase("b", 0, 0.1, 0.3, 0.6, None),
              UpPhase("a", 1, 0.55, 0.8, 1.05, 0))
    path = tmp_path / "timeline.csv"
    write_timeline_csv(str(path), phases)
    assert [r["ecn_marks"] for r in csv.DictReader(path.open())] == ["12", "", "0"]
    assert read_timeline_csv(str(path)) == phases
    old = tmp_path / "old.csv"
    old.write_text("job,iteration,start_s,up_start_s,end_s\na,0,0.0,0.25,0.5\n")
    assert read_timeline_csv(str(old)) == (UpPhase("a", 0, 0.0, 0.25, 0.5),)


def test_marks_per_iteration_are_drawn_and_reported_where_measured(tmp_path):
    """With marks, the plot draws and the report has one line of each job's mean marks per iteration
    (over the iterations that measured them); without, no line."""
    phases = (UpPhase("a", 0, 0.0, 0.25, 0.5, 12), UpPhase("a", 1, 0.55, 0.8, 1.05, 3),
              UpPhase("b", 0, 0.1, 0.3, 0.6, None), UpPhase("b", 1, 0.65, 0.85, 1.15, 0.4))
    assert mean_marks(phases) == {"a": 7.5, "b": 0.4}
    assert plot_timelines(str(tmp_path), {"p": phases}) == [str(tmp_path / "timelines.png")]
    (line,) = marks_lines(phases)
    assert line.endswith(": a 7.5, b 0.4"), line
    assert marks_lines([UpPhase("a", 0, 0.0, 0.25, 0.5)]) == []
