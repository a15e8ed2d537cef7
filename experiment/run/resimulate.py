"""The simulator's estimate of a recorded run: its schedule re-driven through the experiment loop.

To judge an emulated run, the flow-level simulator runs the same jobs on the same placements
under the same schedule, and its estimate of every job is set beside the measurement. No second
loop does it: :func:`experiment.run.loop.run_loop` drives a fresh simulator back end
(:func:`experiment.run.simrun.sim_backend`) with a :class:`scheduling.recorded.RecordedSchedule` built
from the run's record and :class:`RecordedPlacements`, which re-applies the placement of each
recorded start, so the loop's cluster bookkeeping holds exactly the recorded placements. Two
ways to follow the record (the scheduler's two constructors say how each decides):

* at the recorded times (a run of an online scheduler): every start at its time on its
  placement and every preemption at its time; a job's last run ends when the simulator says.
  The starts' times are the loop's, before the emulator's start-up (its ranks joining), so a
  simulated job starts that much earlier. A job still running in the simulator keeps its GPUs:
  a start recorded on them waits until it finishes (the cluster never holds two jobs on a GPU);
* in the recorded batches (a ``waves`` run): each batch, its jobs starting together, once every
  job of the batch before has finished in the simulator, so each wave runs alone on it.

A recorded placer decision that time-shifted jobs (Cassini's, :class:`experiment.run.loop.PlacerDecision`)
is replayed with its starts: the simulator aligns the same jobs by the same shifts from the
moment it starts them (:class:`RecordedPlacements` hands them to the loop).

Times are virtual (paper-scale) seconds. Cost: the loop's (O(events x jobs)) plus the simulator's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from backend.protocol import ExperimentJob
from common.errors import JobError, PlacementError
from experiment.config.workload import config_cluster, experiment_jobs
from experiment.run.loop import LoopResult, Started, run_loop
from experiment.run.simrun import sim_backend
from jobs.collective import collective_of
from placement.base import ClusterView, GpuSlot, JobRequest, Placement, PlacementDecision, PlacementPolicy, TimeShift
from scheduling.recorded import RecordedSchedule
from sim.engines import sim_engine
from sim.flowsim import JobEstimate


class RecordedPlacements(PlacementPolicy):
    """Places each job where its recorded start placed it (the start a :class:`RecordedSchedule` asks).

    A job whose recorded GPUs are not all free now (held here by a job that runs longer than in
    the record, or by a job placed before it in this call) waits; jobs are placed in the
    scheduler's order. O(GPUs of the pending jobs) per call.

    Args:
        placements: the placement of every recorded start, indexed as the scheduler counts them
            (None: the record counted GPUs without placing them, which cannot be re-applied).
        start_asked: job name -> index of the recorded start its scheduler asks now
            (:meth:`scheduling.recorded.RecordedSchedule.start_asked`).
        shifts: per recorded start (same indexing), the time shifts its decision gave (empty: none).
    """

    name = "recorded"

    def __init__(self, placements: Sequence[Placement | None], start_asked: Callable[[str], int],
                 shifts: Sequence[tuple[TimeShift, ...]] = ()):
        super().__init__(seed=0)
        self.placements = tuple(placements)
        self.start_asked = start_asked
        self.shifts = tuple(shifts)

    def decide(self, pending: Sequence[JobRequest], view: ClusterView) -> PlacementDecision:
        """:meth:`place`'s placements with the time shifts their recorded decisions gave."""
        asked = {job.name: self.start_asked(job.name) for job in pending}
        placed = self.place(pending, view)
        shifts: dict[str, TimeShift] = {}
        for p in placed:
            index = asked[p.job]
            for s in self.shifts[index] if index < len(self.shifts) else ():
                shifts[s.job] = s
        return PlacementDecision(tuple(placed), tuple(shifts.values()))

    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """The recorded placement of each pending job whose GPUs are all free; the others wait.

        Raises:
            PlacementError: a recorded start without a placement or with another job's, or on a
                machine the cluster lacks.
        """
        taken: set[GpuSlot] = set()
        out = []
        machines = view.free_counts()
        for job in pending:
            p = self.placements[self.start_asked(job.name)]
            if p is None or p.job != job.name:
                raise PlacementError(f"{self.name}: the recorded start asked of job {job.name!r} has placement {p}")
            unknown = sorted({s.machine for s in p.slots} - set(machines))
            if unknown:
                raise PlacementError(f"{self.name}: job {job.name!r} was placed on {unknown}, which this cluster "
                                     f"lacks; machines: {', '.join(machines)}")
            if any(s in taken or view.owner(s) is not None for s in p.slots):
                continue
            taken.update(p.slots)
            out.append(p)
        return out


