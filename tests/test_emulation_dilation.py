"""Emulation test: the per-job fidelity verdict tells an overloaded run from a light one.

Each run builds its own network (the dilation sets its link rates), so this module does not use the
shared fabric fixture.
"""

from __future__ import annotations

import pytest
from conftest import SCALE, leftovers

pytestmark = pytest.mark.emulation


def _uncontended_verdict(tmp_path, name: str, machines: list[str], dilation: float):
    """Run a ring over ``machines`` with vgg16's scaled buckets on its own network at ``dilation``;
    return the fidelity monitor's verdict on it and the run's assessment."""
    from experiment.report import job_iteration_times
    from jobs.models import get_model, scaled_buckets
    from sim.steps import job_collisions
    from testbed.capabilities import detect
    from testbed.cpu import CpuSampler
    from testbed.fidelity import JobEvidence, assess, job_verdicts
    from testbed.net import EmulatedNetwork, NetOptions, link_rates_mbps
    from testbed.ports import resolve_port_type
    from testbed.replay import run_job
    from topo import fat_tree

    g = fat_tree(4)
    buckets = tuple(scaled_buckets(get_model("vgg16"), SCALE))
    assert job_collisions(g, machines, "ring", buckets) == 0  # the contention-free bound applies
    caps = detect()
    ports, _ = resolve_port_type("auto", 1500, caps["ovs_datapath"], caps["afxdp_missing"])
    out = tmp_path / name
    out.mkdir()
    with EmulatedNetwork(g, str(out), NetOptions(scale=SCALE, dilation=dilation, switch_ports=ports)) as net:
        cpu = CpuSampler(0.25)
        cpu.start()
        try:
            run = run_job(net, str(out), name, machines, "ring", buckets, iterations=3)
        finally:
            cpu.stop()
    its = job_iteration_times(run.records, dilation)[name]
    comm = run.comm_mean_s()
    evidence = JobEvidence(job=name, wave=0, machines_by_rank=tuple(machines), collective="ring",
                           bucket_bytes=buckets, comm_mean_s=comm, complete=len(its) == 3)
    (verdict,) = job_verdicts(g, link_rates_mbps(g, SCALE), [evidence], mtu=1500)
    return verdict, assess(cpu.summary(), [], [verdict])


def test_monitor_flags_an_overloaded_run_and_passes_a_light_one(emulation_ok, tmp_path):
    """Sixteen ranks in a ring over every machine without dilation (latency per message and CPU weigh
    on every one of its 180 steps per iteration): the job is slow against its contention-free bound
    and the run is flagged, naming it. Four ranks in distinct pods at dilation 4: within the bound's
    band, and trusted."""
    from topo import fat_tree, machines

    heavy, heavy_run = _uncontended_verdict(tmp_path, "heavy", machines(fat_tree(4)), dilation=1)
    assert heavy.status == "slow", heavy
    assert not heavy_run.trustworthy and any("'heavy'" in r for r in heavy_run.reasons), heavy_run
    light, light_run = _uncontended_verdict(tmp_path, "light", ["h1", "h5", "h9", "h13"], dilation=4)
    assert light.status == "ok", light
    assert light_run.trustworthy and light_run.jobs_checked == 1, light_run
    assert leftovers() == []
