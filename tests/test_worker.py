"""The real worker program (python -m workers.worker) run through workers.launcher on 127.0.0.1 over gloo.

Each launch starts one torch process per rank (about 2 s of CPU each), so the cases are few
and small: tiny replay buckets, the small CNN, a handful of iterations.
"""

from __future__ import annotations

import dataclasses
import math
import time

import pytest

from common.errors import JobError
from common.sockets import free_tcp_port
from jobs.models import get_model
from jobs.records import read_job_records
from placement.base import GpuSlot, JobRequest, Placement
from workers.launcher import Addresses, RankSettings, launch, local_exec, plan_workers, wait_all

ITERATIONS = 3
WAIT_S = 90


def _specs(tmp_path, world, mode, collective, model="small_cnn", scale=50.0):
    """Specs of a job whose ranks alternate between two local 'machines' on 127.0.0.1 (interface lo)."""
    job = JobRequest("job1", model, world, collective=collective)
    placement = Placement("job1", tuple(GpuSlot(f"m{r % 2}", r // 2) for r in range(world)))
    run = RankSettings(scale, ITERATIONS, 1, mode, tmp_path, timeout_s=60)
    return plan_workers(job, placement, get_model(model), run,
                        Addresses({"m0": "127.0.0.1", "m1": "127.0.0.1"}, {"m0": "lo", "m1": "lo"}), free_tcp_port())


@pytest.mark.parametrize("world, mode, collective", [
    (2, "replay", "ring"),
    (3, "replay", "hd"),
    (2, "train", "gloo"),
    (3, "train", "ring"),
])
def test_job_runs_and_records(tmp_path, world, mode, collective):
    """Every rank records each iteration once, with bytes equal to the bucket sum and sane timings."""
    specs = _specs(tmp_path, world, mode, collective)
    started_s = time.time()
    wait_all(launch(specs, local_exec, tmp_path), timeout_s=WAIT_S)
    recs = read_job_records(s.records_path for s in specs)
    assert [(r.iteration, r.rank) for r in recs] == [(i, r) for i in range(ITERATIONS) for r in range(world)]
    profile = get_model("small_cnn")
    expected_buckets = specs[0].bucket_bytes if mode == "replay" else profile.bucket_bytes
    for r in recs:
        assert (r.job, r.world, r.mode, r.collective) == ("job1", world, mode, collective)
        assert r.bucket_bytes == expected_buckets and r.bytes == sum(expected_buckets)
        assert len(r.bucket_comm_s) == len(expected_buckets)
        assert r.comm_s == pytest.approx(sum(r.bucket_comm_s))
        assert r.comm_s > 0 and r.compute_s > 0 and r.iteration_s >= r.comm_s
        assert started_s <= r.start_time_s <= time.time()
    if mode == "replay":
        assert all(r.compute_s >= specs[0].compute_s for r in recs)  # the emulated compute sleep
        assert all(r.loss is None for r in recs)
    else:
        # the real DDP buckets are the profile's, and the exact allreduce keeps the replicas identical
        assert profile.param_bytes == sum(expected_buckets)
        for i in range(ITERATIONS):
            assert len({r.param_checksum for r in recs if r.iteration == i}) == 1
        for rank in range(world):
            losses = [r.loss for r in recs if r.rank == rank]
            assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]


def test_failing_rank_raises_and_leaves_nothing_running(tmp_path):
    """A rank with a bad collective name fails; wait_all names it and its log, and kills rank 0."""
    specs = _specs(tmp_path, 2, "replay", "ring")
    specs[1] = dataclasses.replace(specs[1], collective="nope")
    workers = launch(specs, local_exec, tmp_path)
    with pytest.raises(JobError) as err:
        wait_all(workers, timeout_s=WAIT_S)
    msg = str(err.value)
    assert "rank 1 on m1 failed with exit code 1" in msg and workers[1].log_path in msg
    assert "workers.worker: job job1 rank 1: JobError: unknown collective 'nope'" in msg
    assert all(w.process.poll() is not None for w in workers)


def test_hung_job_times_out_and_is_killed(tmp_path):
    """A job still computing when time runs out is killed, and the error says it timed out."""
    specs = [dataclasses.replace(s, compute_s=60.0) for s in _specs(tmp_path, 2, "replay", "hd")]
    workers = launch(specs, local_exec, tmp_path)
    with pytest.raises(JobError, match=r"timed out after 4 s with ranks \[0, 1\] still running"):
        wait_all(workers, timeout_s=4)
    assert all(w.process.poll() is not None for w in workers)


def test_worker_main_reports_one_line_error(tmp_path, capsys):
    """The worker's entry point returns 1 with one error line for an unreadable spec, 2 for bad usage."""
    from workers.worker import main

    assert main([str(tmp_path / "missing.json")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("workers.worker: ") and "cannot read worker spec" in err
    assert main([]) == 2
