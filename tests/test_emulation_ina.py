"""Emulation tests: INA aggregators attached one-armed to the ToRs of an emulated leaf-spine, the
controller steering INA packets through them, the PS and the workers in the emulated machines.

Each test runs on both engines: bmv2 (skipped, naming why, where no P4 toolchain runs here:
``P4_PREFIX``, /opt/p4 or the PATH) and the software engine, on one network.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import struct
import sys
import threading

import pytest
from conftest import SCALE, leftovers

from ina.protocol import INA_UDP_PORT

pytestmark = pytest.mark.emulation

INA_SCALE = 1e4  # fixed-point scale of the workers' values
VALUES = 32 * 48  # 48 packets per round and worker
ROUNDS = 4


@pytest.fixture(scope="module")
def ina_net(emulation_ok, tmp_path_factory):
    """Leaf-spine, two racks of five machines (l1: h1-h5, l2: h6-h10), one spine, 20 Mbit/s links,
    an aggregator port on each leaf."""
    from emulator.net import EmulatedNetwork, NetOptions
    from topo import leaf_spine

    run_dir = str(tmp_path_factory.mktemp("ina"))
    net = EmulatedNetwork(leaf_spine(2, 1, 5), run_dir, NetOptions(scale=SCALE, ina_switches=("l1", "l2")))
    with net:
        failures = net.tcp_check(["h1"], ["h6"])
        assert not failures, f"TCP sanity check failed: {failures}; evidence in {run_dir}"
        yield net
        error = net.controller.logged_exception()
    assert error is None, f"controller logged an exception: {error}; see {net.controller.log_path}"
    assert not leftovers(), f"network left behind: {leftovers()}"


@pytest.fixture(params=["bmv2", "software"])
def ina_fabric(ina_net, request):
    """The network with an aggregator engine of each kind on its leaves' aggregator ports."""
    from emulator.ina_fabric import InaFabric
    from ina.p4.build import engine_available

    available, why = engine_available()
    if request.param == "bmv2" and available != "bmv2":
        pytest.skip(f"bmv2: {why}")
    with InaFabric(ina_net, request.param) as fabric:
        yield ina_net, fabric


def _env():
    from common.paths import PROJECT_ROOT

    return {"PYTHONPATH": PROJECT_ROOT, "PATH": os.environ.get("PATH", "")}


class _Tap:
    """The frames a switch port transmits, seen by a packet socket on its interface: INA frames
    (UDP to or from :data:`ina.protocol.INA_UDP_PORT`) counted, the others counted by kind, so a
    test can tell the job's frames on a port from whatever else crossed it."""

    ETH_P_ALL = 0x0003
    PACKET_OUTGOING = 4

    def __init__(self, intf: str):
        self.ina_frames = 0
        self.other: collections.Counter[str] = collections.Counter()
        self.other_bytes = 0
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(self.ETH_P_ALL))
        self._sock.bind((intf, 0))
        self._sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                frame, address = self._sock.recvfrom(65536)
            except TimeoutError:
                continue
            if address[2] == self.PACKET_OUTGOING:
                self._classify(frame)

    def _classify(self, frame: bytes) -> None:
        self.other_bytes += len(frame)
        (eth_type,) = struct.unpack_from("!H", frame, 12)
        if eth_type == 0x0800 and frame[23] == socket.IPPROTO_UDP:
            udp = 14 + 4 * (frame[14] & 0x0F)
            ports = struct.unpack_from("!HH", frame, udp)
            if INA_UDP_PORT in ports:
                self.ina_frames += 1
                self.other_bytes -= len(frame)
                return
            self.other[f"udp {ports[0]}->{ports[1]} ({len(frame)} B)"] += 1
        else:
            self.other[f"ethertype 0x{eth_type:04x} ({len(frame)} B)"] += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


