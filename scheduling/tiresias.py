"""Tiresias scheduling: 2D-LAS and 2D-Gittins, continuous and discretized (MLFQ).

J. Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019, §3.2 and
Pseudocodes 1-2, as resolved in ``docs/resolutions.md`` Tiresias (§2, §3; [R] = the authors'
simulator, [S] = our suggestion; ⚠ A7-A28). Attained service is ``workers x executed time``.
Continuous 2DAS: :class:`LasScheduler`, :class:`GittinsScheduler` and the oracles
:class:`SrsfScheduler`, :class:`SrtfScheduler`. Discretized 2DAS, the actual scheduler:
:class:`TiresiasScheduler`, K queues with demotion, promotion and queue lists kept as [R] keeps
them; ``timing="r_compat"`` (with ``gittins_delta="r_compat"`` for Gittins) reproduces [R]'s JCTs
job by job.

Queues, ordering within a queue, both timings, the Gittins index and its cost:
``docs/algorithms.md`` (Tiresias' scheduler). Cost per call: O(J log J) plus the index computations.
"""

from __future__ import annotations

import bisect
import csv
import math
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
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
)

GITTINS_SAMPLES_PATH = (Path(__file__).resolve().parents[1] / "data" / "tiresias"
                        / "gittins_gputime_samples_1000.csv")
"""[R]'s distribution D: 1001 job GPU-time samples (GPU-seconds) from the production trace (⚠ A10)."""

GITTINS_VARIANTS = ("textbook", "r_compat")
DELTA_MODES = ("to_threshold", "literal", "r_compat")
TIMINGS = ("exact", "r_compat")
R_GITTINS_DELTA_GPU_S = 3250.0
"""[R]'s fixed Gittins quantum (``jobs.py`` ``gittins_delta``, equal to its first queue limit)."""
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


