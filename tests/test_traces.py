"""Trace reader (experiment.config.traces): shipped traces read exactly, selection and skips on crafted files,
one-line ConfigErrors for every malformed input, the larger shared traces, model assignment."""

from __future__ import annotations

import csv
import hashlib
import random
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from conftest import REPO

import experiment.config.traces as traces_module
from common.errors import ConfigError
from experiment.config.rules import NAME_RE
from experiment.config.traces import (
    NETPACK_MODEL_POOL,
    TRACE_FORMATS,
    Trace,
    TraceJob,
    assign_models,
    detect_format,
    read_trace,
)
from jobs.models import MODELS

SHIPPED = REPO / "traces"

RAW_HEADER = "job_id,submission_time,duration,num_gpu"


def write(tmp_path: Path, text: str | bytes, name: str = "t.csv") -> Path:
    """``text`` written to ``tmp_path/name``."""
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def summary(trace: Trace, n: int = 3) -> list[tuple]:
    """The first ``n`` jobs as (name, arrival_s, gpus, duration_s, model, job_id, row)."""
    return [(j.name, j.arrival_s, j.gpus, j.duration_s, j.model, j.job_id, j.row) for j in trace.jobs[:n]]


# -- the traces shipped in traces/ ---------------------------------------------------------------


def test_tiresias_60_jobs_read_exactly():
    """60_job.csv: tiresias format, 60 jobs, submit times as arrivals, the first rows' values exactly."""
    trace = read_trace(SHIPPED / "tiresias" / "60_job.csv")
    assert (trace.format, trace.rows, len(trace.jobs), trace.skipped) == ("tiresias", 60, 60, {})
    assert summary(trace) == [("t00000", 0.0, 1, 164.0, "vgg19", "0", 2),
                              ("t00001", 30.0, 8, 147.0, "vgg11", "1", 3),
                              ("t00002", 53.0, 2, 127.0, "inception4", "2", 4)]
    assert trace.jobs[-1] == TraceJob("t00059", 1779.0, 1, 122.0, "inception3", "59", 61)
    assert sum(j.gpus for j in trace.jobs) == 170 and sum(j.duration_s for j in trace.jobs) == 10705


def test_elasticflow_195_jobs_read_exactly():
    """195job.csv: elasticflow format with models, arrivals re-based to its first job, 47.8 h long."""
    trace = read_trace(SHIPPED / "elasticflow-itp" / "195job.csv")
    assert (trace.format, trace.rows, len(trace.jobs), trace.skipped) == ("elasticflow", 195, 195, {})
    assert summary(trace) == [
        ("t00000", 0.0, 1, 1075.0, "deepspeech2", "bdd640fb-0667-1ad1-1c80-317fa3b1799d", 2),
        ("t00001", 2065.0, 8, 3604.0, "inception3", "23b8c1e9-3924-56de-3eb1-3b9046685257", 3),
        ("t00002", 5724.0, 1, 15533.0, "deepspeech2", "bd9c66b3-ad3c-2d6d-1a3d-1fa7bc8960a9", 4)]
    assert trace.jobs[-1].arrival_s == 3887530 - 3715485
    assert max(j.gpus for j in trace.jobs) == 16 and sum(j.gpus for j in trace.jobs) == 572


def test_philly_103959_read_exactly():
    """philly_103959.csv: philly-elasticflow format (not tiresias), `duration` read, 876 jobs of 1-4 GPUs."""
    trace = read_trace(SHIPPED / "philly" / "philly_103959.csv")
    assert (trace.format, trace.rows, len(trace.jobs), trace.skipped) == ("philly-elasticflow", 876, 876, {})
    assert summary(trace, 4) == [("t00000", 0.0, 1, 976570.0, "vgg16", "0", 2),
                                 ("t00001", 219316.0, 4, 1792395.0, "vgg16", "1", 3),
                                 ("t00002", 251674.0, 1, 23487.0, "vgg16", "2", 4),
                                 ("t00003", 251699.0, 1, 23367.0, "bert", "3", 5)]
    assert trace.jobs[-1] == TraceJob("t00875", 7910536.0, 1, 1710.0, "resnet50", "875", 877)
    assert {j.gpus for j in trace.jobs} == {1, 2, 4}


