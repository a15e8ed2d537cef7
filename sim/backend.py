"""The simulator back end of the experiment loop: jobs run in the flow-level simulator.

:class:`FlowSimBackend` implements :class:`backend.protocol.Backend` on a
:class:`sim.flowsim.FlowEngine`: a started job becomes a :class:`sim.flowsim.SimJob` on its
placement's machines (rank order), with its model's gradient buckets at the experiment's
scale and its model's compute time per iteration, running the iterations it has left after
its warm-up; a preempted job loses its partial iteration and keeps the ones it completed.
Times are virtual (paper-scale) seconds: emulated bytes over the links' rates at the scale,
undilated, as a run's estimates cost them (:func:`experiment.run.resimulate.simulate_schedule`).
Pure: no root, no processes.

:class:`FluidSimBackend` is the same on the iteration-level engine (:class:`sim.fluid.FluidEngine`),
for traces: each job's progress at a rate set by the water-filling of the running jobs' traffic,
with in-network aggregation for INA jobs (:mod:`sim.ina`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from backend.protocol import Backend, ExperimentJob, RunEnd
from common.errors import JobError
from ina.plan import ps_host_of
from jobs.collective import collective_of
from jobs.models import job_model, scaled_buckets
from jobs.pace import Paces
from jobs.phase import DriftRule
from placement.base import Placement, TimeShift
from sim.flowsim import FlowEngine, JobEstimate, RunState, SimIterationRecord, SimJob, SimOptions, estimate_of
from sim.fluid import FluidEngine, FluidRun, estimate_of_runs
from sim.ina import InaSpec

Link = tuple[str, str]


class FlowSimBackend(Backend):
    """Runs the loop's jobs in the flow-level simulator (see the module docstring).

    Args:
        g: topology graph (routes: :func:`topo.routing.ecmp_path`).
        rate_mbps: every link's rate in Mbit/s at the experiment's scale (undilated).
        scale: the experiment's scale factor (bucket bytes are the model's divided by it).
        warmup_iterations: iterations every (re)start runs before its measured ones.
        options: what the simulator models (headers, latency, token buckets, ECN estimate).
        start_s: the clock's start, seconds.
        bucket_bytes: per job, the buckets to allreduce instead of the model's at the scale (an
            emulated run's measured ones, say).
        ina_switches: the switches that may aggregate an INA job whose placement leaves it to the
            run (``ina_switches`` None); its PS runs on the placement's ``ps_host``, else on its
            rank 0's machine (as :func:`ina.plan.ps_host_of` does on the emulator).
        drift: when a shifted job counts as drifted and whether it is re-aligned
            (:class:`jobs.phase.DriftRule`; default: the spec's).
        start_delays_s: per job, how long after its first start its ranks begin, seconds (a recorded
            run's measured offsets between the jobs it started together, say); none by default.
    """

    name = "sim"
    engine_class = FlowEngine

    def __init__(self, g, rate_mbps: Mapping[Link, float], scale: float, warmup_iterations: int = 0,
                 options: SimOptions = SimOptions(), start_s: float = 0.0,
                 bucket_bytes: Mapping[str, Sequence[int]] | None = None, ina_switches: Sequence[str] = (),
                 drift: DriftRule = DriftRule(), start_delays_s: Mapping[str, float] | None = None):
        self.engine = self.engine_class(g, rate_mbps, options)
        self.start_delays_s = dict(start_delays_s or {})
        self.drift, self.paces = drift, Paces()
        self.phases: dict[str, dict] = {}  # each shifted job's time shift as its last run kept it
        self.ina_switches = tuple(ina_switches)
        if start_s > 0:
            self.engine.advance(start_s)
        self.scale, self.warmup_iterations = scale, warmup_iterations
        self.bucket_bytes = {job: tuple(b) for job, b in (bucket_bytes or {}).items()}
        self.done: dict[str, int] = {}  # measured iterations completed, over every run of a job
        self.records: dict[str, list[SimIterationRecord]] = {}  # every kept iteration, numbered over runs
        self.ecn_marks: dict[str, float] = {}  # estimated marked packets over every run (SimOptions.ecn)
        self._offset: dict[str, int] = {}  # measured iterations before each job's current run

    @property
    def now_s(self) -> float:
        return self.engine.now_s

    def start(self, runs: Sequence[tuple[ExperimentJob, Placement | None]]) -> None:
        now = self.engine.now_s
        for job, p in runs:
            if p is None:
                raise JobError(f"job {job.name!r}: the simulator runs placed jobs only (give the loop a placer)")
            if job.iterations is None:
                raise JobError(f"job {job.name!r}: the simulator needs its work as iterations")
            model = job_model(job.model, job.compute_ms)
            done = self.done.setdefault(job.name, 0)
            self._offset[job.name] = done
            buckets = self.bucket_bytes.get(job.name) or tuple(scaled_buckets(model, self.scale))
            machines = tuple(slot.machine for slot in p.slots)
            ina = None
            if collective_of(job.collective).aggregates_in_fabric:
                switches = self.ina_switches if p.ina_switches is None else tuple(p.ina_switches)
                ina = InaSpec(ps_host_of(p.ps_host, machines), switches)
            self.engine.add(SimJob(name=job.name, machines_by_rank=machines,
                                   collective=job.collective, bucket_bytes=buckets,
                                   compute_s=model.compute_time_s, iterations=job.iterations - done,
                                   warmup_iterations=self.warmup_iterations, ina=ina,
                                   start_s=now + (self.start_delays_s.get(job.name, 0.0) if not done else 0.0)))

    def stop(self, job: str) -> RunEnd:
        return self._end(self.engine.remove(job))

    def shift(self, shifts: Sequence[TimeShift]) -> bool:
        """Align the jobs' iterations on now plus their shifts (:meth:`sim.flowsim.FlowEngine.align`)."""
        keepers, pace = self.drift.keepers(self.engine.now_s, shifts)
        self.paces.join(pace, keepers)
        for job, keeper in keepers.items():
            self.engine.align(job, keeper)
        return True

    def advance(self, until_s: float) -> list[RunEnd]:
        return [self._end(state) for state in self.engine.advance(until_s)]

    def estimate(self, job: str) -> JobEstimate:
        """The job's times over every iteration it completed, in all its runs."""
        recs = self.records.get(job, [])
        end = max((r.start_s + r.iteration_s for r in recs), default=self.now_s)
        marks = self.ecn_marks.get(job) if self.engine.ecn else None
        return estimate_of(job, recs, end, marks)

    def _end(self, state: RunState) -> RunEnd:
        self.paces.leave(state.job)
        offset = self._offset[state.job]
        kept = [dataclasses.replace(r, iteration=r.iteration + offset) for r in state.records
                if r.iteration < state.iterations_done]
        self.records.setdefault(state.job, []).extend(kept)
        if state.phase is not None:
            self.phases[state.job] = state.phase
        if state.ecn_marks is not None:
            self.ecn_marks[state.job] = self.ecn_marks.get(state.job, 0.0) + state.ecn_marks
        self.done[state.job] = offset + state.iterations_done
        return RunEnd(state.job, state.start_s, state.end_s, state.finished, state.iterations_done)


class FluidSimBackend(FlowSimBackend):
    """:class:`FlowSimBackend` on the iteration-level engine (:mod:`sim.fluid`): the same jobs,
    placements and arguments; estimates are means over the measured iterations of every run, with
    no per-iteration records and no ECN estimate."""

    engine_class = FluidEngine

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.runs: dict[str, list[FluidRun]] = {}

    def shift(self, shifts: Sequence[TimeShift]) -> bool:
        """Not applied: the iteration-level engine has no phases to align (the step-level one has)."""
        return False

    def estimate(self, job: str) -> JobEstimate:
        runs = self.runs.get(job, [])
        return estimate_of_runs(job, runs, max((r.end_s for r in runs), default=self.now_s))

    def _end(self, state: FluidRun) -> RunEnd:
        self.runs.setdefault(state.job, []).append(state)
        offset = self._offset[state.job]
        self.done[state.job] = offset + state.iterations_done
        return RunEnd(state.job, state.start_s, state.end_s, state.finished, state.iterations_done)
