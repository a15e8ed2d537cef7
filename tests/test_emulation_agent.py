"""Emulation test of the light replay runtime (workers.agent): its traffic on the emulated fabric is the
collective's pattern."""

from __future__ import annotations

import json
import os

import pytest
from conftest import counters_settled

pytestmark = pytest.mark.emulation

ITERATIONS, WARMUP = 2, 1
HEADER_BYTES = 14  # workers.agent.HEADER


def test_agent_traffic_on_every_link_is_the_pattern(fabric, tmp_path):
    """Two jobs at once (a ring over h1,h1,h5,h5 and a 3-rank halving-doubling with fold over h9,h10,h13):
    the payload the kernel's TCP counters saw on every connection, summed over the links of its route,
    equals the pattern's bytes per directed link exactly (messages' 14-byte headers included); and the
    switch counters of those links carry that many bytes on the wire within 7% (ACKs of the reverse
    direction, handshakes)."""
    from common.paths import PROJECT_ROOT
    from common.sockets import free_tcp_port
    from common.units import wire_bytes
    from jobs.patterns import barrier_bytes, replay_pattern
    from jobs.records import read_records
    from topo.routing import ecmp_path, path_links
    from workers.agent import HEADER, launch_agents, plan_agents, remote_pairs
    from workers.launcher import WorkerSpec, open_gate_when_ready, processes, wait_all

    assert HEADER.size == HEADER_BYTES
    g = fabric.g
    jobs = {"ring4": ("ring", ["h1", "h1", "h5", "h5"], (200_000, 40_000)),
            "hd3": ("hd", ["h9", "h10", "h13"], (120_000, 4_000))}
    ips = {m: g.nodes[m]["ip"] for _, ms, _ in jobs.values() for m in ms}
    gate = str(tmp_path / "gate")
    specs = {job: [WorkerSpec(job=job, rank=r, world=len(ms), machine=m, master_addr=ips[ms[0]], master_port=1,
                              ifname=fabric.host_intf[m], mode="replay", model="resnet50", bucket_bytes=b,
                              compute_s=0.01, iterations=ITERATIONS, warmup_iterations=WARMUP, collective=c,
                              records_path=str(tmp_path / f"{job}-rank{r}.jsonl"), timeout_s=120, start_gate=gate)
                   for r, m in enumerate(ms)] for job, (c, ms, b) in jobs.items()}
    plans = plan_agents(specs, ips, free_tcp_port(), tmp_path, timeout_s=120)

    def exec_fn(machine, argv, env, log_path):
        return fabric.popen(machine, argv, env=env, log_path=log_path, cwd=PROJECT_ROOT)

    before = fabric.counters.switch_counters()
    workers = launch_agents(plans, exec_fn, tmp_path)
    try:
        assert open_gate_when_ready(workers, gate, 120) is not None
        wait_all(workers, timeout_s=180)
    finally:
        for p in processes(workers):
            fabric.forget(p)
    moved = fabric.counters.link_bytes(before, counters_settled(fabric.counters.switch_counters))
    for ss in specs.values():
        for s in ss:
            assert len(read_records(s.records_path)) == ITERATIONS

    # What the pattern sends between machines, per directed link: payload and bytes on the wire.
    payload, wire = {}, {}
    for c, ms, buckets in jobs.values():
        sizes = list(buckets) * (WARMUP + ITERATIONS) + [barrier_bytes(len(ms))] * 2
        messages = [(s, d, b) for size in sizes for step in replay_pattern(c, len(ms), size) for s, d, b in step
                    if ms[s] != ms[d]]
        messages += [(a, b, 0) for a, b in remote_pairs(c, tuple(ms), [*buckets, barrier_bytes(len(ms))])]  # hellos
        for s, d, b in messages:
            for link in path_links(ecmp_path(g, ms[s], ms[d])):
                payload[link] = payload.get(link, 0) + HEADER_BYTES + b
                wire[link] = wire.get(link, 0) + wire_bytes(HEADER_BYTES + b, 1500)
    # What TCP carried, per directed link, from the receivers' kernel counters.
    carried = {}
    for p in plans:
        with open(p.tcp_path) as f:
            for c in json.load(f):
                ms = jobs[c["job"]][1]
                src, dst = ms[c["remote_rank"]], ms[c["local_rank"]]
                for link in path_links(ecmp_path(g, src, dst)):
                    carried[link] = carried.get(link, 0) + c["bytes_received"] - 1  # the FIN counts one
    assert {k: v for k, v in carried.items() if v} == payload
    for link, nbytes in wire.items():
        assert 1.0 <= moved[link] / nbytes <= 1.07, (link, moved[link], nbytes, os.fspath(tmp_path))