def _run_jobs(net, fabric, plans, n_slots: int, tag: str, before_workers=None) -> tuple[dict, dict, dict]:
    """Install ``plans``, start one PS per PS machine (then call ``before_workers(out_dir)``) and
    every worker; wait for them.

    Returns:
        (worker outputs by (job id, machine), PS counters by machine, bytes per directed link).
    """
    from common.paths import PROJECT_ROOT

    fabric.install(plans, n_slots)
    out_dir = os.path.join(net.run_dir, tag)
    ps_procs = fabric.start_ps(plans, out_dir)
    if before_workers is not None:
        before_workers(out_dir)
    before = net.counters.switch_counters()
    workers = {}
    for p in plans:
        for m, bit in p.bits.items():
            path = os.path.join(out_dir, f"job{p.job_id}-{m}.json")
            proc = net.popen(m, [sys.executable, "-m", "ina.client", "--job", str(p.job_id), "--bit", str(bit),
                                 "--ps", net.g.nodes[p.ps_host]["ip"], "--bind", net.g.nodes[m]["ip"],
                                 "--values", str(VALUES), "--rounds", str(ROUNDS), "--seed", str(p.job_id),
                                 "--scale", str(INA_SCALE), "--out", path], env=_env(), cwd=PROJECT_ROOT,
                             log_path=os.path.join(out_dir, f"job{p.job_id}-{m}.log"))
            workers[(p.job_id, m)] = (proc, path)
    outputs = {}
    for key, (proc, path) in workers.items():
        assert proc.wait(180) == 0, f"worker {key} failed: see {out_dir}"
        net.forget(proc)
        with open(path) as f:
            outputs[key] = json.load(f)
    after = net.counters.switch_counters()
    ps_stats = fabric.stop_ps(ps_procs)
    fabric.check_alive()
    return outputs, ps_stats, net.counters.link_bytes(before, after)


def _check_sums(plan, outputs) -> None:
    """Every worker of the job got the float sum of every round within the quantisation bound."""
    from ina.client import demo_values

    bound = len(plan.bits) / (2 * INA_SCALE) + 1e-6
    for r in range(ROUNDS):
        exact = [sum(col) for col in zip(*(demo_values(plan.job_id, b, VALUES, r) for b in plan.bits.values()),
                                         strict=True)]
        for m in plan.bits:
            got = outputs[(plan.job_id, m)]["sums"][r]
            assert max(abs(a - b) for a, b in zip(got, exact, strict=True)) <= bound, (plan.job_id, m, r)


def test_four_workers_in_one_rack_send_a_quarter_of_the_bytes_up_the_tor_uplink(ina_fabric):
    """h1-h4 under l1 allreduce through the PS on h6: with l1 aggregating them (fan-in 4), exactly a
    quarter of the job's frames cross the uplink l1 -> s1, and its bytes are a quarter of those with the
    job passed unaggregated (within 15%; resends after a timeout counted apart), and every worker gets the
    float sum within the quantisation bound both ways."""
    from ina.plan import plan_job, uplink_packets
    from ina.protocol import FRAME_BYTES

    net, fabric = ina_fabric
    workers = ["h1", "h2", "h3", "h4"]
    uplink = net.switch_intfs[("l1", "s1")]
    plain = plan_job(net.g, 1, workers, "h6", [])
    tap_plain = _Tap(uplink)
    try:
        outs, ps_plain, link_plain = _run_jobs(net, fabric, [plain], 1024, "plain")
    finally:
        tap_plain.close()
    _check_sums(plain, outs)
    counted_plain = fabric.job_traffic(["l1", "l2"], [1])
    ina = plan_job(net.g, 2, workers, "h6", ["l1", "l2"])
    assert ina.entries and set(ina.entries) == {"l1"}
    tap_ina = _Tap(uplink)
    try:
        outs, ps_ina, link_ina = _run_jobs(net, fabric, [ina], 1024, "ina")
    finally:
        tap_ina.close()
    _check_sums(ina, outs)
    counted_ina = fabric.job_traffic(["l1", "l2"], [2])
    stats = fabric.stats()
    ratio = link_ina[("l1", "s1")] / link_plain[("l1", "s1")]
    evidence = (f"engine {fabric.engine}; uplink bytes {link_ina[('l1', 's1')]} with INA, "
                f"{link_plain[('l1', 's1')]} without: ratio {ratio:.3f}; l1 {stats['l1']}; PS {ps_ina['h6']}; "
                f"per-job counters {counted_plain} {counted_ina}; on the uplink, INA frames {tap_plain.ina_frames} "
                f"{tap_ina.ina_frames}, others {dict(tap_plain.other)} {dict(tap_ina.other)}")
    assert stats["l1"].aggregates >= 48 * ROUNDS and stats["l1"].collisions == 0, evidence
    # Exactly a quarter of the job's frames leave the rack aggregated. A worker that times out resends
    # its packet unaggregated on top (and, gone by then, answers the late result with an ICMP error):
    # those are counted apart, never in the quarter, and the bytes compared are the rest.
    resent = ps_ina["h6"]["jobs"]["2"]["resend"]
    assert 4 * (counted_ina["l1"][2].to_ps - resent) == counted_plain["l1"][1].to_ps, evidence
    net_ratio = ((link_ina[("l1", "s1")] - resent * FRAME_BYTES - tap_ina.other_bytes)
                 / (link_plain[("l1", "s1")] - tap_plain.other_bytes))
    assert 0.25 * 0.85 <= net_ratio <= 0.25 * 1.15, f"net ratio {net_ratio:.3f}; {evidence}"
    assert ps_plain["h6"]["results"] == ps_ina["h6"]["results"] == 48 * ROUNDS, evidence
    # The aggregators' per-job counters are what the port carried: every INA frame up l1's uplink
    # (nothing else of the job's leaves the rack that way), the port's byte counter those frames
    # and whatever else the tap saw leave, and each of the 4 workers' results down through l2 (the
    # PS's ToR) and l1 (resends answered again).
    for job_id, counted, link, tap in ((1, counted_plain, link_plain, tap_plain), (2, counted_ina, link_ina, tap_ina)):
        ina_bytes = counted["l1"][job_id].to_ps * FRAME_BYTES
        assert tap.ina_frames == counted["l1"][job_id].to_ps, evidence
        assert ina_bytes <= link[("l1", "s1")] <= ina_bytes + tap.other_bytes, evidence
        assert counted["l1"][job_id].to_workers == counted["l2"][job_id].to_workers >= 4 * 48 * ROUNDS, evidence
    sent = {m: outs[(2, m)]["stats"]["sent"] for m in workers}
    with_ina, unaggregated = uplink_packets(net.g, workers, "h6", {t: c[2] for t, c in counted_ina.items()}, sent)
    assert with_ina == {"l1": counted_ina["l1"][2].to_ps} and unaggregated == {"l1": sum(sent.values())}, evidence
    # resends travel unaggregated either way: counted apart, as above
    assert 0.25 * 0.85 <= (with_ina["l1"] - resent) / (unaggregated["l1"] - resent) <= 0.25 * 1.15, evidence


