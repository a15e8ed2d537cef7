"""Emulation test: kernel RED with ECN, the marking path of a stock kernel (sch_red): in the VM
(`make vm`), skipped where the kernel lacks it. A module of its own: the BPF marker's tests share a
network for their whole module, and this one builds its own."""

from __future__ import annotations

import pytest
from conftest import ECN_QUEUE_PACKETS, SCALE, ecn_marking, leftovers, wait_listening

pytestmark = pytest.mark.emulation


def test_red_path_marks_where_the_kernel_has_red(emulation_ok, tmp_path):
    """Kernel RED with ECN under each switch port's shaper: the shared bottleneck's RED counts marks and
    the receiver sees CE. Runs only where the kernel has sch_red (the VM)."""
    from emulator.capabilities import detect
    from emulator.net import EmulatedNetwork, NetOptions
    from emulator.queues import PortSampler
    from emulator.variants import ecn_marker
    from topo import fat_tree

    if not detect().has_red:
        pytest.skip("the kernel has no sch_red (RED qdisc): the RED marking path cannot run here")
    options = NetOptions(scale=SCALE, queue_packets=ECN_QUEUE_PACKETS, ecn=ecn_marker("red"),
                         marking=ecn_marking(30000))
    with EmulatedNetwork(fat_tree(4), str(tmp_path), options) as net:
        port = net.switch_intfs[("e2", "h4")]
        sampler = PortSampler(str(tmp_path / "q.jsonl"), net.counters.port_links(), None, 0.25)
        from emulator.flows import netstat_counters

        ce0 = netstat_counters(net.hosts["h4"].pid)["IpExtInCEPkts"]
        servers = [net.popen("h4", ["iperf3", "-s", "-1", "-p", str(5301 + i)]) for i in range(2)]
        for i in range(2):
            wait_listening(net, "h4", 5301 + i)
        clients = [net.popen(s, ["iperf3", "-c", net.g.nodes["h4"]["ip"], "-p", str(5301 + i), "-t", "6"])
                   for i, s in enumerate(["h1", "h5"])]
        for p in clients + servers:
            assert p.wait(timeout=60) == 0
        rows = {r["intf"]: r for r in sampler.sample()}
        ce = netstat_counters(net.hosts["h4"].pid)["IpExtInCEPkts"] - ce0
    assert rows[port]["marks"] > 0 and ce > 0, (rows[port], ce)
    assert leftovers() == []
