"""Up-phase overlap of jobs that share links, and the iteration from which they interleave
(``experiment/reporting/interleaving.py``), on hand-made timelines and on the simulator's runs of
``experiments/cassini.yaml``."""

from __future__ import annotations

import pytest

from experiment.reporting.interleaving import Interleaving, interleaved_from, interleaving, shared_with, with_overlaps
from experiment.reporting.timeline import UpPhase, read_timeline_csv, write_timeline_csv
from topo.leaf_spine import leaf_spine


def overlaps(phases, shared, **kw):
    """Each job's interleaving, from its phases annotated with the overlaps of the jobs ``shared`` names."""
    return interleaving(with_overlaps(phases, shared), **kw)


def phases(job, ups, period=10.0, compute=6.0):
    """Iterations of ``period`` with an Up phase from ``compute`` + offset to the end, one per offset."""
    return [UpPhase(job, i, i * period, i * period + compute + off, (i + 1) * period + off)
            for i, off in enumerate(ups)]


def test_overlap_is_the_covered_part_of_the_up_phase():
    """b's Up phases cover all, half, then none of a's (4 s each): overlaps 1, 0.5, 0."""
    a = phases("a", [0.0, 0.0, 0.0])
    b = [UpPhase("b", 0, 0.0, 6.0, 10.0), UpPhase("b", 1, 10.0, 18.0, 20.0), UpPhase("b", 2, 20.0, 20.5, 26.0)]
    (ia, ib) = overlaps([*a, *b], {"a": ["b"], "b": ["a"]}, hold=1)
    assert ia.overlap == pytest.approx((1.0, 0.5, 0.0))
    assert ib.overlap == pytest.approx((1.0, 1.0, 0.0))
    assert ia.interleaved_from == ib.interleaved_from == 2
    assert ia.mean == pytest.approx(0.5)


def test_several_sharers_are_counted_once_where_they_overlap_each_other():
    a = [UpPhase("a", 0, 0.0, 0.0, 10.0)]
    b = [UpPhase("b", 0, 0.0, 2.0, 6.0)]
    c = [UpPhase("c", 0, 0.0, 4.0, 8.0)]
    (ia,) = overlaps([*a, *b, *c], {"a": ["b", "c"]})
    assert ia.overlap == pytest.approx((0.6,))  # [2, 8] of [0, 10]


def test_jobs_sharing_nothing_have_no_overlap_and_unknown_sharers_are_ignored(tmp_path):
    a, b = phases("a", [0.0] * 3), phases("b", [0.0] * 3)
    annotated = with_overlaps([*a, *b], {"a": [], "b": ["x"]})
    assert [ph.up_overlap for ph in annotated] == [None] * 6 and interleaving(annotated) == ()
    write_timeline_csv(str(tmp_path / "t.csv"), with_overlaps([*a, *b], {"a": ["b"]}))
    back = read_timeline_csv(str(tmp_path / "t.csv"))
    assert [ph.up_overlap for ph in back] == [1.0, 1.0, 1.0, None, None, None]


def test_interleaved_from_needs_hold_iterations_in_a_row():
    assert interleaved_from([0.9, 0.0, 0.0, 0.5, 0.0, 0.01, 0.05, 0.0, 0.0], threshold=0.05, hold=5) == 4
    assert interleaved_from([0.0] * 4, hold=5) is None
    assert interleaved_from([0.2] * 10, threshold=0.1, hold=1) is None


def test_a_job_that_interleaves_later_in_the_run_counts_from_its_iteration_number():
    """Iteration numbers, not positions: a timeline starting at iteration 3 reports 3 onwards."""
    a = [UpPhase("a", 3 + i, 10.0 * i, 10.0 * i + 6, 10.0 * i + 10) for i in range(6)]
    b = [UpPhase("b", i, 10.0 * i, 10.0 * i + 2, 10.0 * i + 6) for i in range(6)]
    (ia, _) = overlaps([*a, *b], {"a": ["b"], "b": ["a"]}, hold=2)
    assert ia == Interleaving("a", (0.0,) * 6, 3)


def test_jobs_share_links_on_their_paths_while_both_run():
    """2 leaves of 2 machines: a (h1, h3) and b (h2, h4) cross the same uplinks; c (h1, h2) stays in its
    leaf but shares h1's link with a; d runs after a ended."""
    g = leaf_spine(2, 1, 2)
    ph = [*phases("a", [0.0] * 2), *phases("b", [0.0] * 2), *phases("c", [0.0] * 2),
          UpPhase("d", 0, 30.0, 31.0, 40.0)]
    machines = {"a": ("h1", "h3"), "b": ("h2", "h4"), "c": ("h1", "h2"), "d": ("h1", "h3")}
    assert shared_with(g, machines, ph) == {"a": ["b", "c"], "b": ["a", "c"], "c": ["a", "b"], "d": []}
