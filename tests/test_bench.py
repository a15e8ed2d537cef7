"""The benchmarks that need no root (``bench/``), each run as documented at its smallest
configuration: the table it prints has the documented columns and a row per configuration asked,
and one figure holds an invariant derived without the benchmark. The ones that build networks are
in ``tests/test_emulation_bench.py``."""

from __future__ import annotations

import math

from conftest import read_table, run_bench

CASSINI_COLUMNS = ["jobs", "candidates", "profiles s", "score+rank s", "every class s", "classes",
                   "shared links (max)", "links scored (max)", "discarded (loops)", "winner score", "jobs shifted"]


def test_cassini_smallest():
    """bench/cassini.py at 2 and 10 jobs, 3 candidates: a row per size; a candidate scores no more links
    than it shares, and a winner is named exactly when some candidate had no loop."""
    rows = read_table(run_bench("cassini.py", "--sizes", "2,10", "--candidates", "3"), "jobs")
    assert list(rows[0]) == CASSINI_COLUMNS
    assert [(r["jobs"], r["candidates"]) for r in rows] == [("2", "3"), ("10", "3")]
    for r in rows:
        assert int(r["links scored (max)"]) <= int(r["shared links (max)"]), r
        assert (r["winner score"] != "-") == (int(r["discarded (loops)"]) < 3), r
    # Seed 1 meets both branches: 2 jobs leave a loop-free candidate, 10 jobs do not.
    assert 0.0 < float(rows[0]["winner score"]) <= 1.0 and rows[1]["winner score"] == "-", rows


def test_placement_latency_smallest():
    """bench/placement_latency.py with 5 jobs: a row per registered policy, each placing every job on
    the 40%-idle cluster, its median no above its p99, and Titan's share of the 50 ms target its median / 50."""
    from placement import POLICIES

    rows = read_table(run_bench("placement_latency.py", "--jobs", "5"), "policy")
    assert list(rows[0]) == ["policy", "median ms", "p99 ms", "placed", "titan median / 50 ms"]
    assert [r["policy"] for r in rows] == sorted(POLICIES)
    for r in rows:
        assert r["placed"] == "5/5" and float(r["median ms"]) <= float(r["p99 ms"]), r
    titan = next(r for r in rows if r["policy"] == "titan")
    share = float(titan["titan median / 50 ms"].removesuffix(" of target"))
    assert math.isclose(share, float(titan["median ms"]) / 50.0, abs_tol=0.006), titan


def test_netpack_scale_smallest():
    """bench/netpack_scale.py, 20 Philly jobs on 100 and 10,000 servers: a row per size; the time in
    place() per call times the calls is the time per placed job times the jobs placed (both the total),
    and 10,000 servers place every job."""
    rows = read_table(run_bench("netpack_scale.py", "--servers", "100", "10000", "--jobs", "20"), "servers")
    assert list(rows[0]) == ["servers", "placed", "place() calls", "s per call", "s per placed job", "total s",
                             "paper s/job", "vs paper", "total vs target"]
    assert [r["servers"] for r in rows] == ["100", "10,000"]
    for r in rows:
        calls, placed = int(r["place() calls"]), int(r["placed"])
        assert 0 < placed <= 20 and calls <= 20, r
        assert math.isclose(float(r["s per call"]) * calls, float(r["s per placed job"]) * placed, rel_tol=0.01), r
    assert rows[1]["placed"] == "20" and rows[1]["total vs target"].endswith("x of 30 s"), rows[1]
    assert math.isclose(float(rows[1]["vs paper"].removesuffix("x")),
                        float(rows[1]["s per placed job"]) / 1.36e-2, rel_tol=0.02), rows[1]  # both to 3 digits


SIM_COLUMNS = ["jobs", "events", "simulated s", "wall ms per job", "wall s", "growth exponent",
               "exponent per job running", "running (mean)", "slowed by sharing"]


