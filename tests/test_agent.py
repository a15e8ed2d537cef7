"""Tests of the light replay runtime (workers.agent) on loopback: no root, no emulated network.

Each "machine" is an address of its own in this test process's loopback /24 (conftest.loopback: the
whole 127/8 is this machine), so agents listen and connect as they do in the emulated hosts, and the
kernel's TCP counters of every connection say what crossed.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
from conftest import ROOT, loopback, wait_until

from common.errors import JobError
from common.sockets import free_tcp_port
from ina.aggregator import JobTree
from ina.protocol import INA_UDP_PORT, VALUES_PER_PACKET
from ina.ps import PsJob, PsService
from jobs.patterns import barrier_bytes, replay_pattern
from jobs.records import read_records
from workers.agent import (
    HEADER,
    TCP_INFO_CE,
    TCP_INFO_FIELDS,
    TCPI_OPT_ECN,
    AgentPlan,
    InaEndpoint,
    agent_argv,
    ce_delta,
    ce_received,
    launch_agents,
    plan_agents,
    rank_steps,
    read_conns,
    remote_pairs,
)
from workers.launcher import WorkerSpec, local_exec, open_gate_when_ready, ready_path, wait_all, worker_env

IPS = {f"m{i}": loopback(20 + i) for i in range(4)}
ITERATIONS, WARMUP = 3, 1


def specs(tmp, job: str, collective: str, machines: list[str], buckets: tuple[int, ...], mode: str = "replay",
          timeout_s: float = 30.0) -> list[WorkerSpec]:
    """Rank specs of one job, gated on ``tmp/gate``."""
    return [WorkerSpec(job=job, rank=r, world=len(machines), machine=m, master_addr=IPS[machines[0]], master_port=1,
                       ifname=None, mode=mode, model="resnet50", bucket_bytes=buckets, compute_s=0.002,
                       iterations=ITERATIONS, warmup_iterations=WARMUP, collective=collective,
                       records_path=str(tmp / f"{job}-rank{r}.jsonl"), timeout_s=timeout_s,
                       start_gate=str(tmp / "gate"))
            for r, m in enumerate(machines)]


def wave(tmp):
    """Three jobs over four machines: ranks of one job share machines, machines host several jobs."""
    return {"ring6": specs(tmp, "ring6", "ring", ["m0", "m0", "m1", "m2", "m3", "m1"], (40_000, 4_000, 400)),
            "hd3": specs(tmp, "hd3", "hd", ["m1", "m2", "m3"], (100_000, 4)),
            "gloo2": specs(tmp, "gloo2", "gloo", ["m0", "m3"], (8_000,))}


def expected_payload(collective: str, machines: list[str], buckets) -> dict[tuple[int, int], int]:
    """TCP payload per (src, dst) rank pair on different machines: every message of every iteration and
    of both barriers with its header, plus one greeting per connection from the lower rank."""
    out: dict[tuple[int, int], int] = {}
    p = len(machines)
    sizes = list(buckets) * (WARMUP + ITERATIONS) + [barrier_bytes(p)] * 2
    for size in sizes:
        for step in replay_pattern(collective, p, size):
            for s, d, b in step:
                if machines[s] != machines[d]:
                    out[(s, d)] = out.get((s, d), 0) + HEADER.size + b
    for a, b in remote_pairs(collective, tuple(machines), [*buckets, barrier_bytes(p)]):
        out[(a, b)] = out.get((a, b), 0) + HEADER.size
    return out


def run_wave(tmp, jobs, timeout_s: float = 60.0):
    """Plan, launch and wait for a wave's agents; returns the plans."""
    plans = plan_agents(jobs, IPS, free_tcp_port(), tmp, timeout_s=30)
    workers = launch_agents(plans, local_exec, tmp)
    assert open_gate_when_ready(workers, str(tmp / "gate"), timeout_s) is not None, [
        open(w.log_path).read() for w in workers]
    wait_all(workers, timeout_s)
    return plans


def test_plan_groups_ranks_by_machine_in_one_job_order(tmp_path):
    """One plan per machine with exactly its ranks; every plan lists the wave's jobs in the same order."""
    jobs = wave(tmp_path)
    plans = plan_agents(jobs, IPS, 40000, tmp_path, timeout_s=10)
    assert sorted(p.machine for p in plans) == ["m0", "m1", "m2", "m3"]
    for p in plans:
        assert p.jobs == ("ring6", "hd3", "gloo2")
        assert {s.machine for s in p.ranks} == {p.machine}
        assert p.agents == {m: IPS[m] for m in ("m0", "m1", "m2", "m3")}
    m0 = next(p for p in plans if p.machine == "m0")
    assert sorted((s.job, s.rank) for s in m0.ranks) == [("gloo2", 0), ("ring6", 0), ("ring6", 1)]
    assert m0.job_machines == {"ring6": ("m0", "m0", "m1", "m2", "m3", "m1"), "gloo2": ("m0", "m3")}
    assert AgentPlan.from_dict(json.loads(json.dumps(m0.to_dict()))) == m0


