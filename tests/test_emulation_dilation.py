"""Emulation test: the per-job fidelity verdict tells a job that keeps to its links from one that does not.

The run builds its own network (the dilation sets its link rates), so this module does not use the
shared fabric fixture. The slow case is a positive control made on purpose (the same measurement
held to faster links), not an overload hoped for: whether a machine keeps up with a heavy job at
dilation 1 depends on the machine (16 ranks measured 1.04-1.86 of their bound on machines of
this kind), which is ``bench/fidelity.py``'s to report.
"""

from __future__ import annotations

import pytest
from conftest import SCALE, leftovers

pytestmark = pytest.mark.emulation


def _uncontended_verdict(tmp_path, name: str, machines: list[str], dilation: float, held_to: tuple[float, ...]):
    """Run a ring over ``machines`` with vgg16's scaled buckets on its own network at ``dilation``;
    for each factor of ``held_to``, the fidelity monitor's verdict on it and the run's assessment
    when judged against links that factor faster than the emulated ones (1: its own)."""
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
    out = []
    for factor in held_to:
        rates = {link: r * factor for link, r in link_rates_mbps(g, SCALE).items()}
        (verdict,) = job_verdicts(g, rates, [evidence], mtu=1500)
        out.append((verdict, assess(cpu.summary(), [], [verdict])))
    return out


def test_monitor_passes_a_job_on_its_links_and_flags_it_held_to_faster_ones(emulation_ok, tmp_path):
    """Four ranks in distinct pods at dilation 4: against its own links, within the bound's band and
    trusted; the same measurement held to links 1.5 times faster (so it runs at two thirds of the
    rate it is judged by): slow, and the run flagged naming the job."""
    (light, light_run), (held, held_run) = _uncontended_verdict(tmp_path, "light", ["h1", "h5", "h9", "h13"],
                                                                dilation=4, held_to=(1.0, 1.5))
    assert light.status == "ok", light
    assert light_run.trustworthy and light_run.jobs_checked == 1, light_run
    assert held.status == "slow" and held.ratio >= 1.4, held
    assert not held_run.trustworthy and any("'light'" in r for r in held_run.reasons), held_run
    assert leftovers() == []
