"""Up-phase timelines (``experiment.timeline``) from either back end's iteration records."""

from __future__ import annotations

import csv

import pytest

from experiment.timeline import COLUMNS, plot_timelines, up_phases, write_timeline_csv
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
