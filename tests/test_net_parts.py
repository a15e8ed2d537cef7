"""The parts of the emulated network that need no network: the INA ports' plan, nodes grouped by server,
the links' shaper commands and the reading of links' bytes from switch port counters."""

from __future__ import annotations

import pytest

from common.errors import EmulationError
from emulator.cluster import LOCAL, ThisMachine, by_server
from emulator.counters import PortCounters
from emulator.host_changes import ina_peer, plan_ina_ports
from emulator.link_shaping import LinkShaping, script
from emulator.net import NetOptions
from measure import shaping
from topo import leaf_spine


@pytest.fixture
def g():
    return leaf_spine(2, 1, 2)  # h1 h2 on l1, h3 h4 on l2, both leaves under s1


def test_an_ina_switch_gets_the_port_after_its_links_and_a_machine_is_refused(g):
    """l1's links take ports 1-3: its aggregator port is 4, its peer ``l1-ia4``; a machine is no INA switch."""
    assert plan_ina_ports(g, ("l1", "s1")) == {"l1": 4, "s1": 3}
    assert ina_peer("l1", 4) == "l1-ia4"
    with pytest.raises(EmulationError, match="INA switch 'h1' is not a switch of the topology"):
        plan_ina_ports(g, ("h1",))


def test_nodes_are_grouped_by_server_this_machine_first():
    """Grouping keeps each server's nodes in order and puts this machine's first."""
    placement = {"a": "root@b", "b": LOCAL, "c": "root@b", "d": LOCAL}
    assert list(by_server("abcd", placement).items()) == [(LOCAL, ["b", "d"]), ("root@b", ["a", "c"])]


def test_a_port_is_shaped_by_a_token_bucket_over_its_fifo(g):
    """A machine's interface gets a TBF at its link's rate over a FIFO of the machine's queue length;
    a switch port's FIFO is the switch buffer (no marker: a plain FIFO)."""
    options = NetOptions(scale=100.0, mtu=1500, queue_packets=50, host_queue_packets=700)
    rates = shaping.link_rates_mbps(g, options.scale, options.dilation)
    links = LinkShaping(g, options, ThisMachine(g), rates, {}, {}, {}, lambda machine, cmds: None)
    rate = links.port_rate("h1", "l1")
    assert rate == links.port_rate("l1", "h1") == rates.get(("h1", "l1"), rates.get(("l1", "h1")))
    frame, burst = shaping.frame_bytes(1500), shaping.burst_bytes(rate, 1500)
    assert links.shape_cmds("h1-eth0", rate) == [
        f"tc qdisc replace dev h1-eth0 root handle 5: tbf rate {rate:.6f}mbit burst {burst} limit {700 * frame}",
        "tc qdisc replace dev h1-eth0 parent 5:1 handle 10: pfifo limit 700"]
    assert links.shape_cmds("l1-eth1", rate, switch_port=True)[1].endswith(" limit 50")


def test_a_links_bytes_are_read_on_its_switch_side(g):
    """Between two snapshots, a link leaving a switch counts that port's transmitted bytes, a link
    leaving a machine the received bytes of the switch port facing it."""
    counters = PortCounters(g, {}, ThisMachine(g))
    keys = [(s, o) for u, v in g.edges() for s, o in ((u, v), (v, u)) if g.nodes[s]["role"] == "switch"]
    before = dict.fromkeys(keys, (0, 0))
    after = {k: (100 + i, 1000 + i) for i, k in enumerate(keys)}
    moved = counters.link_bytes(before, after)
    assert moved[("l1", "h1")] == after[("l1", "h1")][0]
    assert moved[("h1", "l1")] == after[("l1", "h1")][1]
    assert moved[("l1", "s1")] == after[("l1", "s1")][0] and moved[("s1", "l1")] == after[("s1", "l1")][0]
    assert len(moved) == 2 * g.number_of_edges()


def test_a_script_stops_at_the_first_failing_line_and_names_it():
    """The shell lines run in order; the first that fails ends the script with its name on stderr."""
    import subprocess

    cp = subprocess.run(["sh", "-c", script(["true", "false", "echo never"])], capture_output=True, text=True)
    assert cp.returncode == 1 and cp.stdout == "" and cp.stderr.strip() == "`false` failed"