def test_shipped_files_match_their_readme_checksums():
    """traces/README.md lists the sha256 of exactly the files under traces/, and each matches."""
    readme = (SHIPPED / "README.md").read_text()
    listed = {rel: digest for digest, rel in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M)}
    files = {p.relative_to(SHIPPED).as_posix(): p for p in SHIPPED.rglob("*") if p.is_file() and p.name != "README.md"}
    assert sorted(listed) == sorted(files) and len(files) == 19
    for rel, path in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[rel], rel


# -- formats -------------------------------------------------------------------------------------


@pytest.mark.parametrize("header,fmt", [
    ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval", "tiresias"),
    (RAW_HEADER, "elasticflow"),
    ("job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration", "elasticflow"),
    ("job_id,submit_time,real_iteration,model_name,ddl,batch_size,num_gpu,real_duration,duration,iteration",
     "philly-elasticflow"),
    ("timestamp,duration,num_gpus,gpu_time,cluster", "philly"),
], ids=["tiresias", "itp-raw", "itp-augmented", "philly-elasticflow", "philly"])
def test_detect_format_from_each_real_header(header, fmt):
    """Each upstream header is detected as its format; the most specific match wins."""
    assert detect_format(header.split(",")) == fmt


def test_detect_format_unknown_header_names_columns_and_formats():
    """An unknown header is a ConfigError naming the columns found and every known format."""
    with pytest.raises(ConfigError) as err:
        detect_format(["start", "gpus", "runtime"])
    msg = str(err.value)
    assert "'start', 'gpus', 'runtime'" in msg
    assert all(name in msg for name in TRACE_FORMATS)


def test_detect_format_refuses_a_tie(monkeypatch):
    """Two formats matching a header with as many columns each is a ConfigError naming both."""
    twin = traces_module.TraceFormat("twin", ("job_id", "num_gpu", "submit_time", "model_name", "interval"),
                                     TRACE_FORMATS["tiresias"].parse)
    monkeypatch.setitem(TRACE_FORMATS, "twin", twin)
    header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval".split(",")
    with pytest.raises(ConfigError, match="matches formats tiresias, twin equally; name one"):
        detect_format(header)


def test_raw_itp_rows_have_no_model_and_explicit_format_is_checked(tmp_path):
    """Raw ITP rows give model None; a named format must exist and its columns be present."""
    path = write(tmp_path, f"{RAW_HEADER}\nj,5,60,2\n")
    assert summary(read_trace(path, "elasticflow")) == [("t00000", 0.0, 2, 60.0, None, "j", 2)]
    with pytest.raises(ConfigError, match=r"fmt: unknown trace format 'phily'; valid: .*philly.*did you mean 'philly'"):
        read_trace(path, "phily")
    with pytest.raises(ConfigError, match=r"read_trace fmt: None is out of range \(a trace format: auto, tiresias"):
        read_trace(path, None)
    with pytest.raises(ConfigError, match=r"read_trace path: 3 is not a path"):
        read_trace(3)
    with pytest.raises(ConfigError, match=r"line 1: format philly needs column\(s\) timestamp, num_gpus"):
        read_trace(path, "philly")


def test_philly_rows_numbered_and_timestamps_differenced(tmp_path):
    """philly rows: job_id is the data row number, arrivals are timestamp differences (UTC wall clock)."""
    path = write(tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n"
                           "2017-10-09 07:01:55,66.0,1,66.0,a\n\n"
                           "2017-10-09 06:13:03,2951.0,2,5902.0,b\n")
    trace = read_trace(path, prefix="p")
    assert (trace.format, trace.rows) == ("philly", 2)
    assert summary(trace) == [("p00000", 0.0, 2, 2951.0, None, "2", 4), ("p00001", 2932.0, 1, 66.0, None, "1", 2)]


