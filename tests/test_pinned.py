"""Pinned placement (``placement.pinned``): jobs on the machines their config names, the others
consolidated; the config checks the pins against the topology."""

from __future__ import annotations

import pytest

from common.errors import ConfigError, PlacementError
from experiment.config.schema import from_dict, validate
from placement import Cluster, GpuSlot, JobRequest, MachineInfo, make_policy

MACHINES = [MachineInfo(f"h{i}", 4, rack=f"r{(i - 1) // 2}", pod="p0") for i in range(1, 5)]


def test_pinned_jobs_take_the_lowest_free_gpus_of_their_machines_in_rank_order_and_the_rest_consolidate():
    cluster = Cluster(MACHINES)
    cluster.set_background({"h1": 1})
    got = make_policy("pinned").place([JobRequest("a", "resnet50", 3, machines=("h3", "h1", "h3")),
                                       JobRequest("b", "resnet50", 2, machines=("h1", "h4")),
                                       JobRequest("c", "resnet50", 4)], cluster.view())
    by_job = {p.job: p.slots for p in got}
    assert by_job["a"] == (GpuSlot("h3", 0), GpuSlot("h1", 1), GpuSlot("h3", 1))  # h1's GPU 0 is busy
    assert by_job["b"] == (GpuSlot("h1", 2), GpuSlot("h4", 0))
    assert by_job["c"] == tuple(GpuSlot("h2", g) for g in range(4))  # the one idle machine: consolidation's


def test_a_pinned_job_whose_gpus_are_taken_waits_and_bad_pins_are_named():
    cluster = Cluster(MACHINES)
    cluster.set_background({"h2": 4})
    assert make_policy("pinned").place([JobRequest("a", "resnet50", 2, machines=("h2", "h1"))], cluster.view()) == []
    for machines, message in ((("h1",), "has 2 workers but is pinned to 1"),
                              (("h1", "h9"), "h9, not machines of this cluster")):
        with pytest.raises(PlacementError, match=message):
            make_policy("pinned").place([JobRequest("a", "resnet50", 2, machines=machines)], Cluster(MACHINES).view())


def test_the_config_checks_pins_against_the_topology():
    def cfg(machines, workers=2):
        return from_dict({"topology": {"kind": "fat_tree", "k": 4, "gpus_per_machine": 2}, "policies": ["pinned"],
                          "jobs": [{"name": "a", "model": "resnet50", "workers": workers, "machines": machines}]})

    validate(cfg(["h1", "h16"]))
    for machines, workers, message in ((["h1"], 2, "names 1 machine"), (["h1", "x9"], 2, "'x9' is not a machine"),
                                       (["h1", "h1", "h1"], 3, "hosts 3 ranks but has 2 GPUs")):
        with pytest.raises(ConfigError, match=message):
            validate(cfg(machines, workers))
