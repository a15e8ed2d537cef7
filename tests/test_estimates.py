"""Any simulator's per-job estimates against a run (``experiment.validate.estimates``): exact statistics on
hand-computed numbers, every bad row counted under its reason, and files that cannot be used failing with one clear
line."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from experiment.reporting.export import ResultsError
from experiment.reporting.summary import EmulatedJobFigures, JobSummary, job_comparisons
from experiment.reporting.validation import pearson_r, validation_stats
from experiment.validate.estimates import (
    MAX_FILE_BYTES,
    REASONS,
    EstimatesError,
    compare,
    compare_estimates,
    parse_estimates,
    parse_time,
    read_estimates,
    report_lines,
    run_measurements,
    write_estimates_report,
)

PACK = "pack,x=1"  # a spec string with a comma: quoted in CSV, or named by its directory pack_x=1


def job(machines, comm, compute, estimate):
    return {"model": "resnet50", "workers": 2, "collective": "ring", "wave": 0, "machines": machines,
            "comm_mean_s": comm, "compute_mean_s": compute, "estimate_s": estimate, "complete": comm is not None}


SPREAD_JOBS = {
    "a": job(["h1", "h2"], 1.0, 0.5, 1.2),
    "b": job(["h1", "h3"], 2.0, 0.5, 1.9),
    "c": job(["h2", "h4"], 4.0, 1.0, 4.4),
    "loc": job(["h1"], 0.002, 0.3, 0.0),  # on one machine: loopback only
    "unm": job(["h3", "h4"], None, None, None),  # nothing recorded
}
PACK_JOBS = {
    "a": job(["h1", "h2"], 0.5, 0.5, 0.6),
    "b": job(["h3"], 0.001, 0.5, 0.0),
    "c": job(["h1", "h2"], 3.0, 1.0, 2.7),
}


def job_summary(name: str, j: dict) -> JobSummary:
    """The report's record of a job of these summary.json fixtures (the fields they leave out None)."""
    fields = {f.name: j.get(f.name) for f in dataclasses.fields(JobSummary) if f.name != "measured"}
    emulated = {f.name: j.get(f.name) for f in dataclasses.fields(EmulatedJobFigures)}
    return JobSummary(**{**fields, "job": name, "machines": tuple(j["machines"]),
                         "measured": EmulatedJobFigures(**{**emulated, "contended_with": ()})})


def summary(policies=(("spread", SPREAD_JOBS), (PACK, PACK_JOBS))) -> dict:
    return {"name": "syn", "scale": 500.0, "dilation": 3.0, "capabilities": {},
            "policies": [{"policy": p, "jobs": jobs} for p, jobs in policies],
            "unplaced": {"titan": "placed none"}, "validation": {}}


