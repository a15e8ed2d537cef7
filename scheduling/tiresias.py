"""Tiresias scheduling: 2D-LAS and 2D-Gittins, continuous and discretized (MLFQ).

J. Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019,
§3.2 and Pseudocodes 1-2, as resolved in ``shared/specs/tiresias.md`` (§2, §3; tags [R] =
the authors' simulator, [S] = the spec's suggestion).

Attained service is 2D: ``a = workers x executed time`` in GPU-seconds (§2.1).

Continuous 2DAS (§2.2-2.4, the paper's Fig. 7 toy example), preemptive and re-evaluated at
every call, admission by GPU count with skipping:

* :class:`LasScheduler` (``las``): least attained service first.
* :class:`GittinsScheduler` (``gittins``): highest Gittins index first, the sup over the
  quantum taken at ``Δ = s - a`` for every sample ``s > a``.
* :class:`SrsfScheduler` / :class:`SrtfScheduler` (``srsf``, ``srtf``): the oracle baselines,
  shortest remaining service (GPU-seconds) / remaining time first (§6.3-6.4).

Discretized 2DAS, the actual Tiresias scheduler (§3), :class:`TiresiasScheduler`
(``tiresias``): K queues split by thresholds on ``a``; a job joins Q1 on arrival (⚠ A12),
moves down when its queue service reaches the queue's upper limit, and (when
``promote_knob`` is finite) goes back to Q1 with its queueing clocks reset once it has
waited ``promote_knob`` times its executed time (§3.5, [R] details ⚠ A15). Each call
rebuilds the allocation from scratch in queue order with skipping and preempts running jobs
not admitted (§3.6); one pass per call (⚠ A26). Within a queue:

* LAS: FIFO by start time: running jobs by their latest start, then waiting jobs in the order
  they entered the queue (⚠ A11), so there is never intra-queue preemption.
* Gittins: queues Q1..Q(K-1) by the discretized index (highest first; ties earlier arrival,
  ⚠ A9), re-sorted at every call including running jobs (⚠ A28); the last queue FIFO as LAS.
  The quantum is ``Δ = Q_i^hi - a`` by default (⚠ A7 [S]), ``Δ = Q_i^hi`` with
  ``gittins_delta="literal"``, and [R]'s variant (``Δ = Q_i^hi``, ``s`` instead of ``s - a``
  in the expectation) with ``"r_compat"``.

Gittins index from samples ``D`` of job service (GPU-seconds), for attained service ``a``
(§2.3, ⚠ A8): ``G = P(S - a <= Δ | S > a) / E[min(S - a, Δ) | S > a]``; the ``"r_compat"``
variant uses ``E[S if S <= a + Δ else Δ | S > a]``, which is what reproduces the paper's Fig. 7
value (avg JCT 10 rather than the textbook formula's 9.33). ``G = 0`` when no sample exceeds
``a`` (⚠ A9). With the samples sorted and prefix sums, one index costs O(log n) for a fixed
quantum and O(n) for the sup.

Cost per call: O(J log J) plus the index computations (Gittins).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from common.errors import ConfigError, JobError
from scheduling.base import (
    Decision,
    JobStatus,
    PriorityScheduler,
    Scheduler,
    admit_by_count,
    check_jobs,
    decide,
    sort_stable,
)

GITTINS_SAMPLES_PATH = (Path(__file__).resolve().parents[1] / "data" / "tiresias"
                        / "gittins_gputime_samples_1000.csv")
"""[R]'s distribution D: 1001 job GPU-time samples (GPU-seconds) from the production trace (⚠ A10)."""

GITTINS_VARIANTS = ("textbook", "r_compat")
DELTA_MODES = ("to_threshold", "literal", "r_compat")
TESTBED_THRESHOLD_GPU_S = 3200.0
"""θ of the paper's testbed runs (§5.2): 4 GPUs x 800 s."""
_EPS = 1e-9


def load_samples(path: str | Path = GITTINS_SAMPLES_PATH) -> tuple[float, ...]:
    """Read job-service samples (GPU-seconds) from a CSV with a ``duration`` column.

    Raises:
        ConfigError: the file is missing, has no ``duration`` column, or holds no positive sample.
    """
    path = Path(path)
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise ConfigError(f"cannot read Gittins samples {path}: {e}") from e
    if not rows or "duration" not in rows[0]:
        raise ConfigError(f"Gittins samples {path}: expected a CSV with a 'duration' column")
    samples = tuple(float(r["duration"]) for r in rows)
    if not all(s > 0 for s in samples):
        raise ConfigError(f"Gittins samples {path}: every duration must be > 0")
    return samples


