"""The worker program run inside an emulated host: ``python -m workers.worker SPEC.json``.

It reads a :class:`workers.launcher.WorkerSpec`, joins the job's gloo process group and runs its
iterations in ``replay`` mode (emulated compute, then each bucket allreduced with the job's
collective, timed and checked) or ``train`` mode (real DDP training with a communication hook
timing the collective), following its job's time shift (:class:`jobs.phase.ShiftFollower`) and
appending one record per measured iteration (:mod:`jobs.records`).

Both modes, barriers, shifts, records and exit codes: ``docs/fidelity.md`` (The torch worker).
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from common.errors import JobError
from jobs.collective import collective_of
from jobs.models import get_model
from jobs.modes import work_mode
from jobs.phase import ShiftFollower
from jobs.records import record_iteration
from workers import nets
from workers.collectives import Allreduce, get_collective
from workers.collectives.ina import InaCollective
from workers.launcher import WorkerSpec, ready_path

TRAIN_LR = 0.05
_START_MONOTONIC = time.monotonic()


def run(spec: WorkerSpec) -> None:
    """Run one worker to completion; raises on any failure."""
    make_collective = _collective(spec)  # a bad name or INA spec fails before the process group forms
    model_cls = None
    if work_mode(spec.mode).trains:
        get_model(spec.model)
        if spec.model not in nets.TRAINABLE:
            raise JobError(f"train mode cannot train model {spec.model!r}; "
                           f"trainable: {', '.join(sorted(nets.TRAINABLE))}")
        model_cls = nets.TRAINABLE[spec.model]
    if spec.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = spec.ifname
    Path(spec.records_path).write_text("", encoding="utf-8")
    print(f"job {spec.job} rank {spec.rank}/{spec.world} on {spec.machine}: mode={spec.mode} "
          f"model={spec.model} collective={spec.collective} buckets={len(spec.bucket_bytes)} "
          f"({sum(spec.bucket_bytes)} B) master={spec.master_addr}:{spec.master_port} ifname={spec.ifname}")
    dist.init_process_group("gloo", init_method=f"tcp://{spec.master_addr}:{spec.master_port}",
                            rank=spec.rank, world_size=spec.world,
                            timeout=datetime.timedelta(seconds=spec.timeout_s))
    print(f"job {spec.job} rank {spec.rank}: joined the process group ({_uptime_s():.1f} s after imports)")
    collective = make_collective()
    if spec.start_gate:
        _wait_for_gate(spec)
    try:
        if model_cls is None:
            _replay(spec, collective)
        else:
            _train(spec, collective, model_cls)
        dist.barrier()
        if isinstance(collective, InaCollective):
            collective.close()
    finally:
        dist.destroy_process_group()
    print(f"job {spec.job} rank {spec.rank}: done, {spec.iterations} iterations recorded "
          f"({_uptime_s():.1f} s after imports)")


def _collective(spec: WorkerSpec) -> Callable[[], Allreduce]:
    """The job's collective, checked now and built by the returned call once the process group
    exists (INA's makes the groups of each machine's ranks).

    Raises:
        JobError: an unknown collective, or an INA spec without its endpoint or rank machines.
    """
    if collective_of(spec.collective).aggregates_in_fabric:
        InaCollective.check(spec)
        return lambda: InaCollective(spec)
    collective = get_collective(spec.collective)
    return lambda: collective


def _wait_for_gate(spec: WorkerSpec, poll_s: float = 0.02) -> None:
    """Signal readiness, then wait until the start gate file exists (bounded by ``timeout_s``)."""
    Path(ready_path(spec)).write_text(f"{time.time()}\n", encoding="utf-8")
    deadline = time.monotonic() + spec.timeout_s
    while not os.path.exists(spec.start_gate):
        if time.monotonic() > deadline:
            raise JobError(f"start gate {spec.start_gate} did not open within {spec.timeout_s:.0f} s")
        time.sleep(poll_s)


def _uptime_s() -> float:
    """Seconds since this module was imported (for the log)."""
    return time.monotonic() - _START_MONOTONIC


def _replay(spec: WorkerSpec, collective: Allreduce) -> None:
    buffers = [torch.empty(b // 4, dtype=torch.float32) for b in spec.bucket_bytes]
    sizes = list(spec.bucket_bytes)
    shift = ShiftFollower(spec.shift_path, announce=spec.rank == 0)
    for it in range(spec.warmup_iterations + spec.iterations):
        if it == spec.warmup_iterations:
            dist.barrier()
        for buf in buffers:
            buf.fill_(1.0)
        start_time_s, t0 = shift.start_in_phase(), time.perf_counter()
        time.sleep(spec.compute_s)
        t1 = time.perf_counter()
        times = []
        for buf in buffers:
            s = time.perf_counter()
            collective(buf)
            times.append(time.perf_counter() - s)
        end = time.perf_counter()
        for i, buf in enumerate(buffers):
            if buf[0].item() != spec.world or buf[-1].item() != spec.world:
                raise JobError(f"collective {spec.collective!r} gave a wrong sum in bucket {i}: "
                               f"{buf[0].item()} / {buf[-1].item()}, expected {spec.world}")
        if it >= spec.warmup_iterations:
            record_iteration(spec, it - spec.warmup_iterations, start_time_s, t1 - t0, end - t0, sizes, times,
                             phase=shift.record())


class _HookState:
    """What the DDP communication hook needs and what it measures in one iteration."""

    def __init__(self, collective: Allreduce, world: int):
        self.collective = collective
        self.world = world
        self.sizes: list[int] = []
        self.times: list[float] = []

    def reset(self) -> None:
        self.sizes, self.times = [], []


def _collective_hook(state, bucket):
    """DDP communication hook: average the bucket with the job's collective, timing it.

    ``state`` is a :class:`_HookState`, ``bucket`` a ``dist.GradBucket``; returns a completed
    ``torch.futures.Future`` holding the averaged buffer. (No annotations: DDP compares them
    with the real classes, and this module's postponed annotations would be strings.)
    """
    buf = bucket.buffer()
    s = time.perf_counter()
    state.collective(buf)
    state.times.append(time.perf_counter() - s)
    state.sizes.append(buf.numel() * buf.element_size())
    buf.div_(state.world)
    fut: torch.futures.Future = torch.futures.Future()
    fut.set_result(buf)
    return fut


def _train(spec: WorkerSpec, collective: Allreduce, model_cls) -> None:
    torch.manual_seed(spec.seed)
    model = model_cls()
    ddp = DistributedDataParallel(model)
    state = _HookState(collective, spec.world)
    ddp.register_comm_hook(state, _collective_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=TRAIN_LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = nets.synthetic_batch(get_model(spec.model).batch_size, seed=spec.seed * 1000 + spec.rank)
    shift = ShiftFollower(spec.shift_path, announce=spec.rank == 0)
    for it in range(spec.warmup_iterations + spec.iterations):
        if it == spec.warmup_iterations:
            dist.barrier()
        state.reset()
        start_time_s, t0 = shift.start_in_phase(), time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        optimizer.step()
        end = time.perf_counter()
        if it >= spec.warmup_iterations:
            with torch.no_grad():
                checksum = float(sum(p.double().sum() for p in model.parameters()))
            record_iteration(spec, it - spec.warmup_iterations, start_time_s, (end - t0) - sum(state.times),
                             end - t0, state.sizes, state.times, loss=float(loss.item()), checksum=checksum,
                             phase=shift.record())


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the worker described by the spec file in ``argv``; return the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m workers.worker SPEC.json", file=sys.stderr)
        return 2
    where = args[0]
    try:
        spec = WorkerSpec.load(args[0])
        where = f"job {spec.job} rank {spec.rank}"
        run(spec)
    except Exception as exc:  # the launcher reads this one line from the log; exit non-zero
        if os.environ.get("JOBS_WORKER_DEBUG") == "1":
            traceback.print_exc()
        msg = " ".join(str(exc).split())
        print(f"workers.worker: {where}: {type(exc).__name__}: {msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every record is written and closed, the process group destroyed: leave without the interpreter's
    # teardown, in which torch's C++ threads (a DDP reducer's, gloo's) may abort the process ("terminate
    # called without an active exception", exit code -6) after a run that succeeded.
    os._exit(code)
