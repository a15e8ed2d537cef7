"""Run one job on machines of the caller's choice on a running emulated network.

The experiment runner places jobs with a policy; benchmarks and tests need a job on machines
they choose (:class:`OneJob`). :func:`run_job` launches its ranks (agent or torch runtime),
opens the start gate once all have joined, waits, and returns the records with the start-up
time. Compute and the timeout are given in virtual (paper-scale) seconds and dilated by the
network's dilation.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping

from common.paths import PROJECT_ROOT
from common.sockets import free_tcp_port
from common.units import wall_s
from emulator.variants import worker_runtime
from jobs.records import IterationRecord, read_records
from measure.iterations import job_iteration_times
from workers.launcher import ExecFn, WorkerSpec, open_gate_when_ready, processes, wait_all


@dataclasses.dataclass(frozen=True)
class JobRun:
    """What :func:`run_job` measured.

    Attributes:
        job: the job's name.
        dilation: the network's dilation factor (records hold wall-clock seconds).
        records: every rank's iteration records (wall-clock seconds).
        startup_s: wall seconds from launch until every rank had joined.
        wall_s: wall seconds from launch until every rank had finished.
    """

    job: str
    dilation: float
    records: list[IterationRecord]
    startup_s: float
    wall_s: float

    def comm_mean_s(self) -> float:
        """Mean communication time per iteration (the slowest rank's), in virtual seconds."""
        its = job_iteration_times(self.records, self.dilation)[self.job]
        return sum(v.comm_s for v in its.values()) / len(its)


@dataclasses.dataclass(frozen=True)
class OneJob:
    """A job on machines of the caller's choice, replaying given buckets.

    Attributes:
        name: the job's name.
        machines: rank ``r`` runs on ``machines[r]``.
        collective: its allreduce (``ring``, ``hd``, ``gloo``, ``ina``).
        buckets: bytes allreduced every iteration, already scaled.
        iterations, warmup_iterations: recorded iterations, and unrecorded ones before them.
        compute_s: emulated compute per iteration, virtual seconds.
        runtime: ``agent`` (:mod:`workers.agent`) or ``torch`` (:mod:`workers.worker`).
        timeout_s: virtual seconds before the job is stopped and reported.
        model: the model profile named in its workers' specs.
        ina_endpoints: for collective ``ina``, each machine's
            :class:`workers.launcher.InaEndpoint` (:func:`emulator.ina_fabric.endpoints`); the caller has
            installed the job on the aggregators and started its parameter server
            (:class:`emulator.ina_fabric.InaFabric`).
    """

    name: str
    machines: tuple[str, ...]
    collective: str
    buckets: tuple[int, ...]
    iterations: int = 3
    warmup_iterations: int = 1
    compute_s: float = 0.05
    runtime: str = "agent"
    timeout_s: float = 600.0
    model: str = "vgg16"
    ina_endpoints: Mapping | None = None


def run_job(net, out_dir: str, one: OneJob, spawn: ExecFn | None = None) -> JobRun:
    """Run ``one`` on a running network.

    Args:
        net: a running :class:`emulator.net.EmulatedNetwork` (its ``options.dilation`` applies).
        out_dir: directory of the specs, logs and records.
        one: the job and where its ranks run.
        spawn: starts each worker or agent (default: a process in its machine;
            :class:`emulator.containers.ContainerRunner` for containers).

    Raises:
        JobError: a rank failed or timed out (every rank is stopped first).
    """
    job, machines = one.name, list(one.machines)
    runtime = worker_runtime(one.runtime)
    dilation = net.options.dilation
    timeout = wall_s(one.timeout_s, dilation)
    gate = os.path.join(out_dir, f"{job}.start")
    ips = {m: net.g.nodes[m]["ip"] for m in machines}
    specs = [WorkerSpec(job=job, rank=r, world=len(machines), machine=m, master_addr=ips[machines[0]],
                        master_port=free_tcp_port(), ifname=net.host_intf[m], mode="replay", model=one.model,
                        bucket_bytes=tuple(one.buckets), compute_s=wall_s(one.compute_s, dilation),
                        iterations=one.iterations, warmup_iterations=one.warmup_iterations, collective=one.collective,
                        records_path=os.path.join(out_dir, f"{job}-rank{r}.jsonl"), timeout_s=timeout,
                        start_gate=gate) for r, m in enumerate(machines)]

    def exec_fn(m, argv, env, log):
        return net.popen(m, argv, env=env, log_path=log, cwd=PROJECT_ROOT)

    exec_fn = spawn or exec_fn

    t0 = time.monotonic()
    workers, _ = runtime.launch(job, specs, ips, exec_fn, out_dir, timeout,
                                dict(one.ina_endpoints) if one.ina_endpoints else None)
    try:
        open_gate_when_ready(workers, gate, timeout)
        startup_s = time.monotonic() - t0
        wait_all(workers, timeout_s=timeout)
    finally:
        for proc in processes(workers):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            net.forget(proc)
        if os.path.exists(gate):
            os.remove(gate)
    records = [r for s in specs for r in read_records(s.records_path)]
    return JobRun(job, dilation, records, startup_s, time.monotonic() - t0)
