"""workers.launcher: planning worker specs, launching through an exec function, waiting and killing.

These tests use stand-in commands (no torch); tests/test_worker.py runs real workers.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from conftest import REPO, ranks_on

from common.errors import JobError
from jobs.models import get_model, scaled_buckets
from placement.base import JobRequest
from workers.launcher import Addresses, RankSettings, WorkerSpec, launch, local_exec, plan_workers, wait_all

IPS = {"h1": "10.0.0.1", "h2": "10.0.0.2", "h3": "10.0.0.3"}
IFNAMES = {"h1": "h1-eth0", "h2": "h2-eth0"}


def _plan(tmp_path, machines=("h2", "h1", "h2"), model="resnet50", mode="replay", collective="ring", **kw):
    job = JobRequest("j", model, len(machines), collective=collective)
    run = RankSettings(100.0, 5, 1, mode, tmp_path, **kw)
    return plan_workers(job, ranks_on("j", list(machines)), get_model(model), run, Addresses(IPS, IFNAMES), 29500)


def test_plan_places_ranks_on_slots(tmp_path):
    """Rank r runs on slot r's machine; rank 0's machine is the master; co-located ranks share a NIC."""
    specs = _plan(tmp_path)
    assert [s.rank for s in specs] == [0, 1, 2] and all(s.world == 3 for s in specs)
    assert [s.machine for s in specs] == ["h2", "h1", "h2"]
    assert {s.master_addr for s in specs} == {"10.0.0.2"}
    assert [s.ifname for s in specs] == ["h2-eth0", "h1-eth0", "h2-eth0"]
    assert len({s.records_path for s in specs}) == 3
    assert all(Path(s.records_path).parent == tmp_path for s in specs)


def test_plan_scales_replay_buckets_only(tmp_path):
    """Replay buckets are scaled by the factor; train mode keeps the real model's unscaled buckets."""
    replay = _plan(tmp_path)[0]
    assert replay.bucket_bytes == scaled_buckets(get_model("resnet50"), 100.0)
    assert replay.compute_s == get_model("resnet50").compute_time_s
    train = _plan(tmp_path, model="small_cnn", mode="train")[0]
    assert train.bucket_bytes == get_model("small_cnn").bucket_bytes


def test_plan_machine_without_interface_gets_none(tmp_path):
    """A machine missing from machine_ifname leaves gloo to choose (ifname None)."""
    assert _plan(tmp_path, machines=("h3", "h1"))[0].ifname is None


@pytest.mark.parametrize("kw, message", [
    ({"collective": "tree"}, "unknown collective 'tree'"),
    ({"mode": "simulate"}, "unknown mode 'simulate'"),
    ({"mode": "train"}, "mode 'train' trains only small_cnn, not 'resnet50'"),
    ({"machines": ("h1", "h9")}, r"no IP address for machines \['h9'\]"),
])
def test_plan_rejects_bad_requests(tmp_path, kw, message):
    """Bad collective, mode, untrainable model or unknown machine raise JobError saying which."""
    with pytest.raises(JobError, match=message):
        _plan(tmp_path, **kw)


def test_plan_rejects_inconsistent_inputs(tmp_path):
    """A placement of another job, a wrong slot count or another model's profile raise JobError."""
    job = JobRequest("j", "vgg16", 2)
    args = (get_model("vgg16"), RankSettings(100.0, 1, 0, "replay", tmp_path), Addresses(IPS, IFNAMES))
    kw = dict(master_port=29500)
    with pytest.raises(JobError, match="placement is for job 'k'"):
        plan_workers(job, ranks_on("k", ["h1", "h2"]), *args, **kw)
    with pytest.raises(JobError, match="2 workers but 3 slots"):
        plan_workers(job, ranks_on("j", ["h1", "h2", "h2"]), *args, **kw)
    with pytest.raises(JobError, match="profile given is 'resnet50'"):
        plan_workers(job, ranks_on("j", ["h1", "h2"]), get_model("resnet50"), *args[1:], **kw)