def simulate_schedule(cfg, g, loop: LoopResult, bucket_bytes: Mapping[str, Sequence[int]] | None = None,
                      batches: Sequence[Sequence[str]] | None = None,
                      start_delays_s: Mapping[str, float] | None = None) -> dict[str, JobEstimate]:
    """The simulator's estimate of every job of a recorded run, under the run's schedule.

    Args:
        cfg: the run's experiment config (its jobs, cluster and ``simulator`` section).
        g: the run's topology.
        loop: the loop's record of the run (on the emulator, say): its starts and preempted runs.
        bucket_bytes: per job, the buckets to allreduce (the run's measured ones) instead of its
            model's at the scale. In batch mode a job it has no buckets for is left out (nothing
            was measured of it); None leaves none out.
        batches: None: every start and preemption at its recorded time. Else the run's batches
            (a ``waves`` run: the jobs of each start call of the loop, in start order, as the
            emulator's waves or :func:`experiment.run.policy.batches_of` list them): each batch starts once every job
            of the one before has finished in the simulator.
        start_delays_s: per job, how long after its recorded start it begins (:func:`start_offsets`).

    Jobs of collective ``ina`` are simulated by the fluid engine only (:mod:`sim.ina`; the
    step-level one does not model in-network aggregation); a job left out is simulated nowhere, and
    the jobs beside it run without its traffic. The engine is the config's ``simulator.mode`` in
    both modes.

    Returns:
        The estimate of every job that completed an iteration in the simulator, by name.

    Raises:
        JobError: ``batches`` do not list the loop's starts in order.
    """
    backend = sim_backend(cfg, g, bucket_bytes, start_delays_s)
    jobs = _simulated_jobs(cfg, g, loop, bucket_bytes, batched=batches is not None)
    if batches is None:
        starts = [st for st in loop.starts if st.job in jobs]
        scheduler = RecordedSchedule.at_recorded_times(
            [(st.time_s, st.job) for st in starts],
            [(r.end_s, r.job) for r in loop.runs if not r.finished and r.job in jobs])
    else:
        kept = [[st for st in batch if st.job in jobs] for batch in _batch_starts(loop, batches)]
        starts = [st for batch in kept for st in batch]
        scheduler = RecordedSchedule.in_recorded_batches([[st.job for st in batch] for batch in kept])
    shifts_of = {}  # (time, job) of a recorded start -> the shifts its decision gave
    for d in loop.decisions:
        for job in d.started:
            shifts_of[(d.time_s, job)] = d.shifts if d.applied else ()
    placer = RecordedPlacements([st.placement for st in starts], scheduler.start_asked,
                                [shifts_of.get((st.time_s, st.job), ()) for st in starts])
    run_loop(list(jobs.values()), scheduler, backend, cluster=config_cluster(cfg, g), policy=placer)
    return {name: backend.estimate(name) for name in jobs if backend.done.get(name)}


def estimate_recorded_run(cfg, g, loop: LoopResult, batches: Sequence[Sequence[str]], timeline: Sequence,
                          bucket_bytes: Mapping[str, Sequence[int]]) -> dict[str, JobEstimate]:
    """The simulator's estimate of every job of a measured run (:class:`experiment.run.plugin.ScheduleEstimator`):
    :func:`simulate_schedule` in the run's ``batches`` where the config's scheduler starts jobs in
    batches, else at the recorded times; under an MLTCP congestion control each job starting when
    its first measured iteration began after its batch's first (:func:`start_offsets`, from the
    run's ``timeline`` of Up phases). ``bucket_bytes``: each job's measured buckets."""
    from congestion import congestion_control
    from scheduling import make_scheduler

    in_batches = make_scheduler(cfg.scheduler, seed=cfg.seed).starts_in_batches
    delays = start_offsets(timeline, batches) if congestion_control(cfg.congestion_control).is_mltcp else None
    return simulate_schedule(cfg, g, loop, bucket_bytes, batches if in_batches else None, delays)


def start_offsets(phases: Sequence, batches: Sequence[Sequence[str]]) -> dict[str, float]:
    """Per job of each batch, how much later than the batch's earliest its first recorded iteration began
    (virtual seconds, from :class:`experiment.reporting.timeline.UpPhase` s).

    [R] Jobs started together are, in the simulator, exactly in step; under MLTCP
    (:class:`sim.mltcp.MltcpFlows`) that is a fixed point that never separates (``docs/resolutions.md`` Cassini
    §6.3) however strongly F favours the leader, while the emulated jobs begin a few ms apart (each rank
    passes the start gate at its own moment) and separate from there. So an emulated MLTCP run is
    re-simulated with each job starting this much after the others, its warm-up run from there; under
    max-min the lead of a few ms changes little and jobs start together as recorded.
    """
    first: dict[str, float] = {}
    for ph in phases:
        first[ph.job] = min(first.get(ph.job, ph.start_s), ph.start_s)
    out = {}
    for batch in batches:
        known = [first[j] for j in batch if j in first]
        for job in batch:
            if job in first:
                out[job] = first[job] - min(known)
    return out


def _simulated_jobs(cfg, g, loop: LoopResult, bucket_bytes: Mapping[str, Sequence[int]] | None,
                    batched: bool) -> dict[str, ExperimentJob]:
    """The config's jobs the simulator runs, by name: those the record started, less the left-out
    ones (INA jobs on an engine that does not model INA; in batch mode, jobs without buckets)."""
    started = {st.job for st in loop.starts}
    models_ina = sim_engine(cfg.simulator.mode).models_ina
    out = {}
    for j in experiment_jobs(cfg, g):
        if j.name not in started:
            continue
        if collective_of(j.collective).aggregates_in_fabric and not models_ina:
            continue
        if batched and bucket_bytes is not None and not bucket_bytes.get(j.name):
            continue
        out[j.name] = j
    return out


def _batch_starts(loop: LoopResult, batches: Sequence[Sequence[str]]) -> list[list[Started]]:
    """The loop's starts cut into ``batches``.

    Raises:
        JobError: the batches' jobs, in order, are not the starts' jobs.
    """
    names = [job for batch in batches for job in batch]
    if names != [st.job for st in loop.starts]:
        raise JobError(f"the batches {[list(b) for b in batches]} do not list the loop's starts "
                       f"{[st.job for st in loop.starts]} in order")
    out, i = [], 0
    for batch in batches:
        out.append(list(loop.starts[i:i + len(batch)]))
        i += len(batch)
    return out