def test_plan_refuses_train_mode(tmp_path):
    """Train mode runs real DDP: the agent runtime refuses it, naming the job."""
    with pytest.raises(JobError, match="job 'j'.*torch worker runtime"):
        plan_agents({"j": specs(tmp_path, "j", "ring", ["m0", "m1"], (400,), mode="train")}, IPS, 1, tmp_path, 10)


def test_rank_steps_and_remote_pairs():
    """Rank 1 of a 3-rank ring sends to 2 and receives from 0 each step; only cross-machine pairs connect."""
    steps = rank_steps("ring", 3, 1, 12)
    assert len(steps) == 4 and all(s == ([(2, 4)], [(0, 4)]) for s in steps)
    assert remote_pairs("ring", ("m0", "m0", "m1"), [12]) == {(1, 2), (0, 2)}
    assert remote_pairs("hd", ("m0", "m0"), [64]) == set()
    assert remote_pairs("gloo", ("m0", "m1", "m2"), [12]) == {(0, 1), (1, 2), (0, 2)}


def test_wave_runs_every_rank_and_sends_exactly_the_pattern(tmp_path):
    """Three jobs across four loopback machines: every rank records every iteration with the planned
    buckets, and the kernel's TCP counters of every connection equal the pattern's bytes (plus the
    14-byte message headers) in each direction: nothing more, nothing less crosses between machines.
    Nothing marks loopback: each iteration's ECN marks are 0, or not measured without ECN."""
    jobs = wave(tmp_path)
    plans = run_wave(tmp_path, jobs)
    with open("/proc/sys/net/ipv4/tcp_ecn") as f:
        ecn_requested = f.read().strip() != "2"  # 2, the default: accepted when asked, never asked for
    for job, ss in jobs.items():
        for s in ss:
            recs = read_records(s.records_path)
            assert [r.iteration for r in recs] == list(range(ITERATIONS)), (job, s.rank)
            assert {r.ecn_marks for r in recs} <= ({0, None} if ecn_requested else {None}), (job, s.rank)
            assert all(r.bucket_bytes == s.bucket_bytes and len(r.bucket_comm_s) == len(s.bucket_bytes)
                       for r in recs)
            assert os.path.exists(ready_path(s))
    received: dict[tuple[str, int, int], int] = {}  # (job, src rank, dst rank) -> payload bytes
    for p in plans:
        with open(p.tcp_path) as f:
            for c in json.load(f):
                key = (c["job"], c["remote_rank"], c["local_rank"])
                assert key not in received and c["unacked_segments"] == 0 and c["retransmits"] >= 0
                received[key] = c["bytes_received"] - 1  # the kernel counts the peer's FIN as one byte
    for job, ss in jobs.items():
        machines = [s.machine for s in ss]
        want = expected_payload(ss[0].collective, machines, ss[0].bucket_bytes)
        got = {(a, b): n for (j, a, b), n in received.items() if j == job and n}
        assert got == want, job
    conns = read_conns(plans)
    assert set(conns) == {"ring6", "hd3", "gloo2"}
    assert all(len(c) == 4 and c[0] in IPS.values() for c in conns["hd3"])


def test_dead_peer_fails_the_agent_in_bounded_time_naming_it(tmp_path):
    """A peer agent that never starts: the agent exits 1 after its connect timeout with one line naming
    the job, the rank and the peer's address."""
    jobs = {"j": specs(tmp_path, "j", "ring", ["m0", "m1"], (400,))}
    plans = plan_agents(jobs, IPS, free_tcp_port(), tmp_path, timeout_s=1.5)
    m0 = next(p for p in plans if p.machine == "m0")
    workers = launch_agents([m0], local_exec, tmp_path)
    with pytest.raises(JobError, match="failed with exit code 1"):
        wait_all(workers, timeout_s=30)
    err = open(workers[0].log_path).read().strip().splitlines()[-1]
    assert err.startswith("workers.agent: machine m0: ") and f"rank 0 -> rank 1 at {IPS['m1']}" in err, err