class ServiceDistribution:
    """Empirical distribution D of total job service (GPU-seconds) and its Gittins indices.

    Args:
        samples_gpu_s: the samples; at least one, all > 0.
    """

    def __init__(self, samples_gpu_s: Sequence[float]):
        s = np.sort(np.asarray(samples_gpu_s, dtype=float))
        if s.size == 0 or s[0] <= 0:
            raise ConfigError("a service distribution needs at least one sample, all > 0")
        self.samples = s
        self._prefix = np.concatenate(([0.0], np.cumsum(s)))

    def index(self, a: float, delta: float, variant: str = "textbook") -> float:
        """Gittins index for attained service ``a`` and a fixed quantum ``delta`` (> 0, may be inf)."""
        s, n = self.samples, self.samples.size
        lo = int(np.searchsorted(s, a, side="right"))
        if lo == n:
            return 0.0
        hi = n if math.isinf(delta) else int(np.searchsorted(s, a + delta, side="right"))
        done = hi - lo
        if done == 0:
            return 0.0
        within = self._prefix[hi] - self._prefix[lo]
        if variant == "textbook":
            within -= a * done
        tail = 0.0 if hi == n else delta * (n - hi)
        return done / (within + tail)

    def sup_index(self, a: float, variant: str = "textbook") -> float:
        """Gittins index maximised over the quantum, checked at ``Δ = s - a`` for each sample ``s > a``."""
        s, n = self.samples, self.samples.size
        lo = int(np.searchsorted(s, a, side="right"))
        if lo == n:
            return 0.0
        cand = np.unique(s[lo:])
        hi = np.searchsorted(s, cand, side="right")
        done = hi - lo
        within = self._prefix[hi] - self._prefix[lo]
        if variant == "textbook":
            within = within - a * done
        expect = within + (cand - a) * (n - hi)
        return float(np.max(done / expect))


def _check_variant(variant: str, valid: Sequence[str], what: str) -> str:
    if variant not in valid:
        raise ConfigError(f"unknown {what} {variant!r}; valid: {', '.join(valid)}")
    return variant


def _distribution(samples_gpu_s: Sequence[float] | None, samples_path: str) -> ServiceDistribution:
    """The distribution from explicit samples, else from ``samples_path`` (default: [R]'s file)."""
    if samples_gpu_s is not None:
        return ServiceDistribution(samples_gpu_s)
    return ServiceDistribution(load_samples(samples_path or GITTINS_SAMPLES_PATH))


class LasScheduler(PriorityScheduler):
    """Continuous 2D-LAS: least attained 2D service first (``tiresias.md`` §2.2), preemptive.

    Args:
        seed: unused (deterministic); kept for the common interface.
    """

    name = "las"

    def key(self, job: JobStatus) -> float:
        """Attained service, GPU-seconds."""
        return job.service_gpu_s


class GittinsScheduler(PriorityScheduler):
    """Continuous 2D-Gittins: highest sup-form index first (``tiresias.md`` §2.3-2.4), preemptive.

    Args:
        seed: unused (deterministic); kept for the common interface.
        variant: ``"textbook"`` (the paper's equation, default [S]) or ``"r_compat"`` ([R]'s
            expectation, which reproduces the paper's Fig. 7 numbers, ⚠ A8).
        samples_path: CSV of service samples (``duration`` column, GPU-seconds); empty means
            [R]'s production samples (:data:`GITTINS_SAMPLES_PATH`).
        samples_gpu_s: explicit samples (Python callers only); overrides ``samples_path``.
    """

    name = "gittins"

    def __init__(self, seed: int = 0, variant: str = "textbook", samples_path: str = "",
                 samples_gpu_s: Sequence[float] | None = None):
        super().__init__(seed)
        self.variant = _check_variant(variant, GITTINS_VARIANTS, "Gittins variant")
        self.dist = _distribution(samples_gpu_s, samples_path)

    def key(self, job: JobStatus) -> float:
        """Minus the Gittins index of the job's attained service."""
        return -self.dist.sup_index(job.service_gpu_s, self.variant)


class SrsfScheduler(PriorityScheduler):
    """Shortest remaining service (remaining time x GPUs) first; an oracle (``tiresias.md`` §6.4).

    Args:
        seed: unused (deterministic); kept for the common interface.
    """

    name = "srsf"

    def key(self, job: JobStatus) -> float:
        """Remaining GPU-seconds."""
        if job.remaining_gpu_s is None:
            raise JobError(f"{self.name}: job {job.name!r} has no remaining_gpu_s (an oracle needs it)")
        return job.remaining_gpu_s


class SrtfScheduler(SrsfScheduler):
    """Shortest remaining time first; an oracle (``tiresias.md`` §6.3).

    Args:
        seed: unused (deterministic); kept for the common interface.
    """

    name = "srtf"

    def key(self, job: JobStatus) -> float:
        """Remaining seconds of running time."""
        return super().key(job) / job.workers


