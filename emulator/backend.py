"""The emulator back end of the experiment loop: jobs run as real processes in the emulated network.

:class:`EmulatorBackend` implements :class:`backend.protocol.Backend` on a running
:class:`emulator.net.EmulatedNetwork`: ``start`` launches every rank of a *batch* (the jobs
starting at one instant) behind one start gate, ``advance`` waits for a job to end or the loop's
next event while checking the controller and the switch daemon, ``stop`` kills a job's processes
(preemption), and a batch whose last job has ended becomes a :class:`BatchResult`. The clock is
the wall clock since the back end was made, divided by the dilation: virtual, paper-scale
seconds like every reported time.

Each call in full: ``docs/architecture.md`` (The emulator back end).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence

from backend.protocol import Backend, ExperimentJob, RunEnd
from common.errors import JobError, TestbedError
from common.paths import PROJECT_ROOT
from common.sockets import free_tcp_port
from common.units import wall_s
from emulator import flows
from emulator.ina_runs import InaRuns
from emulator.net import EmulatedNetwork
from emulator.pacing import PaceFeed
from emulator.variants import worker_runtime
from experiment.config.schema import ExperimentConfig
from jobs.collective import collective_of
from jobs.models import job_model
from jobs.pace import Paces
from jobs.phase import SHIFT_GUARD_S, write_shift
from jobs.records import measured_window_s, read_records
from placement.base import Placement, TimeShift
from workers.agent import read_conns
from workers.launcher import (
    LIVENESS_INTERVAL_S,
    Addresses,
    ExecFn,
    RankSettings,
    RunningWorker,
    exit_failure,
    open_gate_when_ready,
    plan_workers,
    processes,
    stop_all,
    timeout_failure,
)

SHIFT_FILE = "shift.json"
"""A running job's time shift, in its run directory, which its workers follow (``jobs.phase``)."""
POLL_S = 0.05
"""How often a waiting back end polls its jobs' processes."""
COUNTER_SETTLE_S = 0.2
"""Wait after a batch's last job before reading the port counters: the last packets reach them."""


@dataclasses.dataclass
class BatchResult:
    """What one batch (jobs started together) produced; its ``index`` is the ``wave`` of the outputs."""

    index: int
    jobs: list[str]
    duration_s: float
    link_bytes: dict  # (u, v) -> bytes over the whole batch (kernel counters)
    records: list  # IterationRecord of every rank of every job of the batch
    window_s: tuple[float, float] | None = None  # first recorded iteration start .. last end
    ecn: dict | None = None  # marks per job from the start gate to the batch's end (None: not measured)
    startup_s: float | None = None  # launch until every rank had joined (wall seconds)

    def __post_init__(self):
        if self.records and self.window_s is None:
            self.window_s = measured_window_s(self.records)


@dataclasses.dataclass
class _Run:
    """One run of a job: its batch, workers and where it started (virtual seconds)."""

    job: ExperimentJob
    batch: int
    workers: list[RunningWorker]
    start_s: float
    iterations: int
    offset: int  # measured iterations of the job's earlier runs: this run's iteration 0 is this one
    dir: str = ""  # the run's output directory


@dataclasses.dataclass
class _Batch:
    """Jobs started at one instant, and the counters read at their start."""

    index: int
    jobs: list[str]
    t_launch: float
    before: dict
    ecn_before: dict | None
    conns: dict
    startup_s: float | None
    stop_progress: object
    records: list = dataclasses.field(default_factory=list)
    open: set = dataclasses.field(default_factory=set)


def ecn_snapshot(net: EmulatedNetwork) -> dict:
    """Marker flow counters and every host's received-CE counter, now."""
    ce = {m: flows.netstat_counters(h.pid).get("IpExtInCEPkts", 0) for m, h in net.hosts.items()}
    return {"flows": net.marker.flow_counters() if net.marker is not None else None, "receiver_ce": ce}


def ecn_of_wave(before: dict, after: dict, conns_by_job: dict) -> dict:
    """Marks per job between two :func:`ecn_snapshot` s, attributed through the jobs' connections.

    A job's ``pkts`` and ``bytes`` are summed over the switch ports its packets crossed (one
    count per hop); ``marks`` count each marked packet once (a CE packet is not marked again).
    """
    received = {m: after["receiver_ce"][m] - before["receiver_ce"].get(m, 0) for m in after["receiver_ce"]}
    out = {"receiver_ce": received, "receiver_ce_total": sum(received.values())}
    if before["flows"] is None:
        return out  # RED marks per port only; per-job attribution needs the BPF marker's flow counters
    by_job = flows.attribute(flows.flow_deltas(before["flows"], after["flows"]), flows.owners(conns_by_job))
    out["jobs"] = {job: by_job.get(job, {"pkts": 0, "bytes": 0, "marks": 0}) for job in conns_by_job}
    out["unattributed"] = by_job.get(None, {"pkts": 0, "bytes": 0, "marks": 0})
    out["connections"] = {job: len(c) for job, c in conns_by_job.items()}
    return out