def test_two_jobs_on_a_tiny_slot_pool_collide_fall_back_and_both_sum_exactly(ina_fabric):
    """Two three-machine jobs, each with two workers under l1 (a leaf) and one under l2 (the PS's
    ToR, their root, fan-in 2), on a pool of 2 slots per switch: packets collide and fall back to
    the PS, which completes them; every worker of both jobs gets the right sums."""
    from ina.plan import plan_job

    net, fabric = ina_fabric
    a = plan_job(net.g, 3, ["h1", "h2", "h7"], "h6", ["l1", "l2"])
    b = plan_job(net.g, 4, ["h3", "h4", "h8"], "h6", ["l1", "l2"])
    assert {s: e.role.value for s, e in a.entries.items()} == {"l1": "leaf", "l2": "root"}
    outs, ps, _ = _run_jobs(net, fabric, [a, b], 2, "collide")
    _check_sums(a, outs)
    _check_sums(b, outs)
    stats = fabric.stats()
    evidence = f"engine {fabric.engine}; l1 {stats['l1']}; l2 {stats['l2']}; PS {ps['h6']}"
    assert stats["l1"].collisions > 0 and stats["l1"].aggregates > 0, evidence
    assert stats["l2"].aggregates > 0, evidence
    assert ps["h6"]["results"] == 2 * 48 * ROUNDS, evidence


@pytest.mark.parametrize("engine", ["bmv2", "software"])
def test_a_declared_pat_meters_the_claims_and_the_rest_pass_unaggregated(ina_net, engine):
    """A fabric whose PAT is declared at 40 claims per second (``InaFabric(pat_pps=...)``, as a run
    maps ``ina.pat_gbps``): h1-h4 under l1 (PS h6) stream 48 seqs a round, far faster than that, so
    l1 refuses most claims (``over_pat``), at most the meter's rate over the job's time and its depth
    claim, the refused seqs reach the PS unaggregated, and every worker's sums are exact."""
    import time

    from emulator.ina_engines import pat_burst
    from emulator.ina_fabric import InaFabric
    from ina.p4.build import engine_available
    from ina.plan import plan_job

    available, why = engine_available()
    if engine == "bmv2" and available != "bmv2":
        pytest.skip(f"bmv2: {why}")
    rate = 40.0
    with InaFabric(ina_net, engine, pat_pps=rate) as fabric:
        plan = plan_job(ina_net.g, 9, ["h1", "h2", "h3", "h4"], "h6", ["l1", "l2"])
        t0 = time.monotonic()
        outs, ps, _ = _run_jobs(ina_net, fabric, [plan], 1024, "pat")
        elapsed = time.monotonic() - t0
        stats = fabric.stats()["l1"]
    _check_sums(plan, outs)
    evidence = f"engine {engine}; l1 {stats}; PS {ps['h6']}; {elapsed:.1f} s"
    assert stats.over_pat > 0 and stats.claims + stats.over_pat >= 48 * ROUNDS, evidence
    assert stats.claims <= rate * elapsed + pat_burst(rate, fabric.values_per_packet, ina_net.options.mtu), evidence
    assert stats.aggregates <= stats.claims and ps["h6"]["results"] == 48 * ROUNDS, evidence


