"""Unit tests: a network's predicted memory (measure.footprint), the run's memory check and the
port kind `auto` takes when AF_XDP ports would not fit."""

from __future__ import annotations

import pytest

from common.errors import EmulationError
from emulator.ports import resolve_port_type
from measure.footprint import (
    BASE_BYTES,
    PORT_BYTES,
    RESERVE_BYTES,
    check_memory,
    footprint,
    mem_available_bytes,
    switch_port_count,
)
from topo import fat_tree, leaf_spine

GB = 10**9


@pytest.mark.parametrize("g, ports", [
    (fat_tree(4), 80),  # 20 switches of 4 ports
    (fat_tree(6), 270),  # 45 of 6
    (leaf_spine(2, 1, 3), 10),  # 2 leaves of 3 machines + 1 uplink, a spine of 2
])
def test_switch_ports_are_the_link_ends_at_switches(g, ports):
    assert switch_port_count(g) == ports


def test_the_prediction_grows_per_port_and_fits_within_a_share_of_what_is_available():
    small, big = footprint(fat_tree(4), "afxdp", 24 * GB), footprint(fat_tree(8), "afxdp", 24 * GB)
    assert small.predicted_bytes == BASE_BYTES + 80 * PORT_BYTES["afxdp"]
    assert big.predicted_bytes - small.predicted_bytes == (640 - 80) * PORT_BYTES["afxdp"]
    assert small.fits and not big.fits
    edge = footprint(fat_tree(4), "afxdp", small.predicted_bytes + RESERVE_BYTES)
    assert edge.fits and not footprint(fat_tree(4), "afxdp", edge.available_bytes - 10).fits
    assert PORT_BYTES["system"] < PORT_BYTES["afxdp"] / 10
    assert "640 afxdp switch ports, of 24.0 GB available" in big.text()


def test_a_network_that_does_not_fit_is_refused_in_one_line_naming_what_to_change():
    g = fat_tree(8)
    with pytest.raises(EmulationError) as e:
        check_memory(g, "afxdp", 24 * GB)
    msg = str(e.value)
    assert "\n" not in msg and "640 afxdp switch ports" in msg and "24.0 GB available" in msg
    assert "switch_ports: system" in msg and "cluster mode" in msg and "memory_check: false" in msg
    record = check_memory(g, "afxdp", 24 * GB, enforce=False)
    assert record["fits"] is False and record["switch_ports"] == 640 and record["available_bytes"] == 24 * GB
    assert check_memory(g, "system", 24 * GB)["fits"] is True


def test_auto_takes_plain_veths_when_afxdp_ports_would_not_fit():
    kind, why = resolve_port_type("auto", 1500, "user", None, too_big="AF_XDP ports would take about 47 GB")
    assert kind == "system" and "would take about 47 GB" in why
    assert resolve_port_type("auto", 1500, "user", None, too_big=None)[0] == "afxdp"
    assert resolve_port_type("afxdp", 1500, "user", None, too_big="too big")[0] == "afxdp"  # the memory check decides


def test_available_memory_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  1000 kB\nMemAvailable:   22000000 kB\n")
    assert mem_available_bytes(str(meminfo)) == 22_000_000 * 1024
    meminfo.write_text("MemTotal: 1 kB\n")
    with pytest.raises(KeyError):
        mem_available_bytes(str(meminfo))
    assert mem_available_bytes() > 0
