"""Emulation test: the per-job fidelity verdict tells a job that keeps to its links from one that does not.

The run builds its own network (the dilation sets its link rates), so this module does not use the
shared fabric fixture. Both cases judge one real measurement against chosen link rates, so they do
not hang on how fast the machine is: whether it keeps up with a job (16 ranks at dilation 1
measured 1.04-1.86 of their bound on machines of this kind, 4 ranks at dilation 4 1.02-1.12 in a
loaded suite) is ``bench/fidelity.py``'s to report, not a test's.
"""

from __future__ import annotations

import pytest
from conftest import SCALE, leftovers

pytestmark = pytest.mark.emulation


def _measured_job(tmp_path, name: str, machines: list[str], dilation: float):
    """Run a ring over ``machines`` with vgg16's scaled buckets on its own network at ``dilation``;
    return ``judge(factors)``: for each factor, the fidelity monitor's verdict on that measurement
    and the run's assessment when judged against links that factor faster than the emulated ones
    (1: its own)."""
    from emulator.capabilities import detect
    from emulator.cpu import CpuSampler
    from emulator.net import EmulatedNetwork, NetOptions, link_rates_mbps
    from emulator.one_job import OneJob, run_job
    from emulator.ports import resolve_port_type
    from emulator.variants import switch_ports
    from jobs.models import get_model, scaled_buckets
    from jobs.steps import job_collisions
    from measure.fidelity import JobEvidence, assess, job_verdicts
    from measure.iterations import job_iteration_times
    from topo import leaf_spine

    g = leaf_spine(2, 1, 1)  # the smallest fabric whose ring crosses switches: h1 under l1, h2 under l2
    buckets = tuple(scaled_buckets(get_model("vgg16"), SCALE))
    assert job_collisions(g, link_rates_mbps(g, SCALE), machines, "ring", buckets) == 0  # its bound applies
    caps = detect()
    ports, _ = resolve_port_type("auto", 1500, caps.ovs_datapath, caps.afxdp_missing)
    out = tmp_path / name
    out.mkdir()
    opts = NetOptions(scale=SCALE, dilation=dilation, switch_ports=switch_ports(ports))
    with EmulatedNetwork(g, str(out), opts) as net:
        cpu = CpuSampler(0.25)
        cpu.start()
        try:
            run = run_job(net, str(out), OneJob(name, tuple(machines), "ring", buckets, iterations=3))
        finally:
            cpu.stop()
    its = job_iteration_times(run.records, dilation)[name]
    comm = run.comm_mean_s()
    evidence = JobEvidence(job=name, wave=0, machines_by_rank=tuple(machines), collective="ring",
                           bucket_bytes=buckets, comm_mean_s=comm, complete=len(its) == 3)
    cpu_summary = cpu.summary()

    def judge(factors):
        out = []
        for factor in factors:
            rates = {link: r * factor for link, r in link_rates_mbps(g, SCALE).items()}
            (verdict,) = job_verdicts(g, rates, [evidence], mtu=1500)
            out.append((verdict, assess(cpu_summary, [], [verdict])))
        return out

    return judge


def test_monitor_passes_a_job_held_to_its_measured_rate_and_flags_it_held_to_faster_links(emulation_ok, tmp_path):
    """Two ranks in distinct racks at dilation 4, measured once: against its own links the ratio is
    structural (at least 0.95: the shapers hold; under 2). Held to links at which that measurement is
    exactly its bound: ok and trusted; held to links 1.5 times faster than those: slow, and the run
    flagged naming the job. (How close the emulator keeps to the bound is bench/fidelity.py's.)"""
    judge = _measured_job(tmp_path, "light", ["h1", "h2"], dilation=4)
    ((own, _),) = judge([1.0])
    assert 0.95 <= own.ratio < 2.0, own
    (exact, exact_run), (held, held_run) = judge([1 / own.ratio, 1.5 / own.ratio])
    assert exact.status == "ok" and exact.ratio == pytest.approx(1.0), exact
    assert exact_run.trustworthy and exact_run.jobs_checked == 1, exact_run
    assert held.status == "slow" and held.ratio == pytest.approx(1.5), held
    assert not held_run.trustworthy and any("'light'" in r for r in held_run.reasons), held_run
    assert leftovers() == []
