"""The torch worker's collective ``ina`` (:mod:`workers.collectives.ina`), on loopback: the product's
``python -m workers.worker`` processes, two of three ranks on one machine, a parameter server on a
thread summing the two machines (no switch: the PS does what a root would).

In train mode the small CNN's losses over INA equal the ring allreduce's within the quantisation
tolerance at every step of every rank; in replay mode the buckets of ones sum exactly (the worker
checks them). Each machine's lowest rank writes its client counters where the emulator reads them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess

import pytest
from test_ina_client import PS_IP, Ps, _job, _worker_ip

from common.sockets import free_tcp_port
from jobs.records import read_records
from workers.launcher import InaEndpoint, WorkerSpec, ina_counters_path, with_ina, worker_argv, worker_env

MACHINES = ("m0", "m0", "m1")  # rank -> machine: ranks 0 and 1 share m0
ADDR = {"m0": _worker_ip(0), "m1": _worker_ip(1)}


def _run(tmp_path, tag: str, mode: str, collective: str, job_id: int = 0, iterations: int = 4,
         warmup: int = 1) -> list[list]:
    """Three ranks of job ``j`` through ``python -m workers.worker``; each rank's records."""
    out = tmp_path / tag
    out.mkdir()
    port = free_tcp_port()
    specs = [WorkerSpec(job="j", rank=r, world=3, machine=m, master_addr="127.0.0.1", master_port=port, ifname="lo",
                        mode=mode, model="small_cnn", bucket_bytes=(4096, 400), compute_s=0.0, iterations=iterations,
                        warmup_iterations=warmup, collective=collective, records_path=str(out / f"j-rank{r}.jsonl"),
                        timeout_s=60, seed=3, rank_machines=MACHINES)
             for r, m in enumerate(MACHINES)]
    if collective == "ina":
        specs = with_ina(specs, {m: InaEndpoint(job_id, bit, PS_IP, ADDR[m]) for bit, m in enumerate(ADDR)})
    procs = []
    for s in specs:
        path = out / f"spec{s.rank}.json"
        s.save(path)
        procs.append(subprocess.Popen(worker_argv(path), env=worker_env(), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True,
                                      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-2000:]
    return [read_records(s.records_path) for s in specs]


def test_train_mode_over_ina_matches_the_ring_and_writes_the_machines_counters(tmp_path):
    """Train mode, three steps from the same weights (so two allreduces shape the last): every rank's
    loss over INA is the ring's within 1e-4; each machine's client counters."""
    ring = _run(tmp_path, "ring", "train", "ring", iterations=3, warmup=0)
    with Ps([_job(9, 2)]):
        ina = _run(tmp_path, "ina", "train", "ina", job_id=9, iterations=3, warmup=0)
    for rank in range(3):
        want = [r.loss for r in ring[rank]]
        got = [r.loss for r in ina[rank]]
        assert got == pytest.approx(want, abs=1e-4), rank
        assert got[-1] < got[0]  # it trains
        assert all(r.comm_s > 0 for r in ina[rank])
    for m in ADDR:  # one client per machine, its leader's counters
        with open(ina_counters_path(tmp_path / "ina", m)) as f:
            stats = json.load(f)["j"]
        assert stats["results"] > 0 and stats["sent"] >= stats["results"], (m, stats)


def test_replay_mode_over_ina_sums_the_buckets_exactly(tmp_path):
    """Replay mode over INA: every rank records every iteration (the worker checks each bucket's sum)."""
    with Ps([_job(10, 2)]):
        ina = _run(tmp_path, "ina", "replay", "ina", job_id=10)
    assert [len(r) for r in ina] == [4, 4, 4]  # the worker checked every bucket's sum against the world


def test_an_ina_rank_without_its_endpoint_fails_in_one_line(tmp_path):
    """A rank of collective ina without an endpoint exits 1 with one line naming what it lacks."""
    spec = WorkerSpec(job="j", rank=0, world=1, machine="m0", master_addr="127.0.0.1", master_port=free_tcp_port(),
                      ifname="lo", mode="replay", model="small_cnn", bucket_bytes=(400,), compute_s=0.0,
                      iterations=1, warmup_iterations=0, collective="ina",
                      records_path=str(tmp_path / "j-rank0.jsonl"), timeout_s=30)
    spec.save(tmp_path / "spec.json")
    p = subprocess.run(worker_argv(tmp_path / "spec.json"), env=worker_env(), capture_output=True, text=True,
                       timeout=120, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert p.returncode == 1
    assert p.stderr.strip().splitlines()[-1] == ("workers.worker: job j rank 0: JobError: job 'j' rank 0: collective "
                                                 "'ina' needs its machine's INA endpoint and the machine of each of "
                                                 "its 1 ranks")


def test_with_ina_names_a_machine_without_an_endpoint():
    """with_ina refuses a machine without an endpoint by name, and sets the endpoint of one that has it."""
    from common.errors import JobError

    spec = WorkerSpec(job="j", rank=0, world=1, machine="m9", master_addr="127.0.0.1", master_port=1, ifname=None,
                      mode="replay", model="small_cnn", bucket_bytes=(4,), compute_s=0.0, iterations=1,
                      warmup_iterations=0, collective="ina", records_path="x")
    with pytest.raises(JobError, match="INA job 'j' has no INA endpoint on m9"):
        with_ina([spec], {})
    got = WorkerSpec.from_dict(with_ina([spec], {"m9": InaEndpoint(1, 2, "10.0.0.1", "10.0.0.9")})[0].to_dict())
    assert got.ina == InaEndpoint(1, 2, "10.0.0.1", "10.0.0.9")




def test_an_ina_spec_is_checked_before_any_process_group():
    """InaCollective.check (run by the worker before it joins the group): a missing endpoint, a
    rank_machines of the wrong length, and one putting the rank on another machine are refused."""
    from common.errors import JobError
    from workers.collectives.ina import InaCollective

    base = WorkerSpec(job="j", rank=1, world=2, machine="m1", master_addr="127.0.0.1", master_port=1, ifname=None,
                      mode="replay", model="small_cnn", bucket_bytes=(4,), compute_s=0.0, iterations=1,
                      warmup_iterations=0, collective="ina", records_path="x", rank_machines=("m0", "m1"),
                      ina=InaEndpoint(1, 1, "10.0.0.1"))
    InaCollective.check(base)
    for bad, match in (({"ina": None}, "needs its machine's INA endpoint"),
                       ({"rank_machines": ("m0",)}, "each of its 2 ranks"),
                       ({"rank_machines": ("m1", "m0")}, "puts it on m0, not on its machine m1")):
        with pytest.raises(JobError, match=match):
            InaCollective.check(dataclasses.replace(base, **bad))