def test_sim_scale_both_engines_agree_without_contention():
    """bench/sim_scale.py --engine both, 10 and 20 jobs of 2 iterations arriving 1,000 s apart (each
    alone on the fabric): a row per size, and the fluid engine's communication time is the step-level
    one's (fluid / steps 1.000 at p10 and p90), since neither has contention to model."""
    out = run_bench("sim_scale.py", "--engine", "both", "--sizes", "10", "20", "--gap", "1000", "--iterations", "2")
    rows = read_table(out, "jobs")
    assert list(rows[0]) == SIM_COLUMNS
    assert [r["jobs"] for r in rows] == ["10", "20"] and all(int(r["events"]) > 0 for r in rows), rows
    agreements = [line for line in out.splitlines() if "fluid / steps communication time over" in line]
    assert len(agreements) == 2, out
    for line in agreements:
        assert "p10 1.000, p90 1.000" in line, line


def test_sim_scale_fluid_on_a_larger_fabric_extrapolates_past_the_budget():
    """bench/sim_scale.py --engine fluid on the first 1,100 machines (a fat-tree larger than Titan's
    k = 16, built with the simulator's limits) with a zero budget: the first size is measured (jobs
    running at once, a share of them slowed), the second extrapolated, and the 10,000-job figure is the
    measured wall time per job times 10,000."""
    out = run_bench("sim_scale.py", "--engine", "fluid", "--machines", "1100", "--gap", "0.002", "--sizes", "30",
                    "60", "--iterations", "2", "--budget", "0")
    assert "fat-tree k=18 (1,458 machines), jobs on the first 1,100" in out, out
    first, second = read_table(out, "jobs")
    assert list(first) == SIM_COLUMNS and (first["jobs"], second["jobs"]) == ("30", "60")
    assert int(first["events"]) > 0 and 1 <= float(first["running (mean)"]) <= 30, first
    assert 0 <= float(first["slowed by sharing"].removesuffix("%")) <= 100, first
    assert second["events"] == "-" and second["wall s"].endswith("(extrapolated)"), second
    # One size measured: no exponent, so the extrapolation is linear, the 10,000-job figure is the
    # measured wall time per job times 10,000.
    target = next(line for line in out.splitlines() if line.startswith("10000 jobs on 1,100 machines:"))
    assert "extrapolated from 60 jobs with exponent 1.00" in target, target
    wall_10k = float(target.split(": ")[1].split(" s of wall time")[0])
    assert abs(wall_10k - float(first["wall ms per job"]) * 10) <= 1.0, (target, first)
    # The closing line names the size it stands for: the last one, extrapolated here.
    assert out.rstrip().splitlines()[-1].startswith("60 jobs on 1,100 machines: "), out
    assert "(extrapolated)" in out.rstrip().splitlines()[-1], out


def test_sim_scale_closing_line_names_the_size_measured_and_the_exponent_per_job_running():
    """bench/sim_scale.py --engine fluid at two measured sizes: the closing line is the larger size's,
    measured; the second row has both growth exponents (wall ~ jobs^k, and wall per job running ~ jobs^k),
    and the first size's target line says it was measured."""
    out = run_bench("sim_scale.py", "--engine", "fluid", "--machines", "1100", "--gap", "0.002", "--sizes", "20",
                    "40", "--iterations", "2")
    first, second = read_table(out, "jobs")
    assert first["growth exponent"] == first["exponent per job running"] == "-", first
    growth, per_running = float(second["growth exponent"]), float(second["exponent per job running"])
    # wall / running ~ jobs^k: the two exponents differ by the growth of the jobs running at once
    running = [float(r["running (mean)"]) for r in (first, second)]
    assert math.isclose(growth - per_running, math.log(running[1] / running[0]) / math.log(2), abs_tol=0.15), second
    lines = out.rstrip().splitlines()
    assert lines[-1].startswith("40 jobs on 1,100 machines: ") and lines[-1].endswith("(measured)"), lines[-1]
    assert any(line.startswith("10000 jobs on 1,100 machines: ") and "extrapolated from 40 jobs" in line
               for line in lines), out