@pytest.fixture
def run_dir(tmp_path):
    """A run directory with the summary.json the comparison reads: two policies, as in the module's docstring."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(summary()))
    return str(d)


def write_csv(tmp_path, text: str, name: str = "sim.csv") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_exact_statistics_per_metric_and_policy(tmp_path, run_dir):
    """comm: measured 1, 2, 4 against 1.1, 1.6, 4.2: |errors| .05, .1, .2: median .1, p90 .1 + .8 x .1 = .18,
    worst b at -20%; iteration (comm + compute 1.5, 2.5, 5) against 1.5, 2.0, 5.5: |errors| 0, .1, .2, the same."""
    path = write_csv(tmp_path, "policy,job,comm_s,iteration_s\nspread,a,1.1,1.5\nspread,b,1.6,2.0\nspread,c,4.2,5.5\n")
    r = compare_estimates(run_dir, read_estimates(path))
    comm, it = r.metric("comm"), r.metric("iteration")
    assert [(c.policy, c.job, c.measured_s, c.estimated_s) for c in comm.comparisons] == [
        ("spread", "a", 1.0, 1.1), ("spread", "b", 2.0, 1.6), ("spread", "c", 4.0, 4.2)]
    assert [(c.measured_s, c.estimated_s) for c in it.comparisons] == [(1.5, 1.5), (2.5, 2.0), (5.0, 5.5)]
    for m, measured, estimated in ((comm, [1, 2, 4], [1.1, 1.6, 4.2]), (it, [1.5, 2.5, 5.0], [1.5, 2.0, 5.5])):
        assert m.overall.n == 3
        assert m.overall.median_abs_rel_error == pytest.approx(0.1)
        assert m.overall.p90_abs_rel_error == pytest.approx(0.18)
        assert m.overall.pearson_r == pytest.approx(pearson_r(measured, estimated))
        assert m.overall.worst.job == "b" and m.overall.worst.rel_error == pytest.approx(-0.2)
        assert [p for p, _ in m.per_policy] == ["spread", PACK]
        assert dict(m.per_policy)["spread"] == m.overall and dict(m.per_policy)[PACK].n == 0
    assert r.issues == ()
    assert r.missing == ((PACK, "a"), (PACK, "c"))
    assert set(r.missing_not_comparable) == {("spread", "loc"), ("spread", "unm"), (PACK, "b")}
    assert r.rows == 3 and r.run_name == "syn"


BAD_ROWS = """policy,job,comm_s,iteration_s,jct_s,notes
spread,a,1.1,1.5,,ok
spread,zzz,1,1,,
nosuch,a,1,1,,
spread,a,2,2,,
pack_x=1,a,0.6
"pack,x=1",c,,nan,,
spread,loc,0.1,0.4,,
spread,unm,1,1,,
spread,b,abc,2.0,,
spread,c,-1,0,,
,b,1,1,,
spread,,1,1,,
"pack,x=1",b,1,1,9,
spread,zzz2,x,y,,,extra
nosuch2,a,abc,1,,
"""


def test_every_bad_row_is_counted_under_its_reason(tmp_path, run_dir):
    """Unknown job and policy, duplicate, short row, empty, non-numeric, negative and NaN values, 0, a local and an
    unmeasured job, a missing policy or job, jct_s and extra cells: each counted with example lines; the good
    values of a partly bad row are still compared."""
    r = compare_estimates(run_dir, read_estimates(write_csv(tmp_path, BAD_ROWS)))
    counts = {i.reason: i.count for i in r.issues}
    assert counts == {"malformed": 1, "missing_value": 4, "unknown_policy": 2, "unknown_job": 1, "duplicate": 1,
                      "local_job": 2, "not_measured": 1, "non_numeric": 1, "invalid_time": 2, "zero_estimate": 1,
                      "jct_not_measured": 1}
    assert [i.reason for i in r.issues] == [k for k in REASONS if k in counts]  # report order
    assert r.issue("missing_value").examples == ("line 6: iteration_s", "line 7: comm_s", "line 12: policy")
    assert r.issue("unknown_policy").examples == ("line 4: policy 'nosuch'", "line 16: policy 'nosuch2'")
    assert r.issue("unknown_job").examples == ("line 3: job 'zzz' under spread",)
    assert r.issue("duplicate").examples == ("line 5: a under spread",)
    assert r.issue("local_job").examples == ("line 8: loc under spread on h1", f"line 14: b under {PACK} on h3")
    assert r.issue("not_measured").examples == ("line 9: unm under spread",)
    assert r.issue("non_numeric").examples == ("line 10: comm_s 'abc'",)
    assert r.issue("invalid_time").examples == ("line 7: iteration_s 'nan'", "line 11: comm_s '-1'")
    assert r.issue("zero_estimate").examples == ("line 11: iteration_s '0'",)
    assert r.issue("malformed").examples == ("line 15: 1 cell(s) beyond the header",)
    assert r.issue("jct_not_measured").examples == (f"line 14: b under {PACK}",)
    assert [(c.policy, c.job, c.estimated_s) for c in r.metric("comm").comparisons] == [
        ("spread", "a", 1.1), (PACK, "a", 0.6)]  # the policy named by its directory, the short row's comm_s
    assert [(c.policy, c.job, c.estimated_s) for c in r.metric("iteration").comparisons] == [
        ("spread", "a", 1.5), ("spread", "b", 2.0)]
    assert r.rows == 15 and r.missing == () and r.ignored_columns == ("notes",)


def test_time_values():
    """Plain and exponent notation are times; empty, text, negative, NaN, infinite and 0 are refused with a reason."""
    assert parse_time("0.25") == (0.25, "") and parse_time("2.5e-1") == (0.25, "")
    for cell, why in (("", "missing_value"), ("1,5", "non_numeric"), ("0.2s", "non_numeric"), ("-0.1", "invalid_time"),
                      ("nan", "invalid_time"), ("inf", "invalid_time"), ("-inf", "invalid_time"),
                      ("0", "zero_estimate"), ("-0", "zero_estimate")):
        assert parse_time(cell) == (None, why), cell


def test_jobs_without_a_row_are_missing(tmp_path, run_dir):
    """A file with a header only compares nothing and lists every comparable job as missing, the others apart."""
    r = compare_estimates(run_dir, read_estimates(write_csv(tmp_path, "policy,job,comm_s\n")))
    assert r.rows == 0 and r.metric("comm").overall.n == 0 and r.metric("iteration") is None
    assert r.missing == (("spread", "a"), ("spread", "b"), ("spread", "c"), (PACK, "a"), (PACK, "c"))
    assert len(r.missing_not_comparable) == 3
    assert "Jobs without an estimate: 5 (a under spread" in "\n".join(report_lines(r))


def test_policy_column_needed_only_with_several_policies(tmp_path):
    """A single-policy run applies rows without a policy to it; a multi-policy run refuses a file without the
    column, naming the policies."""
    one = run_measurements(summary(policies=(("spread", SPREAD_JOBS),)))
    r = compare(parse_estimates("job,comm_s\na,1.1\nb,1.6\n"), one)
    assert [(c.policy, c.job) for c in r.metric("comm").comparisons] == [("spread", "a"), ("spread", "b")]
    r = compare(parse_estimates("policy,job,comm_s\n,a,1.1\n"), one)
    assert r.metric("comm").overall.n == 1
    with pytest.raises(EstimatesError, match=r"measured 2 policies \(spread, pack,x=1\); add a 'policy' column"):
        compare(parse_estimates("job,comm_s\na,1.1\n", "sim.csv"), run_measurements(summary()))


def test_header_names_are_tolerant_of_case_blanks_and_a_bom(tmp_path, run_dir):
    """``Job , COMM_S`` after a UTF-8 byte-order mark reads as ``job,comm_s``."""
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffPolicy, Job , COMM_S\r\nspread,a,1.1\r\n".encode())
    r = compare_estimates(run_dir, read_estimates(str(path)))
    assert r.metric("comm").overall.n == 1 and r.issues == ()


@pytest.mark.parametrize("header, expected", [
    ("policy,name,comm_s", "lacks job; columns: job (required), comm_s and/or iteration_s (at least one)"),
    ("policy,job,time", "lacks comm_s or iteration_s; columns: job"),
    ("policy;job;comm_s", "lacks job and comm_s or iteration_s; columns: job (required)"),
    ("job,comm_s,comm_s", "header names comm_s twice"),
])
def test_a_header_without_the_columns_is_one_clear_error(tmp_path, header, expected):
    """The message names what is missing and the valid columns (and the separator when it is not a comma)."""
    with pytest.raises(EstimatesError) as info:
        read_estimates(write_csv(tmp_path, header + "\nspread,a,1\n"))
    msg = str(info.value)
    assert expected in msg and "sim.csv" in msg and len(msg.splitlines()) == 1
    if ";" in header:
        assert msg.endswith("the file must be comma-separated")


def test_files_that_cannot_be_used(tmp_path):
    """An empty, binary, non-UTF-8, oversized or missing file, a directory and a FIFO each fail with one line
    (the FIFO without blocking)."""
    cases = {}
    cases["empty"] = write_csv(tmp_path, "", "empty.csv")
    cases["blank"] = write_csv(tmp_path, "\n \n", "blank.csv")
    (tmp_path / "bin.csv").write_bytes(b"job,comm_s\n\x00\x01\x02\xff")
    cases["binary"] = str(tmp_path / "bin.csv")
    (tmp_path / "latin1.csv").write_bytes("job,comm_s\nmod\xe8le,1\n".encode("latin-1"))
    cases["latin1"] = str(tmp_path / "latin1.csv")
    with open(tmp_path / "big.csv", "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse
    cases["big"] = str(tmp_path / "big.csv")
    cases["dir"] = str(tmp_path)
    cases["absent"] = str(tmp_path / "absent.csv")
    os.mkfifo(tmp_path / "fifo.csv")
    cases["fifo"] = str(tmp_path / "fifo.csv")
    expected = {"empty": "empty; expected a header line", "blank": "empty; expected a header line",
                "binary": "binary (NUL byte at offset 11)", "latin1": "not UTF-8 text (byte 0xe8 at offset 14)",
                "big": "larger than 16 MiB", "dir": "a directory, not a regular file",
                "absent": "No such file or directory", "fifo": "not a regular file"}
    for case, path in cases.items():
        with pytest.raises(EstimatesError) as info:
            read_estimates(path)
        msg = str(info.value)
        assert expected[case] in msg and path in msg and len(msg.splitlines()) == 1, (case, msg)


def test_a_run_directory_without_summary_is_one_clear_error(tmp_path):
    """Comparing against a directory that holds no run names the missing summary.json."""
    with pytest.raises(ResultsError, match="summary.json does not exist"):
        compare_estimates(str(tmp_path), parse_estimates("job,comm_s\na,1\n"))


def test_the_runs_own_estimates_reproduce_its_validation(tmp_path, run_dir):
    """Feeding the built-in simulator's estimates back as a CSV gives the statistics the report computes."""
    rows = ["policy,job,comm_s"] + [f'"{p}",{j},{"" if v["estimate_s"] is None else v["estimate_s"]}'
                                    for p, jobs in ((s["policy"], s["jobs"]) for s in summary()["policies"])
                                    for j, v in jobs.items()]
    r = compare_estimates(run_dir, read_estimates(write_csv(tmp_path, "\n".join(rows) + "\n")))
    records = {s["policy"]: [job_summary(n, j) for n, j in s["jobs"].items()] for s in summary()["policies"]}
    expected = validation_stats([c for p, jobs in records.items() for c in job_comparisons(p, jobs)])
    got = r.metric("comm").overall
    assert (got.n, got.worst) == (expected.n, expected.worst) == (5, expected.worst)
    for key in ("pearson_r", "median_abs_rel_error", "p90_abs_rel_error"):
        assert getattr(got, key) == pytest.approx(getattr(expected, key))
    assert {i.reason: i.count for i in r.issues} == {"local_job": 2, "not_measured": 1}