def test_hosts_outside_a_job_cannot_add_to_its_sums(ina_fabric):
    """Before h1-h3's job (PS h6, l1 their leaf) starts, h4 (under l1, not in the job) and h7 (under
    l2, which has no entry for the job) each send a contribution for seq 0 claiming h1's bit: l1
    drops h4's as foreign, the PS drops h7's as foreign, and every worker gets the exact sums."""
    from common.paths import PROJECT_ROOT
    from ina.plan import plan_job

    net, fabric = ina_fabric
    plan = plan_job(net.g, 5, ["h1", "h2", "h3"], "h6", ["l1", "l2"])
    assert set(plan.entries) == {"l1"}
    ps_ip = net.g.nodes["h6"]["ip"]
    forge = ("import socket, sys; from ina.protocol import data_packet, VALUES_PER_PACKET as V; "
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 0)); "
             f"s.sendto(data_packet(5, 0, 1 << {plan.bits['h1']}, [10**6] * V), ('{ps_ip}', {INA_UDP_PORT}))")

    def intrude(out_dir):
        for m in ("h4", "h7"):
            proc = net.popen(m, [sys.executable, "-c", forge, net.g.nodes[m]["ip"]], env=_env(), cwd=PROJECT_ROOT,
                             log_path=os.path.join(out_dir, f"intruder-{m}.log"))
            assert proc.wait(30) == 0, f"intruder on {m} failed: see {out_dir}"
            net.forget(proc)

    outs, ps, _ = _run_jobs(net, fabric, [plan], 1024, "intruders", before_workers=intrude)
    _check_sums(plan, outs)
    stats = fabric.stats()
    evidence = f"engine {fabric.engine}; l1 {stats['l1']}; PS {ps['h6']}"
    assert stats["l1"].foreign == 1 and ps["h6"]["foreign"] == 1 and ps["h6"]["jobs"]["5"]["foreign"] == 1, evidence


def test_a_replay_job_runs_over_ina_and_only_its_aggregates_go_up(ina_fabric, tmp_path):
    """A 4-rank replay job (collective ina, agent runtime) on h1, h1, h2, h3 under l1, PS on h6: every
    rank records every iteration; l1 aggregates every seq once (fan-in 3: one endpoint per machine),
    and the uplink l1 -> s1 carries exactly those aggregates (190-byte frames), plus any resend or
    fall-back."""
    import math

    from emulator.ina_fabric import endpoints
    from emulator.one_job import OneJob, run_job
    from ina.plan import plan_job
    from ina.protocol import HEADER_BYTES, VALUES_PER_PACKET
    from jobs.patterns import barrier_bytes

    net, fabric = ina_fabric
    machines = ["h1", "h1", "h2", "h3"]
    plan = plan_job(net.g, 11, machines, "h6", ["l1", "l2"])
    fabric.install([plan], 1024)
    started = fabric.start_ps([plan], str(tmp_path))
    before = net.counters.switch_counters()
    try:
        buckets = (64_000, 6_400, 512)
        run = run_job(net, str(tmp_path), OneJob("inajob", tuple(machines), "ina", buckets, iterations=3,
                                                   warmup_iterations=1, compute_s=0.01, timeout_s=300,
                                                   ina_endpoints=endpoints(net, plan)))
    finally:
        ps = fabric.stop_ps(started)
    up = net.counters.link_bytes(before, net.counters.switch_counters())[("l1", "s1")]
    stats = fabric.stats()["l1"]
    seqs = 4 * sum(math.ceil(b / 4 / VALUES_PER_PACKET) for b in buckets) \
        + 2 * math.ceil(barrier_bytes(4) / 4 / VALUES_PER_PACKET)
    frame = 14 + 20 + 8 + HEADER_BYTES + 4 * VALUES_PER_PACKET
    evidence = f"engine {fabric.engine}; l1 {stats}; PS {ps['h6']}; uplink {up} B; comm {run.comm_mean_s():.3f} s"
    assert len({(r.rank, r.iteration) for r in run.records}) == 4 * 3, evidence
    assert stats.aggregates == seqs and ps["h6"]["results"] == seqs, evidence
    # Beyond the INA frames, at most one ICMP port-unreachable (70 B) per machine and re-answered
    # resend: a result the PS sent again after a worker's client had already closed its socket.
    surplus = up - frame * (seqs + stats.resends + stats.collisions)
    assert 0 <= surplus <= 70 * 3 * ps["h6"]["resends_answered"], evidence
