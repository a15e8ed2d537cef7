"""What a run records of the machine and of its choices (``capabilities.json``): typed records whose JSON
form keeps the file's keys, an absent choice left out."""

from __future__ import annotations

from emulator.capabilities import MachineCapabilities, RunCapabilities

MACHINE = MachineCapabilities(
    kernel="6.1.0", cpus=2, ovs_version="ovs-vsctl (Open vSwitch) 3.1.0", ovs_datapath="user",
    qdiscs={"htb": True, "red": False}, congestion_controls=["reno", "cubic"], bpf_marker=True,
    bpf_marker_missing=None, afxdp_missing=None, ina_engine_available="software", ina_engine_why="no bmv2")
MACHINE_KEYS = ["kernel", "cpus", "ovs_version", "ovs_datapath", "qdiscs", "congestion_controls", "bpf_marker",
                "bpf_marker_missing", "afxdp_missing", "ina_engine_available", "ina_engine_why"]


def test_a_run_on_one_machine_records_its_memory_and_no_ina_without_ina_jobs():
    run = RunCapabilities(MACHINE, "bpf", "BPF marker", "afxdp", "fits", {"engine": "none"},
                          memory={"predicted_bytes": 1})
    d = run.to_dict()
    assert list(d) == [*MACHINE_KEYS, "ecn_method", "ecn_why", "switch_ports", "switch_ports_why", "memory",
                       "container"]
    assert d["qdiscs"] == {"htb": True, "red": False} and d["memory"] == {"predicted_bytes": 1}
    assert not MACHINE.has_red


def test_a_cluster_run_with_ina_jobs_records_the_engine_and_its_servers():
    run = RunCapabilities(MACHINE, "none", "cluster mode", "system", "cluster mode", {"engine": "none"},
                          ina_engine="none", ina_why="no engine", cluster={"servers": ["localhost", "s2"]})
    assert list(run.to_dict()) == [*MACHINE_KEYS, "ecn_method", "ecn_why", "ina_engine", "ina_why", "switch_ports",
                                   "switch_ports_why", "cluster", "container"]