# -- selection: sort, window, skips, max_jobs ----------------------------------------------------

# Sorted by submit time (ties in file order): b 10, c 40, d 40, f 40, e 70, a 100, h 130, g 250,
# i.e. offsets 0, 30, 30, 30, 60, 90, 120, 240 from t_first = 10.
CRAFTED = f"""{RAW_HEADER}
a,100,50,1
b,10,60,2
c,40,0,1
d,40,30,0
e,70,20,16
f,40,10,4
g,250,5,8
h,130,-5,1
"""


def picked(trace: Trace) -> list[tuple[str, float]]:
    """(job_id, arrival_s) of every selected job."""
    return [(j.job_id, j.arrival_s) for j in trace.jobs]


def test_whole_file_sorted_with_skips_counted(tmp_path):
    """Rows sorted stably by submit time; zero/negative run time, no GPUs and too big counted once each."""
    trace = read_trace(write(tmp_path, CRAFTED), max_gpus=8)
    assert picked(trace) == [("b", 0.0), ("f", 30.0), ("a", 90.0), ("g", 240.0)]
    assert [j.name for j in trace.jobs] == ["t00000", "t00001", "t00002", "t00003"]
    assert [j.row for j in trace.jobs] == [3, 7, 2, 8]
    assert trace.skipped == {"zero_duration": 2, "no_gpus": 1, "too_big": 1}
    assert trace.rows == 8
    assert read_trace(write(tmp_path, CRAFTED)).skipped == {"zero_duration": 2, "no_gpus": 1}


def test_window_is_half_open_and_arrivals_rebased(tmp_path):
    """start_s <= t - t_first < start_s + span_s; skips counted inside the window only; re-based to the first kept."""
    path = write(tmp_path, CRAFTED)
    trace = read_trace(path, start_s=30, span_s=90, max_gpus=8)
    assert picked(trace) == [("f", 0.0), ("a", 60.0)]
    assert trace.skipped == {"zero_duration": 1, "no_gpus": 1, "too_big": 1}
    assert picked(read_trace(path, span_s=30)) == [("b", 0.0)]
    assert picked(read_trace(path, start_s=60, span_s=60.5)) == [("e", 0.0), ("a", 30.0)]
    assert picked(read_trace(path, start_s=120)) == [("g", 0.0)]
    empty = read_trace(path, start_s=1000)
    assert (empty.jobs, empty.skipped, empty.rows) == ((), {}, 8)


def test_min_gpus_leaves_out_smaller_jobs_counted(tmp_path):
    """min_gpus keeps the distributed jobs: smaller ones are skipped as too_small, after the other reasons."""
    trace = read_trace(write(tmp_path, CRAFTED), max_gpus=8, min_gpus=4)
    assert picked(trace) == [("f", 0.0), ("g", 210.0)]
    assert trace.skipped == {"zero_duration": 2, "no_gpus": 1, "too_big": 1, "too_small": 2}
    with pytest.raises(ConfigError, match=r"read_trace min_gpus: 0 is out of range"):
        read_trace(write(tmp_path, CRAFTED), min_gpus=0)


def test_max_jobs_keeps_the_first_after_skips(tmp_path):
    """max_jobs applies after the skips: the window's skips are all counted, later rows are not skips."""
    path = write(tmp_path, CRAFTED)
    trace = read_trace(path, start_s=30, max_gpus=8, max_jobs=1)
    assert picked(trace) == [("f", 0.0)]
    assert trace.skipped == {"zero_duration": 2, "no_gpus": 1, "too_big": 1}
    assert picked(read_trace(path, max_jobs=3)) == [("b", 0.0), ("f", 30.0), ("e", 60.0)]


