"""INA jobs in experiment configs: validation, the engine decision (required / optional), the
fidelity verdict, the simulator's refusal, the export's machine pairs and the report's INA table,
CSV and plot panel. The emulated run itself is in ``tests/test_emulation_ina.py``."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest
from test_summary import CFG, G, records, result

from common.errors import ConfigError
from emulator.ina_runs import FALLBACK_COLLECTIVE, resolve_ina, unused_result, without_ina
from experiment.config.schema import (
    INA_MAX_SLOTS,
    INA_RESULTS,
    absolute_paths,
    from_dict,
    ina_jobs,
    ina_switches,
    load,
    to_dict,
    validate,
)
from experiment.reporting.export import job_record
from experiment.reporting.ina_results import InaJobResult, InaResult
from experiment.reporting.report import ina_lines, summarise_policy, summary_tables, write_run_report
from experiment.reporting.summary import PolicyRun
from ina.p4.build import DEFAULT_SLOTS
from ina.protocol import HEADER_BYTES
from measure.fidelity import JobEvidence, ina_bound_s, ina_links, job_verdicts
from measure.shaping import link_rates_mbps
from sim.ina import RESULTS

INA_JOB = {"name": "a", "model": "resnet50", "workers": 4, "collective": "ina"}


def cfg(**over):
    d = {"jobs": [INA_JOB, {"name": "b", "model": "resnet50", "workers": 2}], "policies": ["consolidate"],
         "iterations": 2}
    d.update(over)
    return from_dict(d)


def test_ina_config_validates_and_round_trips(tmp_path):
    c = absolute_paths(cfg(ina={"use": "optional", "engine": "software", "slots": 64, "switches": ["e1", "e2"]}),
                       str(tmp_path))  # as a run writes its config.json
    validate(c)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(to_dict(c)))
    assert load(str(path)) == c
    assert ina_switches(c, G) == ("e1", "e2")
    assert ina_switches(cfg(), G) == ("e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8")


def test_the_example_ina_experiment_is_valid():
    c = load("experiments/ina.yaml")
    validate(c)
    assert {j.collective for j in c.jobs} == {"ina", "ring"}


def test_slot_limit_is_the_bmv2_programs_register_size():
    assert INA_MAX_SLOTS == DEFAULT_SLOTS
    from experiment.config.schema import INA_MAX_VALUES_PER_PACKET
    from ina.protocol import MAX_VALUES_PER_PACKET

    assert INA_MAX_VALUES_PER_PACKET == MAX_VALUES_PER_PACKET


@pytest.mark.parametrize("over, pattern", [
    ({"ina": {"slots": 100}}, r"config\.ina\.slots: 100 is not a power of two"),
    ({"ina": {"slots": 8192}}, r"config\.ina\.slots: 8192"),
    ({"ina": {"switches": ["a1_1"]}}, r"config\.ina\.switches: 'a1_1'"),
    ({"ina": {"switches": ["c1"]}}, r"is not a switch with machines \(a ToR\)"),
    ({"ina": {"switches": ["e1", "e1"]}}, r"listed twice"),
    ({"ina": {"engine": "tofino"}}, r"config\.ina\.engine: 'tofino'"),
    ({"ina": {"use": "maybe"}}, r"config\.ina\.use: 'maybe'"),
])
def test_bad_ina_configs_get_one_clear_message(over, pattern):
    with pytest.raises(ConfigError, match=pattern):
        validate(cfg(**over))


@pytest.mark.parametrize("over", [{"runtime": "torch"}, {"mode": "train", "jobs": [{**INA_JOB, "model": "small_cnn"}]}])
def test_ina_jobs_are_accepted_in_the_torch_runtime_and_in_train_mode(over):
    """The torch runtime and train mode take INA jobs: the config validates with its INA job and
    ToRs (running them is tests/test_emulation_ina_experiment.py's)."""
    c = cfg(**over)
    g = validate(c)
    assert ina_jobs(c) == ["a"] and set(ina_switches(c, g)) <= {n for n, d in g.nodes(data=True)
                                                             if d.get("role") == "switch"}
    assert ina_switches(c, g)


def test_the_step_level_simulator_refuses_ina_jobs_in_one_line_and_the_fluid_one_runs_them():
    with pytest.raises(ConfigError, match=r"job 'a' uses collective 'ina', which the simulator models in its fluid "
                                          r"mode only; set simulator: \{mode: fluid\}") as e:
        validate(cfg(), backend="sim")
    assert "\n" not in str(e.value)
    validate(cfg(simulator={"mode": "fluid"}), backend="sim")


def test_trace_jobs_ask_for_ina_on_the_fluid_engine():
    with pytest.raises(ConfigError, match=r"every job of trace x\.csv uses collective 'ina', which the simulator "
                                          r"models in its fluid mode only"):
        validate(from_dict({"trace": {"file": "x.csv", "collective": "ina"}}), backend="sim")


def test_multicast_results_run_on_both_back_ends():
    validate(cfg(ina={"results": "multicast"}))
    validate(cfg(ina={"results": "multicast"}, simulator={"mode": "fluid"}), backend="sim")
    with pytest.raises(ConfigError, match=r"config\.ina\.results"):
        validate(cfg(ina={"results": "broadcast"}))


def test_values_per_packet_must_fit_the_mtu():
    validate(cfg(ina={"values_per_packet": 256}))
    with pytest.raises(ConfigError, match=r"config\.ina\.values_per_packet: 256 makes 1072-byte IP packets, above "
                                          r"config\.mtu 1000.*at most 238 values per packet"):
        validate(cfg(ina={"values_per_packet": 256}, mtu=1000))
    with pytest.raises(ConfigError, match=r"config\.ina\.values_per_packet"):
        validate(cfg(ina={"values_per_packet": 364}))


def test_the_configs_results_modes_are_the_simulators_and_the_plans():
    from ina.plan import RESULTS as PLANNED

    assert INA_RESULTS == RESULTS == PLANNED


def no_p4_anywhere(monkeypatch, tmp_path):
    """A machine without bmv2: no P4_PREFIX, no default prefix, and a PATH of one empty directory of
    the test's own, so that no tool is found wherever the machine installs them (really looked for)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("P4_PREFIX", str(tmp_path / "none"))
    monkeypatch.setattr("ina.p4.build.DEFAULT_PREFIX", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(empty))


def test_bmv2_required_where_it_cannot_run_is_one_line(monkeypatch, tmp_path):
    no_p4_anywhere(monkeypatch, tmp_path)
    with pytest.raises(ConfigError, match=r"config\.ina: INA engine bmv2 asked for, but it cannot run here: no "
                                          r"bmv2/p4c.*ina\.use: optional") as e:
        resolve_ina(cfg(ina={"engine": "bmv2"}))
    assert "\n" not in str(e.value)


def test_bmv2_optional_where_it_cannot_run_runs_the_ring_and_says_so(monkeypatch, tmp_path):
    no_p4_anywhere(monkeypatch, tmp_path)
    c = cfg(ina={"engine": "bmv2", "use": "optional"})
    engine, why = resolve_ina(c)
    assert engine is None and "cannot run here" in why and "ring allreduce" in why
    assert [j.collective for j in without_ina(c).jobs] == [FALLBACK_COLLECTIVE, "ring"]
    r = unused_result(why, 1024)
    assert not r.used and r.engine == "none" and r.to_dict()["used"] is False


def test_auto_falls_back_to_the_software_engine_and_no_ina_job_needs_none(monkeypatch, tmp_path):
    no_p4_anywhere(monkeypatch, tmp_path)
    engine, why = resolve_ina(cfg())
    assert engine == "software" and "no bmv2/p4c" in why
    assert resolve_ina(cfg(jobs=[{"name": "b", "model": "resnet50", "workers": 2}])) == \
        (None, "no job uses collective ina")


def test_ina_jobs_are_judged_against_their_links_bound_and_count_for_contention():
    """The bound is the job's busiest link: the PS's, which takes in one stream per child of the root
    and sends one result stream per machine (3 here: h2, h5, h6), aggregated or not. An INA job is
    judged against it as a ring job is against its own: contended where it shares a link, else ok
    up to 1.10x of it, slow above (with the reason), latency-bound when no bucket fills 10 packets."""
    rates = link_rates_mbps(G, 500)
    ina = JobEvidence("a", 0, ("h1", "h2", "h5", "h6"), "ina", (4000,), 0.5, True, ps_host="h1")
    ring = JobEvidence("b", 0, ("h6", "h7"), "ring", (400_000,), 0.1, True)  # 200 kB steps: not latency-bound
    alone = JobEvidence("c", 0, ("h15", "h16"), "ring", (4000,), 0.1, True)
    v = {x.job: x for x in job_verdicts(G, rates, [ina, ring, alone], 1500)}
    # one bucket of 4,000 B: 32 packets of 32 lanes, each 14 + 28 + header + 128 bytes on the wire
    wire_s = 32 * (14 + 28 + HEADER_BYTES + 128) * 8 / (rates[("h1", "e1")] * 1e6)
    assert v["a"].status == "contended" and v["a"].bound_s == pytest.approx(3 * wire_s)
    assert v["a"].ratio == pytest.approx(0.5 / (3 * wire_s)) and not v["a"].checked
    assert v["a"].contended_with == ("b",) and v["b"].status == "contended"  # h6's uplink carries both
    assert "a" not in v["c"].contended_with
    # Faster than the bound by up to the busiest link's token bucket per bucket is a burst after idle,
    # not an error: two frames (3,028 B) at 20 Mbit/s are 1.2 ms, so only below 0.95 x (7.3 - 1.2) ms is the job fast.
    for measured, status in ((1.05, "ok"), (1.2, "slow"), (0.9, "ok"), (0.1, "fast")):
        (alone,) = job_verdicts(G, rates, [dataclasses.replace(ina, comm_mean_s=measured * 3 * wire_s)], 1500)
        assert alone.status == status and alone.checked and (status != "slow" or "1.200x" in alone.reason)
    small = dataclasses.replace(ina, bucket_bytes=(9 * 32 * 4,), comm_mean_s=1.0)
    assert job_verdicts(G, rates, [small], 1500)[0].status == "latency-bound"
    incomplete = dataclasses.replace(ina, complete=False)
    assert job_verdicts(G, rates, [incomplete], 1500)[0].status == "incomplete"
    assert ina_bound_s(G, rates, ("h1", "h1"), "h1", (4000,)) == 0.0  # every rank on the PS's machine
    assert ina_bound_s(G, rates, ("h1", "h2"), "h1", (4000, 1)) == pytest.approx(wire_s * 33 / 32)
    # Aggregated at e3 (h5, h6) and at the root e1: one stream into h1, still three results out.
    aggregated = dataclasses.replace(ina, ina_switches=("e3", "e1"))
    assert job_verdicts(G, rates, [aggregated], 1500)[0].bound_s == pytest.approx(3 * wire_s)


def test_the_ps_alone_in_its_rack_sends_a_result_per_machine_and_takes_in_one_per_root_child():
    """4 machines in 2 racks, the PS on h9 in a third: unaggregated its link takes in 4 streams and
    sends 4 results; aggregated at both racks' ToRs it takes in 2 (or 1 where its own ToR sums them),
    and still sends 4: the unicast results set the bound either way."""
    rates = link_rates_mbps(G, 500)
    per_stream = 32 * (14 + 28 + HEADER_BYTES + 128) * 8 / (rates[("h9", "e5")] * 1e6)
    machines = ("h1", "h2", "h5", "h6")
    for switches in ((), ("e1", "e3"), ("e1", "e3", "e5")):
        assert ina_bound_s(G, rates, machines, "h9", (4000,), switches) == pytest.approx(4 * per_stream)
    # Results multicast: the PS's link carries as many out as in; with e5 summing, one each way, and
    # the busiest links are then the racks' own (one stream each way per machine).
    assert ina_bound_s(G, rates, machines, "h9", (4000,), ("e1", "e3"), "multicast") == pytest.approx(2 * per_stream)
    assert ina_bound_s(G, rates, machines, "h9", (4000,), ("e1", "e3", "e5"), "multicast") == \
        pytest.approx(per_stream)
    assert ina_bound_s(G, rates, machines, "h9", (4000,), (), "multicast") == pytest.approx(4 * per_stream)


def test_a_declared_pat_below_the_jobs_rate_sets_its_bound():
    """h2 and h3 summed at the PS's ToR e1, results multicast: alone the job streams at every link's
    rate R, one stream each way on the PS's link. A declared PAT of R / 2 sums half of it; the rest
    passes e1 unaggregated, two streams, so the PS's link carries R / 2 + 2 (x - R / 2) = R each way
    at x = 3R / 4: the bound is 4/3 of the full-aggregation one. A job measured at 1.3 times that one
    is then what the network modelled gives (ok), not a slow emulator; a PAT of R changes nothing."""
    rates = link_rates_mbps(G, 500)
    r = rates[("h1", "e1")]
    job = JobEvidence("a", 0, ("h1", "h2", "h3"), "ina", (400_000,), 0.0, True, ps_host="h1", ina_switches=("e1",),
                      ina_results="multicast")
    full = ina_bound_s(G, rates, job.machines_by_rank, "h1", job.bucket_bytes, ("e1",), "multicast")
    assert ina_bound_s(G, rates, job.machines_by_rank, "h1", job.bucket_bytes, ("e1",), "multicast",
                       pat_mbps=r / 2) == pytest.approx(full * 4 / 3)
    assert ina_bound_s(G, rates, job.machines_by_rank, "h1", job.bucket_bytes, ("e1",), "multicast",
                       pat_mbps=r) == pytest.approx(full)
    measured = dataclasses.replace(job, comm_mean_s=1.3 * full)
    (under_pat,) = job_verdicts(G, rates, [measured], 1500, pat_mbps=r / 2)
    assert under_pat.status == "ok" and under_pat.bound_s == pytest.approx(full * 4 / 3)
    assert job_verdicts(G, rates, [measured], 1500)[0].status == "slow"


def test_ina_links_are_every_machine_to_its_ps_and_back():
    links = ina_links(G, ("h1", "h1", "h3"), "h1")
    assert ("h3", "e2") in links and ("e2", "h3") in links and ("h1", "e1") in links and ("e1", "h1") in links
    assert ina_links(G, ("h1", "h2"), None) == frozenset()
    assert ina_links(G, ("h1", "h1"), "h1") == frozenset()


def test_export_pairs_of_an_ina_job_are_its_machines_and_its_ps():
    from experiment.reporting.export import Wave

    c = cfg()
    placement = {"job": "a", "slots": [["h1", 0], ["h2", 0], ["h5", 0], ["h5", 1]], "ps_host": None}
    job = job_record(c, placement, Wave(0, ("a",), None, 0.0, None, None), None, None)
    assert job.machine_pairs == (("h1", "h2"), ("h1", "h5"), ("h2", "h1"), ("h5", "h1"))
    job = job_record(c, {**placement, "ps_host": "h5"}, Wave(0, ("a",), None, 0.0, None, None), None, None)
    assert job.machine_pairs == (("h1", "h5"), ("h2", "h5"), ("h5", "h1"), ("h5", "h2"))


def ina_result() -> InaResult:
    job = InaJobResult("a", (1, 3), "h1", ("e2",), "e1", {"sent": 400, "resent": 4, "timeouts": 1, "results": 100},
                       {"received": 200, "aggregated": 150, "fallback": 20, "resend": 4},
                       {"e2": 100}, {"e2": 400})
    return InaResult(True, "bmv2", "bmv2 simple_switch from P4_PREFIX=x", 1024, ("e1", "e2"),
                     {"e1": {"contributions": 300, "aggregates": 100, "collisions": 20, "duplicates": 2,
                             "malformed:truncated": 3},
                      "e2": {"contributions": 200, "aggregates": 100, "collisions": 0, "duplicates": 0}},
                     {"h1": {"packets": 200}}, {"a": job})


def test_uplink_packets_count_each_rack_but_the_ps_s_from_its_aggregator_or_its_workers():
    from ina.aggregator import JobTraffic
    from ina.plan import tor_of, uplink_packets

    machines = ["h1", "h2", "h5", "h6", "h9"]
    racks = {m: tor_of(G, m) for m in machines}
    assert len(set(racks.values())) == 3, racks  # the PS's rack (h1, h2) and two others
    sent = {"h1": 10, "h2": 10, "h5": 10, "h6": 12, "h9": 7}
    # h5 and h6's ToR summed them (10 aggregates, 2 resends passed on); h9's has no aggregator
    forwarded = {racks["h5"]: JobTraffic(12, 99), racks["h1"]: JobTraffic(500, 0)}
    with_ina, unaggregated = uplink_packets(G, machines, "h1", forwarded, sent)
    assert with_ina == {racks["h5"]: 12, racks["h9"]: 7}
    assert unaggregated == {racks["h5"]: 22, racks["h9"]: 7}
    assert uplink_packets(G, ["h1", "h2"], "h1", forwarded, sent) == ({}, {})  # one rack: no uplink


def test_ina_job_figures():
    job = ina_result().jobs["a"]
    assert job.packets_per_ps_packet == 2.0 and job.fallback_fraction == 0.1
    empty = InaJobResult("x", (1,), "h1", (), None, {"sent": 5}, {})
    assert empty.packets_per_ps_packet is None and empty.fallback_fraction is None
    d = job.to_dict()
    assert d["job_ids"] == [1, 3] and d["packets_per_ps_packet"] == 2.0 and d["root"] == "e1"
    assert (job.uplink_bytes, job.uplink_bytes_unaggregated, job.uplink_fraction) == (19_000, 76_000, 0.25)
    assert d["uplink_packets"] == {"e2": 100} and d["uplink_fraction"] == 0.25
    assert empty.uplink_fraction is None  # nothing crossed an uplink
    assert dataclasses.replace(job, uplink_complete=False).uplink_fraction is None  # a worker's counters missing


def ina_policy_result():
    r = result()
    return dataclasses.replace(r, ina=ina_result())


def test_the_report_has_an_ina_table_csv_and_plot_panel(tmp_path):
    r = ina_policy_result()
    s = r.summary = summarise_policy(CFG, G, r, records(), "emu")
    assert s.ina_packets_per_ps_packet == 2.0
    assert s.to_dict()["ina"]["jobs"]["a"]["ps"]["fallback"] == 20
    assert r.to_dict()["ina"]["engine"] == "bmv2"
    lines = "\n".join(ina_lines(s))
    assert "INA under p (bmv2 aggregators, 1024 slots" in lines
    assert "500 packets summed, 200 aggregates sent on, 20 collisions, 2 duplicates, 3 malformed dropped" in lines
    assert "2.00" in lines and "10.0%" in lines and "0.02 " in lines and "0.08 " in lines and "0.25" in lines
    assert "INA under p" in summary_tables([s])
    out = io.StringIO()
    write_run_report(str(tmp_path), CFG, G, {"p": PolicyRun(r.summary, r)}, {"ina_engine": "bmv2"}, out)
    rows = list(csv.DictReader(open(tmp_path / "ina.csv")))
    assert rows == [{"policy": "p", "job": "a", "engine": "bmv2", "ps_host": "h1", "leaves": "e2", "root": "e1",
                     "job_ids": "1 3", "sent": "400", "resent": "4", "timeouts": "1", "results": "100",
                     "ecn_results": "0", "ps_received": "200", "ps_aggregated": "150", "ps_fallback": "20",
                     "packets_per_ps_packet": "2.0", "fallback_fraction": "0.1", "uplink_bytes": "19000",
                     "uplink_bytes_unaggregated": "76000", "uplink_fraction": "0.25"}]
    assert "ina.csv" in out.getvalue()
    assert "INA processes" not in lines  # none sampled
    s = dataclasses.replace(s, ina=dataclasses.replace(s.ina, cpu={"PS h1": 0.97, "bmv2 e1": 0.354}))
    assert ina_lines(s)[-1] == ("  INA processes' busiest thread, 95th percentile of one core while measured: "
                                "PS h1 97%, bmv2 e1 35%")
    assert s.ina.to_dict()["cpu"] == {"PS h1": 0.97, "bmv2 e1": 0.354}
    from PIL import Image

    assert Image.open(tmp_path / "policies.png").size[0] > Image.open(tmp_path / "policies.png").size[1] * 5


def test_a_run_without_ina_jobs_writes_no_ina_file_and_no_ina_key(tmp_path):
    r = result()
    r.summary = summarise_policy(CFG, G, r, records(), "emu")
    assert "ina" not in r.to_dict() and "ina" not in r.summary.to_dict()
    write_run_report(str(tmp_path), CFG, G, {"p": PolicyRun(r.summary, r)}, {}, io.StringIO())
    assert not (tmp_path / "ina.csv").exists()


def test_ina_not_used_is_said_in_the_table():
    r = dataclasses.replace(result(), ina=unused_result("no bmv2; INA jobs ran the ring allreduce", 1024))
    s = summarise_policy(CFG, G, r, records(), "emu")
    assert ina_lines(s) == ["INA under p: not used (no bmv2; INA jobs ran the ring allreduce)"]
    assert s.ina_packets_per_ps_packet is None


def test_the_capacity_line_says_whether_the_aggregators_keep_up_and_what_dilation_would():
    """An aggregator must take every INA packet its links can bring, aggregated or not (a seq the PAT
    meter refuses still crosses it): short, it is said with the dilation that carries it, and the run
    goes on; an engine slower than the declared PAT could never aggregate at it, and refuses."""
    import math

    from emulator.ina_engines import EngineCapacity

    ok = EngineCapacity(5000.0, "measured now", {"l1": 3000.0, "l2": 4000.0}, math.inf, 3.0)
    assert ok.keeps_up and not ok.refuses and ok.line("bmv2", 256) == (
        "INA: a bmv2 aggregator takes 5,000 packets/s of 256 values here (measured now); l2 must take 4,000/s "
        "(every INA packet its links can bring) at dilation 3: the aggregators carry it")
    short = EngineCapacity(5000.0, "measured 2026-11-26 08:00", {"l1": 12000.0}, math.inf, 3.0)
    assert not short.keeps_up and not short.refuses and short.line("bmv2", 256).endswith(
        "its aggregator may not keep up, and INA jobs through it may be judged slow; dilation 7.2 carries it")
    assert short.to_dict() == {"engine_pps": 5000.0, "source": "measured 2026-11-26 08:00",
                               "demand_pps": {"l1": 12000.0}, "pat_pps": None, "dilation": 3.0,
                               "carrying_dilation": 7.2, "keeps_up": False}
    # A PAT below the engine's rate meters the claims, but every packet the links bring still crosses it.
    declared = EngineCapacity(5000.0, "measured now", {"l1": 12000.0}, 4000.0, 3.0)
    assert not declared.keeps_up and not declared.refuses and declared.needed_pps == {"l1": 12000.0}
    assert declared.line("bmv2", 256).endswith(
        "dilation 7.2 carries it, each metered at the declared PAT (4,000 claims/s: seqs beyond it pass "
        "unaggregated, through it)")
    over = EngineCapacity(5000.0, "measured now", {"l1": 12000.0}, 6000.0, 3.0)
    assert over.refuses and over.pat_dilation == pytest.approx(3.6) and over.line("bmv2", 256) == (
        "INA: a bmv2 aggregator takes 5,000 packets/s of 256 values here (measured now); ina.pat_gbps declares "
        "6,000 claims/s of wall time at dilation 3: it cannot aggregate at the declared PAT; dilation 3.6 would, "
        "or declare a lower ina.pat_gbps")
    none = EngineCapacity(5000.0, "measured now", {"l1": 12000.0}, 0.0, 3.0)  # NetPack's PAT 0: no INA
    assert none.keeps_up and not none.refuses and none.line("bmv2", 256) == (
        "INA: bmv2 aggregators, ina.pat_gbps 0: no switch aggregates, every job's packets go to its parameter "
        "server")
