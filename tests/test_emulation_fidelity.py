"""Emulation test: the fidelity monitor flags a network the machine cannot emulate faithfully."""

from __future__ import annotations

import pytest
from conftest import leftovers, wait_listening

pytestmark = pytest.mark.emulation


def test_overloaded_network_is_flagged(emulation_ok, tmp_path):
    """Links at 1000 Mbit/s (scale 10) with four cross-pod flows: the userspace switches cannot keep up,
    and the fidelity monitor flags the run. Nothing is left behind."""
    from emulator.cpu import CpuSampler
    from emulator.net import EmulatedNetwork, NetOptions
    from emulator.queues import PortSampler
    from measure.fidelity import assess, busy_rates
    from measure.linkstats import read_queue_samples
    from topo import fat_tree

    with EmulatedNetwork(fat_tree(4), str(tmp_path), NetOptions(scale=10)) as net:
        cpu = CpuSampler(0.25)
        ports = PortSampler(str(tmp_path / "q.jsonl"), net.counters.port_links(), None, 0.25)
        pairs = [("h1", "h9"), ("h2", "h13"), ("h5", "h10"), ("h6", "h14")]
        servers = [net.popen(d, ["iperf3", "-s", "-1"], log_path=str(tmp_path / f"server-{d}.log")) for _, d in pairs]
        for _, d in pairs:
            wait_listening(net, d, 5201)  # iperf3's port
        cpu.start()
        ports.start()
        clients = [net.popen(s, ["iperf3", "-c", net.g.nodes[d]["ip"], "-t", "4"],
                             log_path=str(tmp_path / f"client-{s}.log")) for s, d in pairs]
        codes = {f"client on {s}": c.wait(timeout=60) for (s, _), c in zip(pairs, clients, strict=True)}
        codes |= {f"server on {d}": p.wait(timeout=60) for (_, d), p in zip(pairs, servers, strict=True)}
        assert set(codes.values()) == {0}, f"iperf3 exit codes {codes}; logs in {tmp_path}"
        cpu.stop()
        ports.stop()
    verdict = assess(cpu.summary(), busy_rates(read_queue_samples(str(tmp_path / "q.jsonl")), net.rates))
    assert not verdict.trustworthy, verdict
    assert any("CPU saturated" in r for r in verdict.reasons), verdict
    assert leftovers() == []