class _QueueState:
    """Tiresias' bookkeeping for one job (``tiresias.md`` §3.7 per-job state)."""

    __slots__ = ("queue", "t_s", "wait_s", "seen_service_gpu_s", "has_run", "enqueue_seq", "start_seq")

    def __init__(self, enqueue_seq: int):
        self.queue = 0
        self.t_s = 0.0            # executed time since the last promotion reset
        self.wait_s = 0.0         # waiting time since the last reset, counted only after a first run
        self.seen_service_gpu_s = 0.0
        self.has_run = False
        self.enqueue_seq = enqueue_seq
        self.start_seq = -1


def parse_thresholds(thresholds_gpu_s) -> tuple[float, ...]:
    """Queue limits Q1^hi < Q2^hi < ... in GPU-seconds, from a number, a sequence or ``"a:b:c"``.

    Raises:
        ConfigError: empty, non-numeric, non-positive or not strictly increasing limits.
    """
    if isinstance(thresholds_gpu_s, str):
        parts = [p.strip() for p in thresholds_gpu_s.split(":") if p.strip()]
    elif isinstance(thresholds_gpu_s, (int, float)):
        parts = [thresholds_gpu_s]
    else:
        parts = list(thresholds_gpu_s)
    try:
        limits = tuple(float(p) for p in parts)
    except (TypeError, ValueError):
        raise ConfigError(f"thresholds_gpu_s {thresholds_gpu_s!r}: expected numbers like '3200' or "
                          "'3600:7200'") from None
    if any(x <= 0 for x in limits) or any(b <= a for a, b in zip(limits, limits[1:], strict=False)):
        raise ConfigError(f"thresholds_gpu_s {thresholds_gpu_s!r}: limits must be > 0 and increasing")
    return limits


