"""Emulation tests of the controller process against real Open vSwitch bridges."""

from __future__ import annotations

import subprocess

import pytest
from conftest import leftovers, session_ifname, wait_until

pytestmark = pytest.mark.emulation


def test_handler_exception_stops_the_controller(emulation_ok, tmp_path):
    """A switch the topology does not know makes a handler raise: the controller records the error and exits
    with code 2 instead of logging and carrying on."""
    from common.errors import EmulationError
    from emulator.controller_proc import ControllerProcess
    from topo import fat_tree
    from topo.io import write_topology_json

    topo_path = str(tmp_path / "topology.json")
    write_topology_json(fat_tree(4), topo_path)
    ctrl = ControllerProcess(str(tmp_path), topo_path)
    bridge = session_ifname("tbfault")
    try:
        ctrl.start()
        subprocess.run(["ovs-vsctl", "--timeout=10", "add-br", bridge, "--", "set", "Bridge", bridge,
                        "datapath_type=netdev", "protocols=OpenFlow13", "other_config:datapath-id=0000000000000999",
                        "fail_mode=secure"], check=True, capture_output=True)
        subprocess.run(["ovs-vsctl", "--timeout=10", "set-controller", bridge, f"tcp:127.0.0.1:{ctrl.port}"],
                       check=True, capture_output=True)
        wait_until(lambda: ctrl.proc.poll() is not None, 30, f"the controller's exit (log {ctrl.log_path})")
        assert ctrl.proc.returncode == 2, f"controller exit code {ctrl.proc.returncode}; see {ctrl.log_path}"
        assert "unexpected switch dpid 0x999" in ctrl.status()["errors"][0]
        with pytest.raises(EmulationError, match="controller error"):
            ctrl.check_alive()
    finally:
        ctrl.stop()
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", bridge], capture_output=True)
    assert leftovers() == []


def test_select_group_routing_connects_every_pair(emulation_ok, tmp_path):
    """With OVS select-group (per-flow hashing) routing, every pair of machines of the k=4 fat-tree has TCP."""
    from emulator.net import EmulatedNetwork, NetOptions
    from topo import fat_tree

    g = fat_tree(4)
    with EmulatedNetwork(g, str(tmp_path), NetOptions(scale=500, routing="select")) as net:
        hosts = sorted(net.hosts, key=lambda m: g.nodes[m]["index"])
        assert net.tcp_check(hosts, hosts) == {}
        error = net.controller.logged_exception()
    assert error is None, error
    assert leftovers() == []