def test_terminal_lines(tmp_path, run_dir):
    """One line per policy and metric plus one for all (and the worst job), then the reasons with examples."""
    r = compare_estimates(run_dir, read_estimates(write_csv(tmp_path, BAD_ROWS)))
    lines = report_lines(r)
    assert lines[0].startswith(f"Estimates in {tmp_path / 'sim.csv'} against run 'syn'")
    assert lines[1] == f"  {'comm_s':<12} {'spread':<14} r -, median |error| 10.0%, p90 10.0% over 1 job"
    assert lines[2].startswith(f"  {'comm_s':<12} {PACK:<14} r -, median |error| 20.0%")
    assert lines[3].startswith(f"  {'comm_s':<12} {'all':<14} r ")
    assert lines[4].startswith(f"  {'comm_s':<12} worst: a under {PACK}: measured 0.5 s, estimated 0.6 s (+20.0%)")
    assert lines[6] == f"  {'iteration_s':<12} {PACK:<14} no job to compare"
    assert "Not compared:" in lines
    assert "      2  unknown_policy: no such policy measured in the run (line 4: policy 'nosuch'; " \
           "line 16: policy 'nosuch2')" in lines
    assert "      4  missing_value: an empty or absent cell where a value is needed (line 6: iteration_s; " \
           "line 7: comm_s; line 12: policy; ...)" in lines
    assert lines[-1] == "Columns ignored: notes"


