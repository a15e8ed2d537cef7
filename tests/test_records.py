"""Per-iteration records (``jobs.records``): their JSON-lines form, written and read back."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jobs.records import IterationRecord, measured_window_s, read_records, write_records


def record(**kw) -> IterationRecord:
    """A replay rank's record of iteration 0."""
    return IterationRecord("j", 1, 2, 0, 1000.0, 0.3, 0.6, 100, 0.9, "replay", "ring", (100,), (0.6,), **kw)


def test_ecn_marks_round_trip_measured_or_not(tmp_path):
    """A record's ECN marks (a count, or None: not measured) come back from its file as written."""
    path = tmp_path / "r.jsonl"
    recs = [record(ecn_marks=17), record(ecn_marks=0), record()]
    write_records(path, recs)
    assert read_records(path) == recs
    assert [json.loads(line)["ecn_marks"] for line in path.read_text().splitlines()] == [17, 0, None]


def test_a_record_written_before_ecn_marks_reads_as_not_measured(tmp_path):
    """A line without the ``ecn_marks`` key (an older run's) reads back with the marks not measured."""
    d = record(ecn_marks=5).to_dict()
    del d["ecn_marks"]
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(d) + "\n")
    (rec,) = read_records(path)
    assert rec.ecn_marks is None and rec == record()


def test_the_measured_window_runs_from_the_first_start_to_the_last_end():
    """Ranks start and end at different times: the window is the earliest start to the latest
    start + iteration time (the CPU and queue samples of a run are taken inside it); no record is
    an error."""
    a = record()  # 1000.0 .. 1000.9
    b = dataclasses.replace(a, rank=0, start_time_s=999.5, iteration_s=0.2)  # 999.5 .. 999.7
    c = dataclasses.replace(a, iteration=1, start_time_s=1000.9, iteration_s=1.1)  # .. 1002.0
    assert measured_window_s([a, b, c]) == (999.5, pytest.approx(1002.0))
    with pytest.raises(ValueError):
        measured_window_s([])