def test_killed_peer_fails_the_survivor_on_the_close_not_its_timeout(tmp_path):
    """Kill one agent mid-run (its ranks wait at the gate): the other sees the connection close and
    exits 1 naming the rank whose message was due and the close, not its 60 s timeout."""
    jobs = {"j": specs(tmp_path, "j", "ring", ["m0", "m1"], (400,), timeout_s=60)}
    plans = plan_agents(jobs, IPS, free_tcp_port(), tmp_path, timeout_s=60)
    workers = launch_agents(plans, local_exec, tmp_path)
    try:
        wait_until(lambda: all(os.path.exists(ready_path(w.spec)) for w in workers), 30, "every rank ready")
        victim = next(w for w in workers if w.spec.machine == "m1").process
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        (tmp_path / "gate").write_text("go\n")
        survivor = next(w for w in workers if w.spec.machine == "m0").process
        assert survivor.wait(timeout=120) == 1
    finally:
        for w in workers:
            if w.process.poll() is None:
                w.process.kill()
                w.process.wait()
    err = open(next(w for w in workers if w.spec.machine == "m0").log_path).read().strip().splitlines()[-1]
    assert err.startswith("workers.agent: machine m0: job j rank 0:") and "rank 1 (m1)" in err, err
    assert "closed its connection while a message was due" in err, err