@pytest.mark.parametrize("option,value", [
    ("max_jobs", 0), ("max_jobs", 2.0), ("max_jobs", True), ("start_s", -1), ("start_s", float("nan")),
    ("span_s", 0), ("span_s", float("inf")), ("max_gpus", 0), ("prefix", "-x"), ("prefix", "a/b"),
    ("prefix", "x" * 60),
])
def test_bad_options_are_config_errors(tmp_path, option, value):
    """Every read_trace option is range-checked with a ConfigError naming it."""
    with pytest.raises(ConfigError, match=f"read_trace {option}: "):
        read_trace(write(tmp_path, CRAFTED), **{option: value})


def test_names_are_valid_job_names(tmp_path):
    """Job names follow <prefix><i:05d> and match the configuration's name rule."""
    trace = read_trace(write(tmp_path, CRAFTED), prefix="itp.c2-")
    assert [j.name for j in trace.jobs][:2] == ["itp.c2-00000", "itp.c2-00001"]
    assert all(NAME_RE.fullmatch(j.name) for j in trace.jobs)


# -- malformed input: one-line ConfigErrors ------------------------------------------------------


@pytest.mark.parametrize("rows,match", [
    ("a,1,2,1\nb,x,2,1", r"line 3, column 'submission_time': 'x' is not a number"),
    ("a,1,nan,1", r"line 2, column 'duration': 'nan' is not a finite number"),
    ("a,1,2,1\n\nb,1,-inf,1", r"line 4, column 'duration': '-inf' is not a finite number"),
    ("a,1,1e999,1", r"line 2, column 'duration': '1e999' is not a finite number"),
    ("a,1,1_000,1", r"line 2, column 'duration': '1_000' is not a number"),
    ("a,1,\u0662,1", r"line 2, column 'duration': '\u0662' is not a number"),
    ("a,-1,2,1", r"line 2, column 'submission_time': '-1' is negative"),
    ("a,1,2,-2", r"line 2, column 'num_gpu': '-2' is negative"),
    ("a,1,2,1.5", r"line 2, column 'num_gpu': '1.5' is not a whole number"),
    ("a,1,2,", r"line 2, column 'num_gpu': '' is not a number"),
    ("a,1,2", r"line 2, column 'num_gpu': missing \(the row has 3 fields, the header 4\)"),
    ("a,1,2,1,9", r"line 2, field 5: '9' is past the last column"),
    (" ,1,2,1", r"line 2, column 'job_id': '' is empty"),
    ('a,"1,2,1\nb,1,2,1\n', r"line 2: not valid CSV \(unexpected end of data, at line 4\)"),
])
def test_malformed_field_names_line_column_value(tmp_path, rows, match):
    """A malformed field is one ConfigError line naming the file, line, column and value."""
    path = write(tmp_path, f"{RAW_HEADER}\n{rows}\n")
    with pytest.raises(ConfigError, match=match) as err:
        read_trace(path)
    assert str(err.value).startswith(f"trace {path}: ") and "\n" not in str(err.value)


@pytest.mark.parametrize("stamp", ["2017-13-01 00:00:00", "2017-02-30 00:00:00", "2017-10-09T07:01:55",
                                   "1507532515", "2017-10-09 07:01:55+00:00"])
def test_malformed_timestamp_is_an_error(tmp_path, stamp):
    """A philly timestamp other than a valid 'YYYY-MM-DD HH:MM:SS' is a ConfigError with its line."""
    path = write(tmp_path, f"timestamp,duration,num_gpus\n2017-10-09 07:01:55,1,1\n{stamp},1,1\n")
    with pytest.raises(ConfigError, match=rf"line 3, column 'timestamp': '{re.escape(stamp)}' is not a date"):
        read_trace(path)


