"""Unit tests (no root) of the per-job fidelity verdict: job bounds and link sets on the routed
fabric (``jobs.steps``), verdicts and contention (``measure.fidelity.job_verdicts``) and their
place in the run verdict (``measure.fidelity.assess``).

Every bound is hand-computed on a k=4 fat-tree at 4 Gbit/s paper scale, scale 500, i.e.
8 Mbit/s emulated links: one byte takes 1 us, 1 MB takes 1 s. Machines h1-h4 are in pod 0
(h1, h2 under e1; h3, h4 under e2), h5 in pod 1, h9 in pod 2, h13 in pod 3.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT as REPO

from common.errors import JobError
from common.units import scale_bw_mbps
from jobs.patterns import replay_pattern
from jobs.steps import chained_bound_s, job_bound_s, job_links, link_bound_s, step_bound_s
from measure import fidelity
from measure.cpu import CpuSummary
from measure.fidelity import JobEvidence, JobVerdict, LinkCheck, assess, job_verdicts
from topo import fat_tree

SCALE = 500.0
PAPER_MBPS = 4000.0
RATE_MBPS = PAPER_MBPS / SCALE  # 8 Mbit/s: 1 byte per microsecond
G = fat_tree(4, bw_mbps=PAPER_MBPS)


def link_rates(scale: float) -> dict[tuple[str, str], float]:
    """Every link's rate in Mbit/s at the given scale, keyed by the graph's edge orientation."""
    return {(u, v): scale_bw_mbps(d["bw_mbps"], scale) for u, v, d in G.edges(data=True)}


RATES = link_rates(SCALE)
M = 4_000_000  # one bucket, bytes: 4 s at 8 Mbit/s
PODS = ("h1", "h5", "h9", "h13")  # one machine in each pod


def textbook_s(p: int, size_bytes: int) -> float:
    """2(p-1)/p * M * 8 / B: a ring allreduce with every rank on its own uncontended links."""
    return 2 * (p - 1) / p * size_bytes * 8 / (RATE_MBPS * 1e6)


def ev(job: str, machines, measured_s: float | None, wave: int = 0, collective: str = "ring",
       buckets: tuple[int, ...] = (M,), complete: bool = True) -> JobEvidence:
    """Evidence of one job."""
    return JobEvidence(job=job, wave=wave, machines_by_rank=tuple(machines), collective=collective,
                       bucket_bytes=buckets, comm_mean_s=measured_s, complete=complete)


def verdict(status: str, job: str = "a") -> JobVerdict:
    """A verdict with the given status (ratio 1.5 for slow, 0.5 for fast, 1.0 otherwise)."""
    ratio = {"slow": 1.5, "fast": 0.5}.get(status, 1.0)
    reason = f"job {job!r} is {status}" if status in ("slow", "fast") else None
    return JobVerdict(job=job, wave=0, status=status, bound_s=2.0, measured_s=2.0 * ratio, ratio=ratio,
                      reason=reason)


CPU_OK = CpuSummary(samples=10, mean=0.4, p95=0.5, max=0.6, saturated=False)
CPU_SATURATED = CpuSummary(samples=10, mean=0.9, p95=0.97, max=1.0, switch_thread_p95=0.6, saturated=True)


# -- bounds and link sets ----------------------------------------------------------------------


def test_ring_over_four_pods_is_the_textbook_bound():
    """A ring over one machine per pod: 2(p-1)/p * M * 8 / B = 1.5 * 4 MB at 8 Mbit/s = 6 s."""
    assert job_bound_s(G, RATES, PODS, "ring", (M,)) == pytest.approx(6.0)
    assert textbook_s(4, M) == pytest.approx(6.0)


def test_hd_over_four_pods_is_the_link_load_bound():
    """HD over one machine per pod: each uplink carries M/2 + M/4 + M/4 + M/2 = 1.5 M, i.e. 6 s."""
    assert job_bound_s(G, RATES, PODS, "hd", (M,)) == pytest.approx(1.5 * M * 8 / 8e6)


def test_hd_collision_in_first_and_last_steps_chains_every_rank():
    """Ranks 0, 2 on h1, 1 on h2, 3 on h3: h1's links carry 2 * M/2 in the first and last HD steps
    (4 s each) and every rank waits for them, so the chained bound is M + M/4 + M/4 + M = 10 s,
    the step bound's figure, above the link-load bound of 8 s."""
    placement = ("h1", "h2", "h1", "h3")
    steps = replay_pattern("hd", 4, M)
    assert step_bound_s(G, RATES, placement, steps) == pytest.approx(10.0)
    assert link_bound_s(G, RATES, placement, steps) == pytest.approx(8.0)
    assert chained_bound_s(G, RATES, placement, steps) == pytest.approx(10.0)
    assert job_bound_s(G, RATES, placement, "hd", (M,)) == pytest.approx(10.0)


