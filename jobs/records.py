"""Per-iteration timing records of a worker and their JSON-lines files.

Each worker rank appends one JSON object per recorded (non-warm-up) iteration to its own
``records_path``, one line per iteration, written with a single ``write`` and flushed, so a
crashed run keeps every finished iteration. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Iterable

from common.errors import JobError


@dataclasses.dataclass(frozen=True)
class IterationRecord:
    """One training iteration of one rank.

    Attributes:
        job: job name.
        rank: worker rank.
        world: number of workers of the job.
        iteration: 0-based index among recorded iterations (warm-up not counted).
        start_time_s: wall-clock start of the iteration (``time.time()``, seconds since the epoch).
        compute_s: time spent computing (replay: the emulated compute sleep; train: the
            iteration minus the time inside the collective).
        comm_s: time spent inside the collective, summed over buckets.
        bytes: payload bytes allreduced in the iteration (sum of ``bucket_bytes``).
        iteration_s: wall-clock length of the whole iteration.
        mode: ``"replay"`` or ``"train"``.
        collective: allreduce algorithm name.
        bucket_bytes: size of each bucket allreduced, in order.
        bucket_comm_s: time of each bucket's allreduce, in order.
        loss: training loss (train mode), else None.
        param_checksum: sum of all parameters after the step (train mode; equal on every rank
            when the allreduce is exact), else None.
        phase: the job's time shift at this iteration (:meth:`jobs.phase.PhaseKeeper.record`: its
            shift, the wait before the iteration, the phase error of its start, the drift threshold,
            the re-alignments so far, wall seconds), None when the job is not shifted.
        ecn_marks: CE-marked packets that reached the rank over the fabric during the iteration
            (:func:`workers.agent.ce_received`: its TCP connections' received-CE counters, end minus
            start), None where not measured (no ECN on its connections, no TCP connection, the
            torch runtime, a kernel before Linux 6.18). Records written before the field existed
            read back as None.
    """

    job: str
    rank: int
    world: int
    iteration: int
    start_time_s: float
    compute_s: float
    comm_s: float
    bytes: int
    iteration_s: float
    mode: str
    collective: str
    bucket_bytes: tuple[int, ...] = ()
    bucket_comm_s: tuple[float, ...] = ()
    loss: float | None = None
    param_checksum: float | None = None
    phase: dict | None = None
    ecn_marks: int | None = None

    def to_dict(self) -> dict:
        """JSON-serialisable form (tuples become lists)."""
        d = dataclasses.asdict(self)
        d["bucket_bytes"] = list(self.bucket_bytes)
        d["bucket_comm_s"] = list(self.bucket_comm_s)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "IterationRecord":
        """Inverse of :meth:`to_dict`; unknown or missing keys raise :class:`JobError`."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise JobError(f"iteration record has unknown keys {sorted(unknown)}; valid: {sorted(names)}")
        try:
            rec = cls(**d)
        except TypeError as exc:
            raise JobError(f"bad iteration record {d!r}: {exc}") from None
        return dataclasses.replace(rec, bucket_bytes=tuple(rec.bucket_bytes),
                                   bucket_comm_s=tuple(rec.bucket_comm_s))


def append_record(path: str | Path, record: IterationRecord) -> None:
    """Append ``record`` as one JSON line to ``path`` (created if missing)."""
    line = json.dumps(record.to_dict(), separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()


def record_iteration(spec, iteration: int, start_time_s: float, compute_s: float, iteration_s: float,
                     sizes, times, loss: float | None = None, checksum: float | None = None,
                     phase: dict | None = None, ecn_marks: int | None = None) -> None:
    """Append one recorded iteration of the rank described by ``spec`` to its records file.

    ``spec`` is a :class:`workers.launcher.WorkerSpec` (job, rank, world, mode, collective and
    ``records_path`` are read); ``sizes`` and ``times`` are the bytes and the seconds of each
    bucket's allreduce, in order; ``ecn_marks`` the CE-marked packets the rank received in the
    iteration (None: not measured). Shared by both worker runtimes (:mod:`workers.worker`, :mod:`workers.agent`).
    """
    append_record(spec.records_path, IterationRecord(
        job=spec.job, rank=spec.rank, world=spec.world, iteration=iteration, start_time_s=start_time_s,
        compute_s=compute_s, comm_s=sum(times), bytes=sum(sizes), iteration_s=iteration_s,
        mode=spec.mode, collective=spec.collective, bucket_bytes=tuple(sizes), bucket_comm_s=tuple(times),
        loss=loss, param_checksum=checksum, phase=phase, ecn_marks=ecn_marks))


def write_records(path: str | Path, records: Iterable[IterationRecord]) -> None:
    """Write ``records`` to ``path`` as JSON lines, replacing the file."""
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r.to_dict(), separators=(",", ":")) + "\n")


def read_records(path: str | Path) -> list[IterationRecord]:
    """Read a JSON-lines file of records; a malformed line raises :class:`JobError` naming it."""
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(IterationRecord.from_dict(json.loads(line)))
            except (ValueError, JobError) as exc:
                raise JobError(f"{path}:{i}: {exc}") from None
    return out


def read_job_records(paths: Iterable[str | Path]) -> list[IterationRecord]:
    """Read several record files (e.g. one per rank), sorted by ``(job, iteration, rank)``."""
    recs = [r for p in paths for r in read_records(p)]
    return sorted(recs, key=lambda r: (r.job, r.iteration, r.rank))


def measured_window_s(records: Iterable[IterationRecord]) -> tuple[float, float]:
    """Wall-clock span of the recorded iterations: the first one's start to the last one's end.

    Raises:
        ValueError: no record.
    """
    recs = list(records)
    return min(r.start_time_s for r in recs), max(r.start_time_s + r.iteration_s for r in recs)


def bucket_times_s(records: Iterable, dilation: float = 1.0) -> dict[str, tuple[float, ...]]:
    """Per job, the time of each bucket's allreduce as the job's communication time counts it: per
    iteration the bucket times of its slowest rank (the one whose ``comm_s`` is the iteration's, the
    first such rank on a tie), then the mean over iterations, in virtual seconds (wall over
    ``dilation``); they sum to the job's mean communication time. The measured and the simulated
    records (:class:`IterationRecord`, :class:`sim.flowsim.SimIterationRecord`) aggregate alike. A
    job whose records differ in their number of buckets is left out (nothing to pair)."""
    slowest: dict[str, dict[int, tuple[float, int, tuple[float, ...]]]] = {}
    counts: dict[str, set[int]] = {}
    for r in records:
        counts.setdefault(r.job, set()).add(len(r.bucket_comm_s))
        its = slowest.setdefault(r.job, {})
        held = its.get(r.iteration)
        if held is None or (r.comm_s, -r.rank) > held[:2]:
            its[r.iteration] = (r.comm_s, -r.rank, tuple(r.bucket_comm_s))
    out = {}
    for job, its in slowest.items():
        if len(counts[job]) != 1:
            continue
        (n,) = counts[job]
        out[job] = tuple(sum(its[i][2][b] for i in its) / dilation / len(its) for b in range(n))
    return out