@pytest.mark.parametrize("content,match", [
    (b"", "empty file"),
    (b" \n\n", "empty file"),
    (b"\xef\xbb\xbf", "empty file"),
    (RAW_HEADER.encode(), "a header only, no data rows"),
    (f"{RAW_HEADER}\n\n\n".encode(), "a header only, no data rows"),
    (b"\nj,1,2,1\n", "line 1: blank header line"),
    (b"job_id,x,x,duration\n", "line 1: column 'x' appears twice"),
    (b"a,b\n1,2\n", r"line 1: unknown trace header \(columns: 'a', 'b'\); known formats: tiresias"),
    (b"PK\x03\x04\x00\x00binary", r"a binary file, not CSV text \(NUL byte at offset 4\)"),
    (b"job_id,submission_time,duration,num_gpu\n\xe9,1,2,1\n", r"not UTF-8 text \(byte 0xe9 at offset 40\)"),
])
def test_bad_files_are_one_line_errors(tmp_path, content, match):
    """Empty, header-only, binary, non-UTF-8 and unknown-header files are one-line ConfigErrors."""
    path = write(tmp_path, content)
    with pytest.raises(ConfigError, match=match) as err:
        read_trace(path)
    assert "\n" not in str(err.value)


def test_unreadable_paths_and_size_limit(tmp_path, monkeypatch):
    """A missing file, a directory without CSV files and a file over MAX_TRACE_BYTES are ConfigErrors
    naming the path."""
    with pytest.raises(ConfigError, match=r"trace .*nope.csv: cannot read it: No such file"):
        read_trace(tmp_path / "nope.csv")
    with pytest.raises(ConfigError, match=r"a directory without a .csv file"):
        read_trace(tmp_path)
    monkeypatch.setattr(traces_module, "MAX_TRACE_BYTES", 40)
    with pytest.raises(ConfigError, match=r"cannot read it: larger than 40 bytes"):
        read_trace(write(tmp_path, CRAFTED))


def test_a_directory_is_its_files_merged_in_submission_order(tmp_path):
    """ITP's ten clusters as one stream: every row of every file, ordered by submission time (ties in
    file-name order), re-based to the first; files of two formats are refused in one line."""
    itp = SHIPPED / "elasticflow-itp" / "clusters"
    merged = read_trace(itp)
    rows = []
    for path in sorted(itp.glob("*.csv")):
        with open(path, newline="") as f:
            rows += [(float(r["submission_time"]), r["job_id"]) for r in csv.DictReader(f)]
    order = [job for _, job in sorted(rows, key=lambda r: r[0])]
    assert merged.format == "elasticflow" and merged.rows == len(rows) == 69351
    assert [j.job_id for j in merged.jobs] == order
    assert merged.jobs[0].arrival_s == 0.0 and merged.jobs[-1].arrival_s == max(t for t, _ in rows) - min(
        t for t, _ in rows)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "a.csv").write_bytes((itp / "cluster01.csv").read_bytes())
    (mixed / "b.csv").write_bytes((SHIPPED / "tiresias" / "60_job.csv").read_bytes())
    with pytest.raises(ConfigError, match=r"b.csv: format tiresias, where a.csv is elasticflow"):
        read_trace(mixed)


def test_mangled_files_give_a_trace_or_a_config_error(tmp_path):
    """Randomly mangled copies of a valid trace never raise anything but ConfigError."""
    rng = random.Random(7)
    base = (SHIPPED / "tiresias" / "60_job.csv").read_bytes()[:400]
    alphabet = b',"\n\r\x00\xff -.e9x'
    for i in range(150):
        data = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(data))
            data[pos:pos + rng.randint(0, 3)] = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
        try:
            read_trace(write(tmp_path, bytes(data), f"m{i}.csv"))
        except ConfigError as exc:
            assert "\n" not in str(exc)


# -- the larger shipped traces ------------------------------------------------------------------

PHILLY_JOBS = 82247  # traces/README.md's table