def test_chained_bound_lets_independent_ranks_move_on():
    """Pair 0-1 in step 1 and pair 2-3 in step 2, on four pods: neither waits for the other (4 s),
    where a barrier per step charges both (8 s); a chain 0->1 then 1->2 takes 8 s."""
    independent = [[(0, 1, M)], [(2, 3, M)]]
    assert chained_bound_s(G, RATES, PODS, independent) == pytest.approx(4.0)
    assert step_bound_s(G, RATES, PODS, independent) == pytest.approx(8.0)
    assert chained_bound_s(G, RATES, PODS, [[(0, 1, M)], [(1, 2, M)]]) == pytest.approx(8.0)


def test_bound_counts_headers_on_the_wire_given_the_mtu():
    """At MTU 1500 each M/4 = 1 MB transfer is 691 segments of at most 1448 B, 66 B of headers
    each: 1 045 606 B per step, 6 steps of the four-pod ring."""
    assert job_bound_s(G, RATES, PODS, "ring", (M,), mtu=1500) == pytest.approx(6 * 1_045_606e-6)


def test_ring_is_chained_not_the_link_load_bound():
    """A 16-byte ring over 3 pods has chunks of 8, 4, 4 bytes: every step has an 8-byte transfer
    (4 steps, 32 us), while the busiest rank only sends M + 8 = 24 bytes in all (24 us)."""
    placement = PODS[:3]
    steps = replay_pattern("ring", 3, 16)
    assert link_bound_s(G, RATES, placement, steps) == pytest.approx(24e-6)
    assert job_bound_s(G, RATES, placement, "ring", (16,)) == pytest.approx(32e-6)


def test_gloo_is_bound_as_the_mirrored_ring():
    """gloo on machines m0..m3 sends m_j -> m_(j-1): the links and bound of a ring on the machines reversed."""
    reversed_pods = PODS[::-1]
    assert job_bound_s(G, RATES, PODS, "gloo", (M,)) == pytest.approx(6.0)
    assert job_bound_s(G, RATES, PODS, "gloo", (M,)) == pytest.approx(
        job_bound_s(G, RATES, reversed_pods, "ring", (M,)))
    assert job_links(G, PODS, "gloo", (M,)) == job_links(G, reversed_pods, "ring", (M,))
    assert job_links(G, PODS, "gloo", (M,)) != job_links(G, PODS, "ring", (M,))  # ECMP hashes each direction