def test_malformed_plan_is_one_line_and_exit_1(tmp_path):
    """A plan file that is not a plan: exit 1 and one line, no traceback."""
    bad = tmp_path / "plan.json"
    bad.write_text('{"machine": "m0"}\n')
    cp = subprocess.run(agent_argv(bad), env=worker_env(), capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert cp.returncode == 1
    assert cp.stderr.count("\n") == 1 and "bad agent plan" in cp.stderr and "Traceback" not in cp.stderr


def test_agent_does_not_import_torch():
    """The runtime's whole point is start-up: importing workers.agent loads no torch."""
    code = "import sys, workers.agent; print('torch' in sys.modules)"
    cp = subprocess.run([sys.executable, "-c", code], env=worker_env(), capture_output=True, text=True,
                        timeout=60, cwd=ROOT)
    assert cp.stdout.strip() == "False", cp.stderr


def test_an_ina_job_beside_a_ring_job_sums_over_the_ps_and_opens_no_connection(tmp_path):
    """An INA job of 3 ranks on m0, m0, m1 (PS on loopback, no switch: it completes every seq from the
    machines' packets) beside a ring job: every rank records every iteration; each machine's client
    sent ceil(size / 4 / 32) packets per bucket, warm-up and barriers included, and got every
    result back; the INA job has no TCP connection."""
    ps_ip = loopback(110)
    tree = JobTree(9, (0, 1))
    endpoints = {"m0": InaEndpoint(9, 0, ps_ip), "m1": InaEndpoint(9, 1, ps_ip)}
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((ps_ip, INA_UDP_PORT))
    service = PsService(sock, [PsJob(tree, {0: IPS["m0"], 1: IPS["m1"]})])
    stop: list = []
    thread = threading.Thread(target=service.serve, args=(stop,), daemon=True)
    thread.start()
    buckets = (40_000, 4_000, 8)
    jobs = {"ina3": specs(tmp_path, "ina3", "ina", ["m0", "m0", "m1"], buckets),
            "ring2": specs(tmp_path, "ring2", "ring", ["m1", "m2"], (8_000,))}
    try:
        plans = plan_agents(jobs, IPS, free_tcp_port(), tmp_path, timeout_s=30, ina={"ina3": endpoints})
        workers = launch_agents(plans, local_exec, tmp_path)
        assert open_gate_when_ready(workers, str(tmp_path / "gate"), 60) is not None
        wait_all(workers, 60)
    finally:
        stop.append(1)
        thread.join(5)
        sock.close()
    for s in jobs["ina3"]:
        assert len(read_records(s.records_path)) == ITERATIONS
    packets = sum(math.ceil(b / 4 / VALUES_PER_PACKET) for b in buckets) * (WARMUP + ITERATIONS)
    packets += 2 * math.ceil(barrier_bytes(3) / 4 / VALUES_PER_PACKET)
    for plan in plans:
        if "ina3" in plan.ina:
            stats = json.loads(open(plan.ina_path).read())["ina3"]
            assert stats["sent"] == packets + stats["resent"] and stats["results"] == packets
    assert "ina3" not in read_conns(plans) or not read_conns(plans)["ina3"]
    assert service.engine.stats.results == packets


def test_an_ina_job_without_an_endpoint_is_refused(tmp_path):
    """plan_agents names the INA job and the machine that has no endpoint."""
    with pytest.raises(JobError, match="INA job 'ina2' has no INA endpoint on m1"):
        plan_agents({"ina2": specs(tmp_path, "ina2", "ina", ["m0", "m1"], (400,))}, IPS, 1, tmp_path, 30,
                    ina={"ina2": {"m0": InaEndpoint(1, 0, loopback(110))}})


class _TcpInfo(ctypes.Structure):
    """``struct tcp_info`` of Linux 6.18 (``include/uapi/linux/tcp.h``) up to ``tcpi_received_ce``,
    laid out by the C compiler's rules: an independent derivation of the agent's offsets."""

    _fields_ = [(n, ctypes.c_uint8) for n in ("state", "ca_state", "retransmits", "probes", "backoff", "options",
                                                "wscale", "flags")] + \
        [(n, ctypes.c_uint32) for n in ("rto", "ato", "snd_mss", "rcv_mss", "unacked", "sacked", "lost", "retrans",
                                         "fackets", "last_data_sent", "last_ack_sent", "last_data_recv",
                                         "last_ack_recv", "pmtu", "rcv_ssthresh", "rtt", "rttvar", "snd_ssthresh",
                                         "snd_cwnd", "advmss", "reordering", "rcv_rtt", "rcv_space",
                                         "total_retrans")] + \
        [(n, ctypes.c_uint64) for n in ("pacing_rate", "max_pacing_rate", "bytes_acked", "bytes_received")] + \
        [(n, ctypes.c_uint32) for n in ("segs_out", "segs_in", "notsent_bytes", "min_rtt", "data_segs_in",
                                         "data_segs_out")] + \
        [(n, ctypes.c_uint64) for n in ("delivery_rate", "busy_time", "rwnd_limited", "sndbuf_limited")] + \
        [("delivered", ctypes.c_uint32), ("delivered_ce", ctypes.c_uint32), ("bytes_sent", ctypes.c_uint64),
         ("bytes_retrans", ctypes.c_uint64)] + \
        [(n, ctypes.c_uint32) for n in ("dsack_dups", "reord_seen", "rcv_ooopack", "snd_wnd", "rcv_wnd", "rehash")] + \
        [("total_rto", ctypes.c_uint16), ("total_rto_recoveries", ctypes.c_uint16), ("total_rto_time", ctypes.c_uint32),
         ("received_ce", ctypes.c_uint32)]


def test_tcp_info_offsets_are_the_kernel_headers():
    """The agent reads ``tcpi_options`` at 5 and ``tcpi_received_ce`` at 248 (and its other counters at
    24, 100, 120, 128), where the C layout of the kernel header's field list puts them."""
    assert (_TcpInfo.options.offset, _TcpInfo.received_ce.offset) == (5, 248)
    assert TCP_INFO_CE.size == _TcpInfo.received_ce.offset + 4
    assert [getattr(_TcpInfo, f).offset for f in ("unacked", "total_retrans", "bytes_acked", "bytes_received")] == \
        [24, 100, 120, 128] and TCP_INFO_FIELDS.size == 136


def test_ce_received_splits_crafted_tcp_info_bytes():
    """The received-CE counter is read from its offset (not the sender's ``delivered_ce`` beside it) when
    the connection negotiated ECN; no ECN, or a reply that ends before the field (a kernel before
    6.18), reads as not measured."""
    info = _TcpInfo(options=TCPI_OPT_ECN | 0x07, delivered_ce=999, received_ce=4242)
    raw = bytes(info)[:TCP_INFO_CE.size] + bytes(28)  # the kernel's struct goes on beyond the field
    assert ce_received(raw) == 4242
    assert ce_received(raw[:TCP_INFO_CE.size]) == 4242
    assert ce_received(raw[:TCP_INFO_CE.size - 1]) is None
    assert ce_received(bytes(_TcpInfo(options=0x07, received_ce=4242))) is None


def test_ce_delta_sums_connections_across_the_counters_wrap():
    """An iteration's marks: the sum over the rank's connections that measure them, modulo 2^32;
    none measured when no connection does."""
    assert ce_delta((0xFFFFFFF0, 3, None), (5, 10, None)) == 21 + 7
    assert ce_delta((None,), (None,)) is None and ce_delta((), ()) is None


def test_ce_received_on_a_real_connection_with_ecn():
    """On a real loopback connection the kernel's reply covers the field: with ECN negotiated (a network
    namespace with ``tcp_ecn=1``) both ends read an int, 0 as nothing marks loopback traffic."""
    code = ("import socket, subprocess\n"
            "open('/proc/sys/net/ipv4/tcp_ecn', 'w').write('1')\n"
            "subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)\n"
            "from workers.agent import TCP_INFO_CE, ce_counts\n"
            "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()\n"
            "c = socket.create_connection(srv.getsockname()); s, _ = srv.accept()\n"
            "c.sendall(b'x' * 100000); s.recv(1000)\n"
            "print(len(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 512)), *ce_counts([c, s]))\n")
    cp = subprocess.run(["unshare", "-rn", sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                        timeout=30)
    assert cp.returncode == 0, f"exit code {cp.returncode}: {cp.stderr[-2000:]}"
    out = cp.stdout.split()
    if int(out[0]) < TCP_INFO_CE.size:
        assert out[1:] == ["None", "None"]  # a kernel before 6.18 has no received-CE counter
        pytest.skip(f"the kernel's tcp_info has {out[0]} bytes, tcpi_received_ce needs {TCP_INFO_CE.size}")
    assert out[1:] == ["0", "0"], out
