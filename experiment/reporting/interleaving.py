"""Whether jobs that share links interleave: per iteration, how much of a job's Up phase another job
sharing its links spends in its own Up phase, and from which iteration that stays small
(``docs/resolutions.md`` Cassini §6.4 item 6: "iterations until interleaving ... Up-phase overlap below
y%"; §8.6).

Jobs *share links* when one ran while the other did (first iteration's start to last one's end) on a
directed link of a path between two of the other's machines (the controller's routes,
:func:`topo.routing.ecmp_path`; those paths cover every link a collective uses): :func:`shared_with`.
A job's Up phase in iteration ``i`` is ``[up_start_s, end_s]`` of its :class:`experiment.reporting.timeline.UpPhase`
(its first rank's end of compute to its last rank's end of communication). Its *overlap*
(``UpPhase.up_overlap``, :func:`with_overlaps`) is the part of that interval covered by the Up phases of
the jobs it shares links with, the union of theirs counted once: 0 when they interleave perfectly, 1
when it never communicates alone; None for a job that shares no link. It is *interleaved from*
iteration ``k``, the first from which ``hold`` consecutive iterations overlap at most ``threshold``,
as :func:`sim.mltcp.iterations_to_converge` counts convergence of iteration times; None if no such
window.

Every run annotates its policies' timelines so (:func:`annotate`): ``timeline.csv`` has the
``up_overlap`` column, ``profiles.json`` the ``shared_with`` lists, and the report an interleaving
table. Pure; O((N + M) log M) per job for its N iterations and the M iterations of the jobs it shares
with, and O(J**2 M**2 d) to find who shares with whom (J jobs of M machines, paths of d hops).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from topo.routing import EcmpRoutes, path_links

OVERLAP_THRESHOLD = 0.05
"""The overlap at most which an iteration counts as interleaved (5% of its Up phase)."""
HOLD = 5
"""Consecutive interleaved iterations that make a job interleaved (as §6.3's convergence counts)."""


@dataclasses.dataclass(frozen=True)
class Interleaving:
    """One job's overlap with the jobs it shares links with.

    Attributes:
        job: the job.
        overlap: per iteration, in iteration order, the overlapped fraction of its Up phase.
        interleaved_from: the first iteration of ``hold`` in a row with overlap at most the threshold
            (None: none).
    """

    job: str
    overlap: tuple[float, ...]
    interleaved_from: int | None

    @property
    def mean(self) -> float:
        """Mean overlap over its iterations."""
        return sum(self.overlap) / len(self.overlap)


def shared_with(g, machines_by_job: Mapping[str, Sequence[str]], phases: Iterable) -> dict[str, list[str]]:
    """For every job of ``phases``, the other jobs that shared links with it (module docstring); jobs
    without machines share nothing."""
    span: dict[str, list[float]] = {}
    for ph in phases:
        lo, hi = span.get(ph.job, (ph.start_s, ph.end_s))
        span[ph.job] = [min(lo, ph.start_s), max(hi, ph.end_s)]
    routes = EcmpRoutes(g)
    links = {}
    for job in span:
        ms = sorted(set(machines_by_job.get(job, ())))
        links[job] = {link for a in ms for b in ms if a != b for link in path_links(routes.path(a, b))}
    return {job: sorted(other for other in span if other != job and links[job] & links[other]
                        and span[other][0] < span[job][1] and span[job][0] < span[other][1])
            for job in sorted(span)}


def _union(intervals: Iterable[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Disjoint sorted intervals covering ``intervals`` (starts and ends in two lists)."""
    starts: list[float] = []
    ends: list[float] = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if ends and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


def _covered(starts: Sequence[float], ends: Sequence[float], lo: float, hi: float) -> float:
    """Length of ``[lo, hi]`` inside the disjoint sorted intervals."""
    total = 0.0
    i = max(0, bisect.bisect_right(starts, lo) - 1)
    while i < len(starts) and starts[i] < hi:
        total += max(0.0, min(hi, ends[i]) - max(lo, starts[i]))
        i += 1
    return total


def with_overlaps(phases: Sequence, shared: Mapping[str, Sequence[str]]) -> tuple:
    """``phases`` (:class:`experiment.reporting.timeline.UpPhase`, in their order) with ``up_overlap`` set: the part of
    each Up phase the jobs of ``shared[job]`` spend in theirs (None for a job sharing with none of them)."""
    by_job: dict[str, list] = {}
    for ph in phases:
        by_job.setdefault(ph.job, []).append(ph)
    unions = {job: _union((ph.up_start_s, ph.end_s) for o in shared.get(job, ()) for ph in by_job.get(o, ()))
              for job in by_job if any(o in by_job for o in shared.get(job, ()))}
    out = []
    for ph in phases:
        u = unions.get(ph.job)
        overlap = None if u is None else (
            _covered(*u, ph.up_start_s, ph.end_s) / (ph.end_s - ph.up_start_s) if ph.end_s > ph.up_start_s else 0.0)
        out.append(dataclasses.replace(ph, up_overlap=overlap))
    return tuple(out)


def annotate(g, placements: Iterable[Mapping], phases: Sequence) -> tuple[tuple, dict[str, list[str]]]:
    """A policy's timeline with its overlaps, and who shared links with whom, given its ``placements.json``
    entries (each job where it last started)."""
    from experiment.reporting.measurements import StartRecord

    machines = {(r := StartRecord.from_dict(p)).job: r.machines_by_rank for p in placements}
    shared = shared_with(g, machines, phases)
    return with_overlaps(phases, shared), shared


def interleaved_from(overlap: Sequence[float], threshold: float = OVERLAP_THRESHOLD, hold: int = HOLD) -> int | None:
    """The first index of ``hold`` consecutive overlaps at most ``threshold`` (None: no such window)."""
    run = 0
    for i, x in enumerate(overlap):
        run = run + 1 if x <= threshold else 0
        if run == hold:
            return i - hold + 1
    return None


def interleaving(phases: Iterable, threshold: float = OVERLAP_THRESHOLD, hold: int = HOLD) -> tuple[Interleaving, ...]:
    """Every job of ``phases`` with overlaps (:func:`with_overlaps`), by name: its overlap per iteration and
    the iteration from which it is interleaved (module docstring)."""
    by_job: dict[str, list] = {}
    for ph in phases:
        if ph.up_overlap is not None:
            by_job.setdefault(ph.job, []).append(ph)
    out = []
    for job in sorted(by_job):
        its = sorted(by_job[job], key=lambda ph: ph.iteration)
        overlap = tuple(ph.up_overlap for ph in its)
        first = interleaved_from(overlap, threshold, hold)
        out.append(Interleaving(job, overlap, None if first is None else its[first].iteration))
    return tuple(out)