@pytest.fixture(scope="module")
def philly() -> Trace:
    """philly.csv, read once (82,247 rows)."""
    return read_trace(SHIPPED / "philly" / "philly.csv")


def test_philly_reads_whole(philly):
    """philly.csv: the README's job count, nothing skipped, sorted from 2017-09-04, 71 jobs in 20 days."""
    assert philly.format == "philly" and philly.rows == PHILLY_JOBS
    assert len(philly.jobs) == PHILLY_JOBS - sum(philly.skipped.values()) and philly.skipped == {}
    assert philly.jobs[0] == TraceJob("t00000", 0.0, 8, 2240194.0, None, "31567", 31568)
    span = datetime(2017, 12, 22, 8, 2, 11) - datetime(2017, 9, 4, 10, 30, 41)
    assert philly.jobs[-1].arrival_s == span.total_seconds()
    assert all(a.arrival_s <= b.arrival_s for a, b in zip(philly.jobs, philly.jobs[1:], strict=False))
    assert max(j.gpus for j in philly.jobs) == 128 and min(j.duration_s for j in philly.jobs) == 1.0
    assert sum(j.arrival_s < 20 * 86400 for j in philly.jobs) == 71  # the sparse lead-in the docstring names


def test_philly_103959_is_a_vc_of_philly(philly):
    """philly_103959's first job is philly.csv's row stamped 2017-09-21 17:00:12 (same run time, GPUs)."""
    first = read_trace(SHIPPED / "philly" / "philly_103959.csv").jobs[0]
    offset = (datetime(2017, 9, 21, 17, 0, 12) - datetime(2017, 9, 4, 10, 30, 41)).total_seconds()
    match = [j for j in philly.jobs if j.arrival_s == offset]
    assert [(j.gpus, j.duration_s) for j in match] == [(first.gpus, first.duration_s)]


# -- models --------------------------------------------------------------------------------------



@pytest.mark.parametrize("model", NETPACK_MODEL_POOL)
def test_netpack_pool_models_exist(model):
    """Every model of NetPack's pool (spec §5.4) has a profile in jobs.models.MODELS."""
    assert model in MODELS


def test_assign_models_fills_only_missing_ones_deterministically(tmp_path):
    """Jobs without a model get uniform draws from the pool with Random(seed), in job order; others keep theirs."""
    raw = read_trace(write(tmp_path, f"{RAW_HEADER}\n" + "".join(f"j{i},{i},10,1\n" for i in range(40))))
    named = read_trace(SHIPPED / "tiresias" / "60_job.csv").jobs[:3]
    jobs = (*named[:2], *raw.jobs, named[2])
    out = assign_models(jobs, NETPACK_MODEL_POOL, seed=5)
    assert out == assign_models(jobs, NETPACK_MODEL_POOL, seed=5)
    rng = random.Random(5)
    expected = [j.model if j.model is not None else rng.choice(NETPACK_MODEL_POOL) for j in jobs]
    assert [j.model for j in out] == expected
    assert [j.model for j in (out[0], out[1], out[-1])] == ["vgg19", "vgg11", "inception4"]
    assert [(j.name, j.arrival_s, j.row) for j in out] == [(j.name, j.arrival_s, j.row) for j in jobs]
    assert len({j.model for j in out[2:-1]}) == len(NETPACK_MODEL_POOL)
    assert [j.model for j in assign_models(jobs, NETPACK_MODEL_POOL, seed=6)] != expected
    assert assign_models(named, (), seed=1) == tuple(named)
    with pytest.raises(ConfigError, match="job 't00000' has no model and the model pool is empty"):
        assign_models(raw.jobs, [], seed=1)


def test_traces_module_is_pure():
    """Importing experiment.config.traces loads no emulator, Mininet, os-ken, torch or YAML module."""
    code = ("import sys, experiment.config.traces; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('emulator', 'mininet', 'os_ken', 'torch', 'yaml', 'numpy', 'networkx')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
