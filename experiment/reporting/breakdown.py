"""Where a simulator's error on a job lies: bucket by bucket, measured against estimated.

A job's communication time per iteration is the sum of its buckets' allreduce times (each the
slowest rank's, meaned over iterations: :func:`jobs.records.bucket_times_s`), on the emulator as
in the step-level simulator (:class:`sim.flowsim.JobEstimate` ``bucket_comm_s``). Pairing them
bucket by bucket shows which transfers the error comes from: a bucket whose largest transfer
between machines is a few packets (:data:`measure.fidelity.LATENCY_BOUND_FRAMES`) is timed by
per-message latency, the others by bandwidth and how the links are shared. :func:`error_split`
sums each class of job's error over both kinds of bucket, so a user reads, say, "the contended
jobs' error is 90% in their large buckets, estimated too short": sharing, not latency.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from measure.fidelity import few_packets

BUCKET_KINDS = ("small", "large")
"""A bucket is ``small`` when its largest transfer between machines fills fewer than
:data:`measure.fidelity.LATENCY_BOUND_FRAMES` full packets, else ``large``."""


@dataclasses.dataclass(frozen=True)
class BucketComparison:
    """One bucket of one job: its measured and estimated allreduce time per iteration, seconds.

    Attributes:
        policy: the placement policy the job ran under.
        job: job name.
        job_class: the job's validation class (:func:`experiment.reporting.validation.job_class`; None: none).
        bucket: the bucket's index in the iteration's order.
        bytes: its payload bytes, paper-scale.
        kind: one of :data:`BUCKET_KINDS`.
        measured_s: measured time (slowest rank per iteration, mean over iterations).
        estimated_s: the simulator's time, aggregated alike.
    """

    policy: str
    job: str
    job_class: str | None
    bucket: int
    bytes: int
    kind: str
    measured_s: float
    estimated_s: float

    @property
    def error_s(self) -> float:
        """``estimated - measured``: negative when the estimate is too short."""
        return self.estimated_s - self.measured_s

    def to_dict(self) -> dict:
        """JSON/CSV form, with the error."""
        return {**dataclasses.asdict(self), "error_s": self.error_s}

    @classmethod
    def from_dict(cls, data: dict) -> BucketComparison:
        """The comparison :meth:`to_dict` wrote (its error is derived again)."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})


def bucket_kind(machines_by_rank: Sequence[str], collective: str, nbytes: int, mtu: int | None) -> str:
    """``small`` or ``large`` (:data:`BUCKET_KINDS`) for one bucket of ``nbytes`` of a job placed on
    ``machines_by_rank``, with the fidelity check's packet size (payload of an ``mtu`` packet)."""
    return "small" if few_packets(machines_by_rank, collective, (nbytes,), mtu) else "large"


def compare_buckets(policy: str, job: str, job_class: str | None, machines_by_rank: Sequence[str], collective: str,
                    bucket_bytes: Sequence[int], measured_s: Sequence[float] | None,
                    estimated_s: Sequence[float] | None, mtu: int | None, scale: float = 1.0) -> list[BucketComparison]:
    """One job's buckets paired (empty when either side has no per-bucket times or they differ in
    number: nothing to pair). ``bucket_bytes`` are the bytes the run allreduced (its records'), whose
    packets make a bucket small or large; ``scale`` turns them into the paper-scale bytes reported."""
    if not measured_s or not estimated_s or not (len(measured_s) == len(estimated_s) == len(bucket_bytes)):
        return []
    return [BucketComparison(policy, job, job_class, i, round(b * scale),
                             bucket_kind(machines_by_rank, collective, b, mtu), float(m), float(e))
            for i, (b, m, e) in enumerate(zip(bucket_bytes, measured_s, estimated_s, strict=True))]


@dataclasses.dataclass(frozen=True)
class ErrorSplit:
    """A class of jobs' estimation error, summed over their buckets of each kind (seconds per
    iteration, summed over jobs).

    Attributes:
        jobs: jobs with buckets paired.
        measured_s: their measured communication time, by bucket kind.
        error_s: the signed error (estimated - measured), by bucket kind.
        abs_error_s: the sum of each bucket's absolute error, by bucket kind.
    """

    jobs: int
    measured_s: Mapping[str, float]
    error_s: Mapping[str, float]
    abs_error_s: Mapping[str, float]

    def share(self, kind: str) -> float | None:
        """The part of the absolute error in buckets of ``kind`` (None: no error at all)."""
        total = sum(self.abs_error_s.values())
        return self.abs_error_s.get(kind, 0.0) / total if total > 0 else None

    def to_dict(self) -> dict:
        """JSON form, with each kind's share of the error."""
        return {**dataclasses.asdict(self), "share": {k: self.share(k) for k in BUCKET_KINDS}}

    def line(self) -> str:
        """``small buckets 12% of the error (+0.004 s), large 88% (-0.210 s) over 9 jobs``."""
        parts = []
        for kind in BUCKET_KINDS:
            share = self.share(kind)
            if kind in self.measured_s:
                parts.append(f"{kind} buckets {'-' if share is None else f'{share:.0%}'} of the error "
                             f"({self.error_s[kind]:+.4g} s on {self.measured_s[kind]:.4g} s measured)")
        return "; ".join(parts) + f" over {self.jobs} job{'s' if self.jobs != 1 else ''}"


def error_split(comparisons: Iterable[BucketComparison]) -> dict[str | None, ErrorSplit]:
    """Per job class (in order of first appearance), the error summed by bucket kind."""
    by_class: dict[str | None, list[BucketComparison]] = {}
    for c in comparisons:
        by_class.setdefault(c.job_class, []).append(c)
    out = {}
    for cls, cs in by_class.items():
        kinds = {k: [c for c in cs if c.kind == k] for k in dict.fromkeys(c.kind for c in cs)}
        out[cls] = ErrorSplit(len({(c.policy, c.job) for c in cs}),
                              {k: sum(c.measured_s for c in v) for k, v in kinds.items()},
                              {k: sum(c.error_s for c in v) for k, v in kinds.items()},
                              {k: sum(abs(c.error_s) for c in v) for k, v in kinds.items()})
    return out