def _round_half_up(x: float, digits: int) -> float:
    """Python 2's ``round``: the float's exact value to ``digits`` decimals, halves away from zero."""
    return float(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


class RGittinsTable:
    """The Gittins index exactly as the authors' simulator reads it ([R], ``docs/resolutions.md`` Tiresias §12).

    SymbioticLab/Tiresias ``simulator/run_sim.py``: ``parse_job_dist`` sorts the integer samples
    and precomputes ``cal_r_gittins_index(v - 1)`` for every sample ``v``; ``get_gittins_index(a)``
    returns the entry of the first sample above ``a``, or 0 when ``a`` is at least the largest
    sample. ``cal_r_gittins_index(a)`` uses one fixed quantum ``Δ`` (``JOBS.gittins_delta``,
    3250 GPU-s in ``jobs.py``, counted from ``a``), ``s`` instead of ``s - a`` in the expectation
    (⚠ A8), and counts the largest sample as unfinished once ``a + Δ`` reaches it::

        surv = samples > a;  done = samples in (a, a + Δ]   (the largest never, if a + Δ >= it - 1)
        P = round(|done| / |surv|, 5)
        E = round((Σ done + Δ · (|surv| - |done|)) // |surv|, 5)    # Python 2 integer division
        index = round(P · 10^6 / E, 4)

    rounding halves away from zero as Python 2 does. The 4-decimal index makes ties common; [R]
    breaks them by earlier submission. Building the table costs O(n log n) for n samples.

    Args:
        samples_gpu_s: the samples (truncated to integers, as [R] reads them).
        delta_gpu_s: the fixed quantum ``Δ``, > 0 and finite.
    """

    def __init__(self, samples_gpu_s: Sequence[float], delta_gpu_s: float):
        if not 0 < delta_gpu_s < math.inf:
            raise ConfigError(f"the r_compat Gittins quantum must be > 0 and finite, got {delta_gpu_s}")
        data = sorted(int(v) for v in samples_gpu_s)
        if not data or data[0] <= 0:
            raise ConfigError("a service distribution needs at least one sample, all > 0")
        delta = int(delta_gpu_s) if float(delta_gpu_s).is_integer() else float(delta_gpu_s)
        prefix = [0]
        for v in data:
            prefix.append(prefix[-1] + v)
        n = len(data)

        def cal(a: int) -> float:
            if a > data[-1] - 1:
                return 0.0
            lo = bisect.bisect_right(data, a)
            hi = n - 1 if a + delta > data[-1] - 1 else bisect.bisect_right(data, a + delta)
            p = _round_half_up((hi - lo) / (n - lo), 5)
            e_sum = prefix[hi] - prefix[lo] + delta * (n - hi)
            e = _round_half_up(e_sum // (n - lo) if isinstance(e_sum, int) else e_sum / (n - lo), 5)
            return _round_half_up(p * 1_000_000 / e, 4)

        self.samples = tuple(data)
        self.delta_gpu_s = delta
        self.table = tuple(cal(v - 1) for v in data)

    def index(self, a_gpu_s: float) -> float:
        """``get_gittins_index(int(a))``: the entry of the first sample above ``a``, 0 from the largest on."""
        i = bisect.bisect_right(self.samples, math.floor(a_gpu_s + _EPS))
        return 0.0 if i == len(self.samples) else self.table[i]


def _whole(x: float) -> float:
    """``x`` as an integer when it is one up to float noise (the reference's clocks are integers)."""
    return float(round(x)) if abs(x - round(x)) < _EPS else x


def _py2_div(a: float, b: int) -> float:
    """``math.ceil(a / b)`` under Python 2: floor division when ``a`` is an integer, else ceil."""
    return float(math.floor(a / b)) if float(a).is_integer() else float(math.ceil(a / b))


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
    """Continuous 2D-LAS: least attained 2D service first (``docs/resolutions.md`` Tiresias §2.2), preemptive.

    Args:
        seed: unused (deterministic); kept for the common interface.
    """

    name = "las"

    def key(self, job: JobStatus) -> float:
        """Attained service, GPU-seconds."""
        return job.service_gpu_s


class GittinsScheduler(PriorityScheduler):
    """Continuous 2D-Gittins: highest sup-form index first (``docs/resolutions.md`` Tiresias §2.3-2.4), preemptive.

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
    """Shortest remaining service (remaining time x GPUs) first; an oracle (``docs/resolutions.md`` Tiresias §6.4).

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
    """Shortest remaining time first; an oracle (``docs/resolutions.md`` Tiresias §6.3).

    Args:
        seed: unused (deterministic); kept for the common interface.
    """

    name = "srtf"

    def key(self, job: JobStatus) -> float:
        """Remaining seconds of running time."""
        return super().key(job) / job.workers


class SmallestFirstScheduler(PriorityScheduler):
    """Smallest first: fewest GPUs first (Tiresias Table 1's SF, ``docs/resolutions.md`` Tiresias §6.4);
    preemptive, re-decided at every call as the authors' simulator's ``sjf`` does (the paper does
    not say whether SF preempts). Needs no knowledge of a job's length.

    Args:
        seed: unused (deterministic); kept for the common interface.
    """

    name = "sf"

    def key(self, job: JobStatus) -> float:
        """The job's GPU count."""
        return float(job.workers)


class _QueueState:
    """Tiresias' bookkeeping for one job (``docs/resolutions.md`` Tiresias §3.7 per-job state).

    ``pos`` is the job's place in its queue's list (smaller is nearer the head): a fresh,
    largest number puts the job at the tail, as [R]'s ``list.append`` does.
    """

    __slots__ = ("queue", "t_s", "wait_s", "seen_service_gpu_s", "has_run", "pos")

    def __init__(self, pos: int):
        self.queue = 0
        self.t_s = 0.0            # executed time since the last promotion reset
        self.wait_s = 0.0         # waiting time since the last reset, counted only after a first run
        self.seen_service_gpu_s = 0.0
        self.has_run = False
        self.pos = pos


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
    """Discretized 2D-LAS / 2D-Gittins with K queues (see ``docs/algorithms.md`` for the rules).

    Args:
        seed: unused (deterministic); kept for the common interface.
        priority: ``"las"`` (Tiresias-L, default) or ``"gittins"`` (Tiresias-G).
        thresholds_gpu_s: the K-1 queue limits in GPU-seconds (``"3200"`` = the testbed's K = 2,
            θ = 3200; ``"3600:7200"`` = K = 3; ``"inf"`` or ``""`` = K = 1, a single FIFO queue).
        promote_knob: promote a waiting job below Q1 once waiting >= knob x executed time;
            ``inf`` (default, the testbed's setting) disables promotion.
        gittins_delta: the quantum of Q_i (⚠ A7): ``"to_threshold"`` (Q_i^hi - a, default),
            ``"literal"`` (Q_i^hi) or ``"r_compat"`` ([R]'s table index with the fixed quantum
            Q_1^hi, or 3250 GPU-s with one queue, every queue sorted; see ``docs/algorithms.md``).
        samples_path: CSV of service samples for Gittins; empty means [R]'s file.
        samples_gpu_s: explicit Gittins samples (Python callers only); overrides ``samples_path``.
        timing: when demotions and promotions happen: ``"exact"`` (when the service reaches the
            limit, resp. the waiting time reaches knob x executed time) or ``"r_compat"`` ([R]'s
            integer event clock, see ``docs/algorithms.md``); empty (default) means ``"r_compat"``
            with ``gittins_delta="r_compat"`` and ``"exact"`` otherwise.

    Attributes:
        r_table: [R]'s index table (:class:`RGittinsTable`) with ``gittins_delta="r_compat"``,
            else None.
        timing: the resolved ``timing``.
    """

    name = "tiresias"

    def __init__(self, seed: int = 0, priority: str = "las", thresholds_gpu_s: str = "3200",
                 promote_knob: float = math.inf, gittins_delta: str = "to_threshold",
                 samples_path: str = "", samples_gpu_s: Sequence[float] | None = None, timing: str = ""):
        super().__init__(seed)
        self.priority = _check_variant(priority, ("las", "gittins"), "Tiresias priority")
        text = str(thresholds_gpu_s).strip().lower()
        limits = () if text in ("", "inf") else parse_thresholds(thresholds_gpu_s)
        self.limits_gpu_s = limits + (math.inf,)
        if not promote_knob > 0:
            raise ConfigError(f"promote_knob must be > 0 (inf disables promotion), got {promote_knob}")
        self.promote_knob = float(promote_knob)
        self.gittins_delta = _check_variant(gittins_delta, DELTA_MODES, "gittins_delta")
        if not timing:
            timing = "r_compat" if self.gittins_delta == "r_compat" else "exact"
        self.timing = _check_variant(timing, TIMINGS, "Tiresias timing")
        self.dist = _distribution(samples_gpu_s, samples_path) if self.priority == "gittins" else None
        self.r_table: RGittinsTable | None = None
        if self.dist is not None and self.gittins_delta == "r_compat":
            quantum = self.limits_gpu_s[0] if len(self.limits_gpu_s) > 1 else R_GITTINS_DELTA_GPU_S
            self.r_table = RGittinsTable(self.dist.samples, quantum)
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
            # [R] counts waiting only while the job has executed since its last reset.
            if not j.running and (st.t_s > 0 if self.timing == "r_compat" else st.has_run):
                st.wait_s += dt
            st.has_run = st.has_run or j.running or j.service_gpu_s > 0

    def _requeue(self, jobs: Sequence[JobStatus]) -> None:
        """Demotions (service crossed a queue limit), then promotions (starvation).

        [R] (``dlas_sim_jobs``) demotes only running jobs, by one queue per event; exact timing
        demotes every job as far as its service goes.
        """
        r_timing = self.timing == "r_compat"
        for j in jobs:
            st = self._state[j.name]
            if r_timing and not j.running:
                continue
            while (st.queue < self.n_queues - 1
                   and j.workers * st.t_s >= self.limits_gpu_s[st.queue] * (1 - _EPS)):
                st.queue += 1
                st.pos = self._next_seq()          # [R]: appended to the next queue, behind its waiting jobs
                self.n_demotions += 1
                if r_timing:
                    break
        if math.isinf(self.promote_knob):
            return
        for j in jobs:
            st = self._state[j.name]
            if r_timing:  # [R]: last_pending_time >= int(executed_time * knob)
                starved = st.wait_s >= math.floor(self.promote_knob * st.t_s + _EPS) - _EPS
            else:
                starved = st.wait_s >= self.promote_knob * st.t_s * (1 - _EPS)
            if not j.running and st.queue > 0 and st.t_s > 0 and starved:
                st.queue, st.t_s, st.wait_s = 0, 0.0, 0.0
                st.pos = self._next_seq()                                    # [R]: tail of Q1
                self.n_promotions += 1

    def gittins_index(self, service_gpu_s: float, queue: int) -> float:
        """Discretized Gittins index of a job with queue service ``service_gpu_s`` in queue ``queue``.

        With ``gittins_delta="r_compat"`` it is [R]'s table value (:class:`RGittinsTable`), the
        same in every queue.
        """
        if self.r_table is not None:
            return self.r_table.index(service_gpu_s)
        hi = self.limits_gpu_s[queue]
        if self.gittins_delta == "to_threshold":
            return self.dist.index(service_gpu_s, hi - service_gpu_s)
        return self.dist.index(service_gpu_s, hi)

    def _queue_order(self, members: list[JobStatus], queue: int) -> list[JobStatus]:
        """A queue's admission order (see ``docs/algorithms.md``)."""
        by_pos = sorted(members, key=lambda j: self._state[j.name].pos)
        if self.priority == "gittins" and (self.r_table is not None or queue < self.n_queues - 1):
            # [R]: sort(key=(rank, -submit_time), reverse=True), stable: ties keep the list order.
            return sorted(by_pos, key=lambda j: (
                -self.gittins_index(j.workers * self._state[j.name].t_s, queue), j.arrival_s))
        return by_pos

    def _wake_s(self, jobs: Sequence[JobStatus], run: set[str], now_s: float) -> float | None:
        """Earliest demotion of a job that will run, or promotion of one that will wait.

        With ``timing="r_compat"`` the times are [R]'s (``dlas_sim_jobs``, "next_job_jump"):
        ``now + (limit - t) // W`` for a demotion, with ``t`` the executed *seconds* where the
        limit is GPU-seconds (so a multi-GPU job's demotion is seen at a later event, not when
        its service reaches the limit), and ``now + int(knob x t - waited)`` for a promotion.
        """
        times = []
        for j in jobs:
            st = self._state[j.name]
            if j.name in run:
                if st.queue < self.n_queues - 1:
                    limit = self.limits_gpu_s[st.queue]
                    if self.timing == "r_compat":
                        times.append(now_s + _py2_div(limit - _whole(st.t_s), j.workers))
                    else:
                        times.append(now_s + (limit - j.workers * st.t_s) / j.workers)
            elif not math.isinf(self.promote_knob) and st.queue > 0 and st.t_s > 0:
                left = self.promote_knob * st.t_s - st.wait_s
                if self.timing == "r_compat":
                    if int(left + _EPS) > 0:
                        times.append(now_s + int(left + _EPS))
                else:
                    times.append(now_s + max(0.0, left))
        return min(times, default=None)

    def schedule(self, jobs: Sequence[JobStatus], total_gpus: int, now_s: float) -> Decision:
        """Advance clocks, demote/promote, order the queues, admit by count, preempt the rest."""
        check_jobs(jobs, total_gpus)
        self._workers = {j.name: j.workers for j in jobs}
        self._advance(jobs, now_s)
        self._requeue(jobs)
        ordered: list[JobStatus] = []
        for q in range(self.n_queues):
            ordered += self._queue_order([j for j in jobs if self._state[j.name].queue == q], q)
        admitted = admit_by_count(ordered, total_gpus)
        decision = decide(ordered, admitted)
        run = set(decision.run)
        # [R]: after each pass every queue keeps its jobs that run, in order, ahead of those that wait.
        for j in sorted(ordered, key=lambda j: j.name not in run):
            self._state[j.name].pos = self._next_seq()
        wake = self._wake_s(jobs, run, now_s)
        return Decision(decision.order, decision.run, decision.preempt, decision.start, wake)