class EmulatorBackend(Backend):
    """Runs the loop's jobs in the emulated network (see the module docstring).

    Args:
        cfg: the experiment (mode, runtime, scale, dilation, iterations, timeouts).
        net: the running network.
        out_dir: the policy's results directory; jobs write under ``out_dir/jobs``.
        progress: ``say(msg)`` prints a progress line; ``watch(specs, iterations)`` starts a
            progress thread and returns an Event that stops it (:class:`emulator.runner.Progress`).
        on_batch: called with each batch's index and its ``(job, placement)`` pairs as it starts.
        before_first: called with the first batch's ``(job, placement)`` pairs before any of its
            workers starts (the CLI of ``run --cli``, :mod:`emulator.shell`); the clock does not
            count the time it takes.
        ina: the policy's INA jobs on the fabric (:class:`emulator.ina_runs.InaRuns`); None when
            no job uses collective ``ina``.
        spawn: starts one worker or agent (:data:`workers.launcher.ExecFn`); default: a process in
            its machine (:meth:`emulator.net.EmulatedNetwork.popen`); workers in containers:
            :class:`emulator.containers.ContainerRunner`.
    """

    name = "emu"

    def __init__(self, cfg: ExperimentConfig, net: EmulatedNetwork, out_dir: str, progress,
                 on_batch: Callable[[int, list[tuple[ExperimentJob, Placement]]], None] | None = None,
                 ina: InaRuns | None = None, spawn: ExecFn | None = None,
                 before_first: Callable[[list[tuple[ExperimentJob, Placement]]], None] | None = None):
        self.cfg, self.net, self.out_dir, self.progress = cfg, net, out_dir, progress
        self.spawn = spawn or self._popen
        self.on_batch, self.before_first = on_batch, before_first
        self.ina = ina
        self.runtime = worker_runtime(cfg.runtime, cfg.mode)
        self.t0 = time.monotonic()
        self.timeout_s = wall_s(cfg.job_timeout_s, cfg.dilation)
        self.ips = {m: net.g.nodes[m]["ip"] for m in net.hosts}
        self.running: dict[str, _Run] = {}
        self.batches: list[_Batch] = []
        self.waves: list[BatchResult] = []
        self.done_iterations: dict[str, int] = {}
        self.runs_of: dict[str, int] = {}
        self.drift = cfg.time_shifts.rule()
        self.paces, self.feeds = Paces(), []  # each shifted job's decision line, fed from its records

    def _popen(self, machine: str, argv: list[str], env: dict, log_path: str):
        return self.net.popen(machine, argv, env=env, log_path=log_path, cwd=PROJECT_ROOT)

    @property
    def now_s(self) -> float:
        return (time.monotonic() - self.t0) / self.cfg.dilation

    # -- the protocol ------------------------------------------------------------------------
    def start(self, runs: Sequence[tuple[ExperimentJob, Placement | None]]) -> None:
        index = len(self.batches)
        jobs_dir = os.path.join(self.out_dir, "jobs")
        gate = os.path.join(jobs_dir, f"wave{index}.start")
        specs_by_job, dirs = {}, {}
        for job, p in runs:
            if p is None:
                raise JobError(f"job {job.name!r}: the emulator runs placed jobs only (give the loop a placer)")
            if job.name in self.running:
                raise JobError(f"job {job.name!r} is already running")
            n = self.runs_of[job.name] = self.runs_of.get(job.name, 0) + 1
            dirs[job.name] = os.path.join(jobs_dir, job.name if n == 1 else f"{job.name}.run{n}")
            os.makedirs(dirs[job.name], exist_ok=True)
            left = job.iterations - self.done_iterations.get(job.name, 0)
            run = RankSettings(self.cfg.scale, left, self.cfg.warmup_iterations, self.cfg.mode, dirs[job.name],
                               timeout_s=self.timeout_s, seed=self.cfg.seed, start_gate=gate,
                               dilation=self.cfg.dilation, shift_path=os.path.join(dirs[job.name], SHIFT_FILE))
            specs_by_job[job.name] = plan_workers(job, p, job_model(job.model, job.compute_ms), run,
                                                  Addresses(self.ips, self.net.host_intf), free_tcp_port())
        if self.on_batch is not None:
            self.on_batch(index, list(runs))
        if index == 0 and self.before_first is not None:
            t = time.monotonic()
            self.before_first(list(runs))
            self.t0 += time.monotonic() - t  # the loop's clock stood still meanwhile

        before = self.net.counters.switch_counters()
        t_launch = time.time()
        workers_by_job, plans, ina_endpoints = {}, [], {}
        try:
            for job, p in runs:
                if collective_of(job.collective).aggregates_in_fabric:
                    if self.ina is None:
                        raise JobError(f"job {job.name!r} uses collective {job.collective!r} but the network has no "
                                       "INA fabric")
                    ina_endpoints[job.name] = self.ina.start(job, p)
            for job, specs in specs_by_job.items():
                workers_by_job[job], job_plans = self.runtime.launch(job, specs, self.ips, self.spawn, dirs[job],
                                                                     self.timeout_s, ina_endpoints.get(job))
                plans.extend(job_plans)
        except BaseException:
            stop_all([w for ws in workers_by_job.values() for w in ws])
            for job in ina_endpoints:
                self.ina.end(job, dirs[job])
            raise
        all_workers = [w for ws in workers_by_job.values() for w in ws]
        for job, _ in runs:
            done = self.done_iterations.get(job.name, 0)
            self.running[job.name] = _Run(job, index, workers_by_job[job.name], self.now_s,
                                          job.iterations - done, done, dirs[job.name])
        stop_progress = self.progress.watch([w.spec for w in all_workers], self.cfg.iterations)
        ecn_before, conns = None, {job: set() for job in specs_by_job}
        try:
            startup_s = open_gate_when_ready(all_workers, gate, timeout_s=self.timeout_s,
                                             check=self._check_alive)
        except BaseException:
            stop_progress.set()
            raise
        if startup_s is not None:
            if self.net.options.ecn.measures:
                ecn_before = ecn_snapshot(self.net)
                if plans:
                    for job, c in read_conns(plans).items():
                        conns[job].update(c)
                else:
                    for w in all_workers:
                        conns[w.spec.job].update(flows.sockets_of(w.process.pid))
            self.progress.say(f"      all {len(all_workers)} ranks joined after {startup_s:.1f} s; "
                              f"iterations start together")
        self.batches.append(_Batch(index, list(specs_by_job), t_launch, before, ecn_before, conns, startup_s,
                                   stop_progress, open=set(specs_by_job)))

    def shift(self, shifts: Sequence[TimeShift]) -> bool:
        """Align the running jobs' iterations from now (wall clock, every rank's): each job's shift
        file gets now as its origin and the shift, period and drift threshold dilated; every rank
        follows it before each iteration (:class:`jobs.phase.ShiftFollower`), in either runtime and
        mode. The file is in the job's run directory, which a worker container has bind-mounted at
        its own path and every server of a cluster sees at its path (the cluster's precheck refuses
        one that does not); a rank on another server times the shift by that server's wall clock,
        so its phase is as good as the servers' clock synchronisation (§5.4 asks for NTP or PTP).
        Returns True: applied."""
        origin, d = time.time(), self.cfg.dilation
        for s in shifts:
            if s.job not in self.running:
                raise JobError(f"cannot shift job {s.job!r}: it is not running")
        keepers, pace = self.drift.keepers(origin, shifts, d, at_once=False)
        self.paces.join(pace, keepers)
        guard = max([SHIFT_GUARD_S] + [0.1 * s.period_s * d for s in shifts])
        files = {}
        for job, keeper in keepers.items():
            files[job] = os.path.join(self.running[job].dir, SHIFT_FILE)
            write_shift(files[job], keeper, origin, guard)
        if pace is not None:
            self.feeds = [f for f in self.feeds if f.pace.members] + [PaceFeed(pace, keepers, files, guard)]
        return True

    def stop(self, job: str) -> RunEnd:
        run = self.running.get(job)
        if run is None:
            raise JobError(f"job {job!r} is not running")
        stop_all(run.workers)
        return self._end(run, finished=False)

    def advance(self, until_s: float) -> list[RunEnd]:
        last_check = 0.0
        while True:
            now = time.monotonic()
            if self.running and now - last_check >= LIVENESS_INTERVAL_S:
                last_check = now
                self._checked(self._check_alive)
            ended = [run for _, run in sorted(self.running.items()) if self._exited(run)]
            if ended:
                self._checked(self._check_alive)  # also a death after the last liveness check
                return [self._end(run, finished=True) for run in ended]
            if self.now_s >= until_s or (not self.running and until_s == float("inf")):
                return []
            self._check_timeouts()
            for feed in self.feeds:
                feed.poll()
            time.sleep(POLL_S)

    def close(self) -> None:
        """Stop every job still running (after an error or an interruption); idempotent."""
        for run in list(self.running.values()):
            stop_all(run.workers)
            self.running.pop(run.job.name, None)
            if self.ina is not None:
                try:
                    self.ina.end(run.job.name, run.dir)
                except TestbedError:
                    pass  # closing after a failure: the fabric goes with the network, the failure is raised
        for batch in self.batches:
            batch.stop_progress.set()

    # -- internals ---------------------------------------------------------------------------
    def _check_alive(self) -> None:
        """Raise naming the first part of the network, or INA aggregator or parameter server, that died."""
        self.net.check_alive()
        if self.ina is not None:
            self.ina.fabric.check_alive()

    def _checked(self, check) -> None:
        """Run ``check``; if it raises, stop every job first."""
        try:
            check()
        except BaseException:
            self.close()
            raise

    def _exited(self, run: _Run) -> bool:
        """Whether every process of ``run`` exited 0; a failure stops every job and raises."""
        codes = [w.process.poll() for w in run.workers]
        error = exit_failure(run.workers, codes)
        if error is not None:
            self.close()
            raise error
        return all(c == 0 for c in codes)

    def _check_timeouts(self) -> None:
        for run in self.running.values():
            if time.time() - self.batches[run.batch].t_launch > self.timeout_s:
                codes = [w.process.poll() for w in run.workers]
                self.close()
                raise timeout_failure(run.workers, codes, self.timeout_s)

    def _end(self, run: _Run, finished: bool) -> RunEnd:
        """Collect ``run``'s records; close its batch if it was the batch's last job."""
        del self.running[run.job.name]
        self.paces.leave(run.job.name)
        records = []
        for spec in {w.spec.records_path: w.spec for w in run.workers}.values():
            if os.path.exists(spec.records_path):
                records += read_records(spec.records_path)
        per_rank: dict[int, int] = {}
        for r in records:
            per_rank[r.rank] = per_rank.get(r.rank, 0) + 1
        done = min((per_rank.get(rank, 0) for rank in range(run.job.workers)), default=0)
        done = run.iterations if finished else min(done, run.iterations)
        # A preempted run's partial iteration (recorded by the ranks that were ahead) is lost: the
        # job's next run does it again. Iterations are numbered on across the job's runs.
        records = [dataclasses.replace(r, iteration=r.iteration + run.offset) for r in records if r.iteration < done]
        self.done_iterations[run.job.name] = run.offset + done
        batch = self.batches[run.batch]
        batch.records += records
        batch.open.discard(run.job.name)
        for proc in processes(run.workers):
            self.net.forget(proc)
        if self.ina is not None:
            self.ina.end(run.job.name, run.dir)
        end = RunEnd(run.job.name, run.start_s, self.now_s, finished, done)
        if not batch.open:
            self._close_batch(batch)
        return end

    def _close_batch(self, batch: _Batch) -> None:
        batch.stop_progress.set()
        duration = time.time() - batch.t_launch
        time.sleep(COUNTER_SETTLE_S)
        after = self.net.counters.switch_counters()
        ecn = ecn_of_wave(batch.ecn_before, ecn_snapshot(self.net), batch.conns) \
            if batch.ecn_before is not None else None
        self.progress.say(f"    wave {batch.index} done in {duration:.1f} s")
        moved = self.net.counters.link_bytes(batch.before, after)
        self.waves.append(BatchResult(batch.index, batch.jobs, duration, moved, batch.records, ecn=ecn,
                                      startup_s=batch.startup_s))


def run_batch(cfg: ExperimentConfig, net: EmulatedNetwork, placed: Sequence[tuple[ExperimentJob, Placement]],
              out_dir: str, progress) -> BatchResult:
    """Run jobs together on their placements until every one has finished; their wave's result."""
    backend = EmulatorBackend(cfg, net, out_dir, progress)
    try:
        backend.start(placed)
        while backend.running:
            backend.advance(float("inf"))
    finally:
        backend.close()
    return backend.waves[-1]