def test_buckets_are_reduced_one_after_another():
    """Two buckets of M and M/2 on the four-pod ring: 6 s + 3 s."""
    assert job_bound_s(G, RATES, PODS, "ring", (M, M // 2)) == pytest.approx(9.0)


def test_bound_is_the_same_at_paper_scale():
    """Paper-scale rates with paper-scale bytes give the time of emulated rates with scaled bytes."""
    paper_rates = link_rates(1.0)
    assert job_bound_s(G, paper_rates, PODS, "hd", (int(M * SCALE),)) == pytest.approx(
        job_bound_s(G, RATES, PODS, "hd", (M,)))


def test_unknown_collective_names_the_valid_ones():
    """An unknown collective is a JobError listing gloo, hd and ring."""
    with pytest.raises(JobError, match="valid: gloo, hd, ring"):
        job_bound_s(G, RATES, PODS, "tree", (M,))


def test_job_links_are_the_directed_hops_it_uses():
    """A ring on h3, h4 (both under e2) uses exactly the four machine-switch hops, both ways."""
    assert job_links(G, ("h3", "h4"), "ring", (M,)) == {("h3", "e2"), ("e2", "h4"), ("h4", "e2"), ("e2", "h3")}


# -- verdicts ----------------------------------------------------------------------------------


def test_job_on_one_machine_is_local():
    """All ranks on h1: no link, bound 0, status local and no ratio even with a measurement."""
    assert job_links(G, ("h1",) * 4, "ring", (M,)) == frozenset()
    [v] = job_verdicts(G, RATES, [ev("a", ("h1",) * 4, 0.2)])
    assert (v.status, v.bound_s, v.ratio, v.reason) == ("local", 0.0, None, None)


def test_job_of_small_transfers_is_latency_bound_not_checked():
    """A ring of 4 pods with a 57 kB bucket sends 14.25 kB per step, under 10 full packets (14 480 B of
    payload at MTU 1500): latency-bound, not checked, whatever it measured; 58 kB is checked."""
    small, large = 57_000, 58_000
    (v,) = job_verdicts(G, RATES, [ev("a", PODS, 99.0, buckets=(small,))], mtu=1500)
    assert v.status == "latency-bound" and not v.checked and v.reason is None
    (v,) = job_verdicts(G, RATES, [ev("a", PODS, 99.0, buckets=(large,))], mtu=1500)
    assert v.status == "slow"


def test_a_latency_bound_job_sharing_links_is_latency_bound_and_keeps_whom_it_shared_with():
    """Its time is software latency whether or not another job's queue is on its path: the class the
    validation reports it in is latency-bound, and the job it met is still named."""
    small, large = job_verdicts(G, RATES, [ev("small", PODS, 0.001, buckets=(57_000,)),
                                           ev("large", PODS, 9.0, buckets=(58_000,))], mtu=1500)
    assert (small.status, small.contended_with) == ("latency-bound", ("large",))
    assert (large.status, large.contended_with) == ("contended", ("small",))


def test_ecmp_collision_within_a_job_is_not_checked():
    """HD over h1, h2, h1, h3 puts two of its own flows on h1's links: 'collides', not checked."""
    (v,) = job_verdicts(G, RATES, [ev("a", ("h1", "h2", "h1", "h3"), 99.0, collective="hd")], mtu=1500)
    assert v.status == "collides" and not v.checked


def test_jobs_sharing_an_uplink_are_contended_and_name_each_other():
    """Rings on (h1, h5) and (h1, h9) share h1->e1: both contended, even one 5x over its bound;
    a ring on (h3, h4) in the same wave shares nothing and is checked."""
    a, b = ("h1", "h5"), ("h1", "h9")
    assert ("h1", "e1") in job_links(G, a, "ring", (M,)) & job_links(G, b, "ring", (M,))
    got = job_verdicts(G, RATES, [ev("a", a, 20.0), ev("b", b, 4.0), ev("c", ("h3", "h4"), 4.0)])
    assert [(v.job, v.status, v.contended_with) for v in got] == [
        ("a", "contended", ("b",)), ("b", "contended", ("a",)), ("c", "ok", ())]
    assert got[0].bound_s == pytest.approx(4.0) and got[0].ratio == pytest.approx(5.0) and got[0].reason is None


def test_jobs_on_disjoint_links_are_each_checked():
    """Rings on (h1, h2) and (h3, h4) share no link: each is checked on its own (one ok, one slow)."""
    x, y = ("h1", "h2"), ("h3", "h4")
    assert not job_links(G, x, "ring", (M,)) & job_links(G, y, "ring", (M,))
    got = job_verdicts(G, RATES, [ev("x", x, 4.0), ev("y", y, 8.0)])
    assert [(v.status, v.contended_with) for v in got] == [("ok", ()), ("slow", ())]
    assert got[1].ratio == pytest.approx(2.0)


def test_shared_links_in_different_waves_do_not_contend_and_order_is_kept():
    """Jobs on h1's uplink in waves 0 and 1 run apart; verdicts come back in input order."""
    got = job_verdicts(G, RATES, [ev("a", ("h1", "h5"), 4.0, wave=0), ev("b", ("h1", "h9"), 4.0, wave=1),
                                  ev("c", ("h1", "h13"), 4.0, wave=0)])
    assert [(v.job, v.wave, v.status, v.contended_with) for v in got] == [
        ("a", 0, "contended", ("c",)), ("b", 1, "ok", ()), ("c", 0, "contended", ("a",))]


def test_jobs_of_different_waves_contend_while_their_windows_overlap():
    """Jobs arriving one after another start in different waves but run together: a job of wave 1
    that starts while one of wave 0 on the same uplink still runs contends with it; one that starts
    after it ended does not, nor does one without a measured window."""
    from dataclasses import replace

    a = replace(ev("a", ("h1", "h5"), 8.0, wave=0), window_s=(0.0, 10.0))
    during = replace(ev("b", ("h1", "h9"), 4.0, wave=1), window_s=(5.0, 20.0))
    after = replace(ev("c", ("h1", "h13"), 4.0, wave=2), window_s=(21.0, 30.0))
    unknown = ev("d", ("h1", "h13"), 4.0, wave=3)
    got = job_verdicts(G, RATES, [a, during, after, unknown])
    assert [(v.job, v.status, v.contended_with) for v in got] == [
        ("a", "contended", ("b",)), ("b", "contended", ("a",)), ("c", "ok", ()), ("d", "ok", ())]
    assert a.ran_with(during) and not during.ran_with(after) and not after.ran_with(unknown)
    assert a.to_dict()["window_s"] == [0.0, 10.0] and unknown.to_dict()["window_s"] is None


def test_ina_jobs_aggregated_by_one_switch_at_once_contend_for_its_declared_pat():
    """Two INA jobs on disjoint links, each summed at e1 while the other runs, share its declared
    Peak Aggregation Throughput: contended; summed at different switches, or without a declared PAT
    (a switch then aggregates every job fully, as the simulator models it), each is checked."""
    from dataclasses import replace

    x = replace(ev("x", ("h1", "h2"), 4.0, collective="ina", buckets=(400_000,)), ps_host="h1", ina_switches=("e1",))
    y = replace(ev("y", ("h3", "h4"), 4.0, collective="ina", buckets=(400_000,)), ps_host="h3", ina_switches=("e1",))
    assert [(v.status, v.contended_with) for v in job_verdicts(G, RATES, [x, y], pat_mbps=1e9)] == [
        ("contended", ("y",)), ("contended", ("x",))]
    assert [v.contended_with for v in job_verdicts(G, RATES, [x, y])] == [(), ()]
    y = replace(y, ina_switches=("e2",))
    assert [v.contended_with for v in job_verdicts(G, RATES, [x, y], pat_mbps=1e9)] == [(), ()]


@pytest.mark.parametrize("measured_s,status", [
    (1.0, "ok"), (1.10, "ok"), (0.95, "ok"), (1.1001, "slow"), (0.9499, "fast")])
def test_ratio_limits_are_inclusive(measured_s, status):
    """Against a 1 s bound (a 1 MB ring over h1, h5), 0.95 and 1.10 pass and anything outside does not."""
    [v] = job_verdicts(G, RATES, [ev("a", ("h1", "h5"), measured_s, buckets=(1_000_000,))])
    assert v.bound_s == 1.0 and v.ratio == pytest.approx(measured_s)
    assert v.status == status
    assert (v.reason is None) == (status == "ok")


def test_slow_and_fast_reasons_name_job_times_ratio_and_limit():
    """The reason of a slow or fast job names it, the measured time, the bound, the ratio and the limit."""
    slow, fast = job_verdicts(G, RATES, [ev("big", PODS, 9.0), ev("tiny", PODS, 3.0, wave=1)])
    assert slow.status == "slow" and all(s in slow.reason for s in ("'big'", "9 s", "6 s", "1.500x", "1.10"))
    assert fast.status == "fast" and all(s in fast.reason for s in ("'tiny'", "3 s", "6 s", "0.500x", "0.95"))


def test_unmeasured_or_unfinished_jobs_are_incomplete():
    """No measurement, or a job that did not finish, is incomplete and not judged, whatever its ratio."""
    none, partial = job_verdicts(G, RATES, [ev("a", PODS, None), ev("b", PODS, 30.0, wave=1, complete=False)])
    assert (none.status, none.ratio, none.reason) == ("incomplete", None, None)
    assert (partial.status, partial.reason) == ("incomplete", None) and partial.ratio == pytest.approx(5.0)
    assert none.bound_s == pytest.approx(6.0)


def test_verdict_to_dict_is_json():
    """A verdict's to_dict survives JSON with every field."""
    [_, v] = job_verdicts(G, RATES, [ev("a", ("h1", "h5"), 4.0), ev("b", ("h1", "h9"), 4.0)])
    assert json.loads(json.dumps(v.to_dict())) == {
        "job": "b", "wave": 0, "status": "contended", "bound_s": pytest.approx(4.0), "measured_s": 4.0,
        "ratio": pytest.approx(1.0), "contended_with": ["a"], "reason": None}
    assert ev("a", PODS, 1.0).to_dict()["machines_by_rank"] == list(PODS)


def test_unknown_status_is_refused():
    """A JobVerdict with a status outside JOB_STATUSES raises, naming the valid ones."""
    with pytest.raises(ValueError, match="valid: ok, slow, fast"):
        JobVerdict(job="a", wave=0, status="fine", bound_s=1.0, measured_s=1.0, ratio=1.0)


# -- the run verdict ---------------------------------------------------------------------------


def test_saturated_cpu_with_a_checked_ok_job_is_trustworthy():
    """A job within its bound outweighs a saturated CPU, which stays visible as cpu_saturated."""
    got = assess(CPU_SATURATED, [], [verdict("ok")])
    assert got.trustworthy and got.reasons == ()
    assert got.cpu_saturated is True and got.cpu_p95 == 0.97
    assert (got.jobs_checked, got.jobs_failed) == (1, 0)
    assert got.jobs == (verdict("ok"),)
    assert got.to_dict()["jobs"] == [verdict("ok").to_dict()]


def test_saturated_cpu_with_only_unchecked_jobs_is_flagged():
    """Contended, local and incomplete jobs check nothing, so a saturated CPU still flags the run."""
    jobs = [verdict("contended", "a"), verdict("local", "b"), verdict("incomplete", "c")]
    got = assess(CPU_SATURATED, [], jobs)
    assert not got.trustworthy and len(got.reasons) == 1 and got.reasons[0].startswith("CPU saturated")
    assert (got.jobs_checked, got.jobs_failed, len(got.jobs)) == (0, 0, 3)


def test_saturated_cpu_without_jobs_flags_as_before():
    """With no job verdicts the CPU check is the old one; the new keys are empty."""
    for jobs in (None, []):
        got = assess(CPU_SATURATED, [], jobs)
        assert not got.trustworthy and "CPU saturated" in got.reasons[0]
        assert (got.jobs, got.jobs_checked, got.jobs_failed, got.cpu_saturated) == ((), 0, 0, True)


@pytest.mark.parametrize("status", ["slow", "fast"])
def test_a_failed_job_flags_with_its_reason(status):
    """A slow or fast job flags the run with its own reason, even beside an ok job and an idle CPU."""
    got = assess(CPU_OK, [], [verdict("ok", "a"), verdict(status, "b")])
    assert not got.trustworthy and got.reasons == (f"job 'b' is {status}",)
    assert (got.jobs_checked, got.jobs_failed, got.cpu_saturated) == (2, 1, False)


def test_a_slow_link_still_flags_beside_an_ok_job():
    """The link-rate check is independent of the job verdicts."""
    link = LinkCheck("e1->h1", "busy-rate", False, 0.9 / 0.625, 8.0, busy_s=2.0, achieved_mbps=5.0, ratio=0.625)
    got = assess(CPU_OK, [link], [verdict("ok")])
    assert not got.trustworthy and "e1->h1" in got.reasons[0] and got.worst_link.ratio == 0.625


def test_limits_are_the_documented_ones():
    """An uncontended job may run 10% over its bound and 5% under it."""
    assert (fidelity.MAX_JOB_RATIO, fidelity.MIN_JOB_RATIO) == (1.10, 0.95)


def test_verdict_modules_load_no_emulator():
    """Importing jobs.steps and measure.fidelity loads no mininet, os_ken or torch."""
    code = ("import sys, jobs.steps, measure.fidelity; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mininet', 'os_ken')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