def test_spec_json_round_trip_and_strictness(tmp_path):
    """A spec survives save/load; unknown keys and invalid values raise JobError."""
    spec = _plan(tmp_path)[1]
    spec.save(tmp_path / "s.json")
    assert WorkerSpec.load(tmp_path / "s.json") == spec
    with pytest.raises(JobError, match="unknown keys"):
        WorkerSpec.from_dict({**spec.to_dict(), "gpu": 0})
    with pytest.raises(JobError, match="rank must be in"):
        dataclasses.replace(spec, rank=3)
    with pytest.raises(JobError, match="multiples of 4"):
        dataclasses.replace(spec, bucket_bytes=(6,))
    with pytest.raises(JobError, match="cannot read worker spec"):
        WorkerSpec.load(tmp_path / "missing.json")


def _stand_in(programs: dict[int, str], calls: list | None = None):
    """An exec_fn that runs ``python -c programs[rank]`` locally instead of the worker."""
    def exec_fn(machine, argv, env, log_path):
        if calls is not None:
            calls.append((machine, list(argv), env))
        rank = WorkerSpec.load(argv[-1]).rank
        return local_exec(machine, [sys.executable, "-c", programs[rank]], env, log_path)
    return exec_fn


def test_launch_runs_worker_command_and_waits(tmp_path):
    """launch passes the worker argv and an env with the project on PYTHONPATH; wait_all returns the codes."""
    specs = _plan(tmp_path)
    calls: list = []
    workers = launch(specs, _stand_in({r: "print('ok')" for r in range(3)}, calls), tmp_path)
    assert wait_all(workers, timeout_s=30) == [0, 0, 0]
    for (machine, argv, env), spec, w in zip(calls, specs, workers, strict=True):
        assert machine == spec.machine
        assert argv == [sys.executable, "-m", "workers.worker", w.spec_path]
        assert env["PYTHONPATH"].split(":")[0] == str(REPO)
        assert WorkerSpec.load(w.spec_path) == spec
        assert Path(w.log_path).read_text().strip() == "ok"


def test_failed_rank_kills_the_others(tmp_path):
    """A rank exiting non-zero makes wait_all kill the rest and raise naming rank, exit code and log."""
    hang = "import signal; signal.pause()"  # until killed
    fail = "import sys; print('boom: bad things'); sys.exit(3)"
    workers = launch(_plan(tmp_path), _stand_in({0: hang, 1: fail, 2: hang}), tmp_path)
    with pytest.raises(JobError) as err:
        wait_all(workers, timeout_s=30)
    msg = str(err.value)
    assert "job 'j': rank 1 on h1 failed with exit code 3" in msg
    assert workers[1].log_path in msg and "boom: bad things" in msg
    assert all(w.process.poll() is not None for w in workers)
    assert workers[0].process.returncode == workers[2].process.returncode == -9


def test_timeout_kills_all(tmp_path):
    """When time runs out wait_all kills every worker and raises naming the job, the ranks still running
    (not rank 0, which had exited) and the lowest one's log."""
    hang = "import signal; signal.pause()"  # until killed
    workers = launch(_plan(tmp_path), _stand_in({0: "pass", 1: hang, 2: hang}), tmp_path)
    assert workers[0].process.wait(timeout=60) == 0  # exited before wait_all looks
    with pytest.raises(JobError, match=r"job 'j': timed out after 1 s with ranks \[1, 2\] still") as err:
        wait_all(workers, timeout_s=1)
    assert workers[1].log_path in str(err.value)
    assert all(w.process.poll() is not None for w in workers)


def test_exec_failure_stops_started_workers(tmp_path):
    """If exec_fn cannot start a rank, launch kills the ranks already started and raises JobError."""
    started = []

    def exec_fn(machine, argv, env, log_path):
        if WorkerSpec.load(argv[-1]).rank == 1:
            raise OSError("no such host")
        p = local_exec(machine, [sys.executable, "-c", "import signal; signal.pause()"], env, log_path)
        started.append(p)
        return p

    with pytest.raises(JobError, match="cannot start rank 1 on h1: OSError: no such host"):
        launch(_plan(tmp_path), exec_fn, tmp_path)
    assert len(started) == 1 and started[0].poll() is not None