class TiresiasScheduler(Scheduler):
    """Discretized 2D-LAS / 2D-Gittins with K queues (see the module docstring for the rules).

    Args:
        seed: unused (deterministic); kept for the common interface.
        priority: ``"las"`` (Tiresias-L, default) or ``"gittins"`` (Tiresias-G).
        thresholds_gpu_s: the K-1 queue limits in GPU-seconds (``"3200"`` = the testbed's K = 2,
            θ = 3200; ``"3600:7200"`` = K = 3; ``"inf"`` or ``""`` = K = 1, a single FIFO queue).
        promote_knob: promote a waiting job below Q1 once waiting >= knob x executed time;
            ``inf`` (default, the testbed's setting) disables promotion.
        gittins_delta: the quantum of Q_i (⚠ A7): ``"to_threshold"`` (Q_i^hi - a, default),
            ``"literal"`` (Q_i^hi) or ``"r_compat"`` ([R]'s index, see the module docstring).
        samples_path: CSV of service samples for Gittins; empty means [R]'s file.
        samples_gpu_s: explicit Gittins samples (Python callers only); overrides ``samples_path``.
    """

    name = "tiresias"

    def __init__(self, seed: int = 0, priority: str = "las", thresholds_gpu_s: str = "3200",
                 promote_knob: float = math.inf, gittins_delta: str = "to_threshold",
                 samples_path: str = "", samples_gpu_s: Sequence[float] | None = None):
        super().__init__(seed)
        self.priority = _check_variant(priority, ("las", "gittins"), "Tiresias priority")
        text = str(thresholds_gpu_s).strip().lower()
        limits = () if text in ("", "inf") else parse_thresholds(thresholds_gpu_s)
        self.limits_gpu_s = limits + (math.inf,)
        if not promote_knob > 0:
            raise ConfigError(f"promote_knob must be > 0 (inf disables promotion), got {promote_knob}")
        self.promote_knob = float(promote_knob)
        self.gittins_delta = _check_variant(gittins_delta, DELTA_MODES, "gittins_delta")
        self.dist = _distribution(samples_gpu_s, samples_path) if self.priority == "gittins" else None
        self._state: dict[str, _QueueState] = {}
        self._seq = 0
        self._now_s: float | None = None
        self._workers: dict[str, int] = {}
        self.n_promotions = 0
        self.n_demotions = 0

    @property
    def n_queues(self) -> int:
        """K, the number of queues."""
        return len(self.limits_gpu_s)

    def queue_of(self, job: str) -> int:
        """0-based queue index of an active job (0 = Q1)."""
        return self._state[job].queue

    def queue_service_gpu_s(self, job: str) -> float:
        """The job's attained service for queueing, ``workers x t`` since its last reset, GPU-seconds."""
        return self._state[job].t_s * self._workers[job]

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _advance(self, jobs: Sequence[JobStatus], now_s: float) -> None:
        """Bring every job's clocks to ``now_s``; forget jobs that left (finished)."""
        if self._now_s is not None and now_s < self._now_s - _EPS:
            raise JobError(f"{self.name}: time went backwards ({now_s} s after {self._now_s} s)")
        dt = 0.0 if self._now_s is None else max(0.0, now_s - self._now_s)
        self._now_s = now_s
        present = {j.name for j in jobs}
        for gone in set(self._state) - present:
            del self._state[gone]
        for j in jobs:
            st = self._state.get(j.name)
            if st is None:
                st = self._state[j.name] = _QueueState(self._next_seq())     # joins the tail of Q1
                st.seen_service_gpu_s = j.service_gpu_s
                st.t_s = j.service_gpu_s / j.workers                          # no reset happened yet
                st.has_run = j.running or j.service_gpu_s > 0
                continue
            # Executed time comes from attained service, so checkpoint/restore time that the
            # caller does not count as service never counts here either (⚠ A16).
            st.t_s += max(0.0, j.service_gpu_s - st.seen_service_gpu_s) / j.workers
            st.seen_service_gpu_s = j.service_gpu_s
            if not j.running and st.has_run:
                st.wait_s += dt                                               # [R]: only after a first run
            st.has_run = st.has_run or j.running or j.service_gpu_s > 0

    def _requeue(self, jobs: Sequence[JobStatus]) -> None:
        """Demotions (service crossed a queue limit), then promotions (starvation)."""
        for j in jobs:
            st = self._state[j.name]
            while (st.queue < self.n_queues - 1
                   and j.workers * st.t_s >= self.limits_gpu_s[st.queue] * (1 - _EPS)):
                st.queue += 1
                st.enqueue_seq = self._next_seq()                            # [R]: tail of the next queue
                self.n_demotions += 1
        if math.isinf(self.promote_knob):
            return
        for j in jobs:
            st = self._state[j.name]
            if (not j.running and st.queue > 0 and st.t_s > 0
                    and st.wait_s >= self.promote_knob * st.t_s * (1 - _EPS)):
                st.queue, st.t_s, st.wait_s = 0, 0.0, 0.0
                st.enqueue_seq = self._next_seq()                            # [R]: tail of Q1
                self.n_promotions += 1

    def gittins_index(self, service_gpu_s: float, queue: int) -> float:
        """Discretized Gittins index of a job with queue service ``service_gpu_s`` in queue ``queue``."""
        hi = self.limits_gpu_s[queue]
        if self.gittins_delta == "to_threshold":
            return self.dist.index(service_gpu_s, hi - service_gpu_s)
        variant = "r_compat" if self.gittins_delta == "r_compat" else "textbook"
        return self.dist.index(service_gpu_s, hi, variant)

    def _queue_order(self, members: list[JobStatus], queue: int) -> list[JobStatus]:
        if self.priority == "gittins" and queue < self.n_queues - 1:
            return sort_stable(members, lambda j: -self.gittins_index(
                j.workers * self._state[j.name].t_s, queue))
        # FIFO by start time: running jobs by latest start, then waiting jobs by queue entry (⚠ A11).
        return sorted(members, key=lambda j: (
            not j.running,
            self._state[j.name].start_seq if j.running else self._state[j.name].enqueue_seq))

    def _wake_s(self, jobs: Sequence[JobStatus], run: set[str], now_s: float) -> float | None:
        """Earliest demotion of a job that will run, or promotion of one that will wait."""
        times = []
        for j in jobs:
            st = self._state[j.name]
            if j.name in run:
                if st.queue < self.n_queues - 1:
                    times.append(now_s + (self.limits_gpu_s[st.queue] - j.workers * st.t_s) / j.workers)
            elif not math.isinf(self.promote_knob) and st.queue > 0 and st.t_s > 0:
                times.append(now_s + max(0.0, self.promote_knob * st.t_s - st.wait_s))
        return min(times, default=None)

    def schedule(self, jobs: Sequence[JobStatus], total_gpus: int, now_s: float) -> Decision:
        """Advance clocks, demote/promote, order the queues, admit by count, preempt the rest."""
        check_jobs(jobs, total_gpus)
        self._workers = {j.name: j.workers for j in jobs}
        self._advance(jobs, now_s)
        self._requeue(jobs)
        for j in jobs:
            if j.running and self._state[j.name].start_seq < 0:
                self._state[j.name].start_seq = self._next_seq()             # started outside our decisions
        ordered: list[JobStatus] = []
        for q in range(self.n_queues):
            ordered += self._queue_order([j for j in jobs if self._state[j.name].queue == q], q)
        admitted = admit_by_count(ordered, total_gpus)
        decision = decide(ordered, admitted)
        for name in decision.start:
            self._state[name].start_seq = self._next_seq()     # Pseudocode 2: "store J's start time"
        wake = self._wake_s(jobs, set(decision.run), now_s)
        return Decision(decision.order, decision.run, decision.preempt, decision.start, wake)