def test_report_files(tmp_path, run_dir):
    """validation-<file name>.json (the report, JSON without NaN) and .png are written; no PNG without a comparison."""
    r = compare_estimates(run_dir, read_estimates(write_csv(tmp_path, BAD_ROWS, "my sim.csv")))
    paths = write_estimates_report(r, run_dir)
    assert [os.path.basename(p) for p in paths] == ["validation-my_sim.json", "validation-my_sim.png"]
    with open(paths[0]) as f:
        d = json.load(f)
    assert d == json.loads(json.dumps(r.to_dict()))
    assert d["metrics"]["comm"]["overall"]["n"] == 2 and d["metrics"]["iteration"]["comparisons"][1]["job"] == "b"
    assert {i["reason"]: i["count"] for i in d["not_compared"]}["duplicate"] == 1
    assert os.path.getsize(paths[1]) > 0
    empty = compare_estimates(run_dir, read_estimates(write_csv(tmp_path, "policy,job,comm_s\n", "none.csv")))
    assert [os.path.basename(p) for p in write_estimates_report(empty, run_dir, name="x")] == ["validation-x.json"]


def test_the_validate_command(tmp_path, run_dir, capsys):
    """`run_testbed.py validate RUN_DIR --estimates FILE` prints the statistics and the rejected rows and
    writes its files (exit 0); a run directory without results is one line and exit 2."""
    import run_testbed

    path = write_csv(tmp_path, "policy,job,comm_s\nspread,a,1.0\nspread,ghost,2.0\n")
    assert run_testbed.main(["validate", run_dir, "--estimates", path]) == 0
    out = capsys.readouterr().out
    assert "unknown_job" in out and "written: " in out
    assert os.path.exists(os.path.join(run_dir, "validation-sim.json"))
    assert run_testbed.main(["validate", str(tmp_path / "nothing"), "--estimates", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")


def test_jct_is_compared_for_every_job_when_the_run_recorded_it(tmp_path):
    """A run that recorded JCTs: a (10 s) against 12, the local job loc (4 s) against 3, a bad cell counted;
    |errors| .2 and .25; a run without JCTs counts the cells as jct_not_measured."""
    jobs = {**SPREAD_JOBS, "a": {**SPREAD_JOBS["a"], "jct_s": 10.0}, "loc": {**SPREAD_JOBS["loc"], "jct_s": 4.0},
            "b": {**SPREAD_JOBS["b"], "jct_s": 8.0}}
    d = tmp_path / "run"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(summary((("spread", jobs),))))
    path = write_csv(tmp_path, "job,comm_s,jct_s\na,1.1,12\nloc,,3\nb,1.6,soon\n")
    r = compare_estimates(str(d), read_estimates(path))
    jct = r.metric("jct")
    assert jct.column == "jct_s"
    assert [(c.job, c.measured_s, c.estimated_s) for c in jct.comparisons] == [("a", 10.0, 12.0), ("loc", 4.0, 3.0)]
    assert jct.overall.median_abs_rel_error == pytest.approx(0.225)
    assert r.issue("non_numeric").examples == ("line 4: jct_s 'soon'",)
    assert r.issue("jct_not_measured") is None
    assert [c.job for c in r.metric("comm").comparisons] == ["a", "b"]
    old = tmp_path / "old"
    old.mkdir()
    (old / "summary.json").write_text(json.dumps(summary((("spread", SPREAD_JOBS),))))
    r = compare_estimates(str(old), read_estimates(path))
    assert r.issue("jct_not_measured").count == 3 and r.metric("jct").overall.n == 0
