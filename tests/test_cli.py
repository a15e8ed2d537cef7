"""The command line: config checking without root, and one clear message for each bad input."""

from __future__ import annotations

import glob
import importlib
import os
import signal
import subprocess
import sys

import pytest
from conftest import CLI, ROOT, leftovers, read_until, run_cli, two_rack_run, wait_until

DEFAULT = os.path.join(ROOT, "experiments", "default.yaml")



def assert_clean_error(cp, pattern: str):
    """Exit code 2, one line on stderr containing ``pattern``, no traceback."""
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "Traceback" not in cp.stderr + cp.stdout
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and pattern in lines[0], cp.stderr


def test_check_accepts_default_config():
    """`run_testbed.py check` validates the default experiment without running it."""
    cp = run_cli("check", DEFAULT)
    assert cp.returncode == 0, cp.stderr
    assert "ok" in cp.stdout and "16 machines" in cp.stdout


@pytest.mark.parametrize("text, pattern", [
    ("topology: {kind: fat_tree, k: 3}\njobs: [{name: a, model: resnet50, workers: 2}]\n", "even"),
    ("topology: {kind: ring}\njobs: [{name: a, model: resnet50, workers: 2}]\n", "valid: fat_tree"),
    ("jobs: [{name: a, model: resnet50, workers: 2}]\npolicies: [nope]\n", "consolidate"),
    ("jobs: [{name: a, model: resnet50, workers: 99}]\n", "only 64 free"),
    ("jobs: [{name: a, model: resnet50, workers: 2}]\nscael: 3\n", "did you mean 'scale'"),
    ("jobs: [unclosed\n", "not valid YAML"),
])
def test_check_rejects_bad_configs(tmp_path, text, pattern):
    """A bad config gives exit code 2 and one line naming the problem."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert_clean_error(run_cli("check", str(path)), pattern)


def test_unreadable_config():
    """A config that does not exist is named in a one-line error."""
    assert_clean_error(run_cli("check", "/nonexistent/x.yaml"), "/nonexistent/x.yaml")


def _clone_with_venv(tmp_path, venv: bool):
    """A clone of the project (run_testbed.py copied, the packages linked) whose .venv, with ``venv``, is a
    bare one without the pinned packages: a set-up interrupted before pip finished."""
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "run_testbed.py").write_bytes(open(os.path.join(ROOT, "run_testbed.py"), "rb").read())
    for name in os.listdir(ROOT):
        if name == "experiments" or os.path.isfile(os.path.join(ROOT, name, "__init__.py")):
            os.symlink(os.path.join(ROOT, name), clone / name)
    bare = clone / ".venv" if venv else tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=60)
    return clone, str(bare / "bin" / "python")


@pytest.mark.parametrize("command", [["list"], ["check"], ["--backend", "sim"]])
@pytest.mark.parametrize("venv", ["incomplete", "missing"])
def test_a_missing_or_incomplete_venv_names_the_set_up(tmp_path, command, venv):
    """With .venv missing its packages (the script switches into it), or no .venv and a Python without
    them, every command is one line naming the missing module and the set-up command, exit code 2."""
    clone, bare_python = _clone_with_venv(tmp_path, venv == "incomplete")
    python = sys.executable if venv == "incomplete" else bare_python
    env = {k: v for k, v in os.environ.items() if k != "TESTBED_NO_VENV_REEXEC"}
    cp = subprocess.run([python, str(clone / "run_testbed.py"), *command], capture_output=True, text=True,
                        timeout=60, env=env, cwd=str(tmp_path))
    assert_clean_error(cp, "the set-up has not run or did not finish; run it: sudo make setup")
    assert "is missing from " in cp.stderr and cp.stdout == ""


@pytest.fixture
def main_in_process(monkeypatch):
    """run_testbed.main in this process, with the root check replaced by a failure: a run whose config passes
    validation stops there instead of building a network."""
    monkeypatch.setenv("TESTBED_NO_VENV_REEXEC", "1")
    run_testbed = importlib.import_module("run_testbed")
    from emulator import capabilities

    def reached_root_check():
        raise AssertionError("the config passed validation and the run reached the root check")

    monkeypatch.setattr(capabilities, "require_root", reached_root_check)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # keep main's SIGTERM handler out of pytest
    return run_testbed.main


@pytest.mark.parametrize("args, pattern", [
    (["--iterations", "0"], "config.iterations: 0 is out of range (an integer in [1, 100000])"),
    (["--iterations", "-3"], "config.iterations: -3 is out of range"),
    (["-p", "nope"], "config.policies: unknown placement policy 'nope'; valid: cassini, comb, consolidate"),
    (["-p", "consolidate", "-p", "consolidate"], "config.policies: 'consolidate' would run twice, into one directory"),
    (["-p", "all", "-p", "random"], "'random' would run twice, into one directory (list each policy once; 'all' is"),
    (["-p", "../x"], "config.policies[0]: '../x' is not a valid policy spec"),
    (["--results", ""], "config.results_dir: '' is empty"),
])
def test_run_overrides_are_validated(main_in_process, capsys, args, pattern):
    """Command-line overrides (-p, --iterations, --results) meet the config's rules: exit code 2 and one line,
    before the run needs root or builds anything."""
    assert main_in_process(["run", "-c", DEFAULT, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and pattern in err, err


def test_a_reader_that_leaves_early_gets_no_traceback():
    """Output piped into a reader that has gone (``... | head``): exit code 141, as a shell's SIGPIPE,
    and nothing on stderr."""
    read, write = os.pipe()
    os.close(read)
    try:
        cp = subprocess.run([*CLI, "reproduce", "--list"], stdout=write, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, timeout=60)
    finally:
        os.close(write)
    assert (cp.returncode, cp.stderr) == (141, "")


@pytest.mark.parametrize("args, pattern", [
    (["--iterations", "abc"], "error: argument --iterations: invalid int value: 'abc' (see run_testbed.py run -h)"),
    (["run", "--container", "podman"], "error: argument --container: invalid choice: 'podman'"),
    (["run", "--bogus"], "error: unrecognized arguments: --bogus"),
])
def test_usage_errors_are_one_line(args, pattern):
    """A malformed command line is one line on stderr and exit code 2, like every other user error."""
    assert_clean_error(run_cli(*args), pattern)


@pytest.mark.parametrize("content, pattern", [
    (b"\x89PNG\r\n\x1a\n\x00\xff", "not UTF-8 text (byte 0x89 at offset 0)"),
    ("name: d\u00e9faut\n".encode("latin-1"), "not UTF-8 text (byte 0xe9 at offset 7)"),
    (("x: " + "[" * 20000 + "]" * 20000 + "\n").encode(), "nested deeper than 10 levels"),
    ("".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i else 'x'] * 9)}]\n" for i in range(9)).encode(),
     "more than 100000 values with aliases expanded"),
    (b"jobs: [{name: ../../../../tmp/x/pwned, model: resnet50, workers: 2}]\n",
     "config.jobs[0].name: '../../../../tmp/x/pwned' is not a valid name"),
])
def test_check_rejects_hostile_files_in_one_line(tmp_path, content, pattern):
    """Binary, latin-1, 20 000-deep and alias-bomb files and a path-traversing job name: one line, exit code 2."""
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    assert_clean_error(run_cli("check", str(path)), pattern)


def test_run_needs_root():
    """Running an experiment as an unprivileged user fails with a message saying root is needed."""
    if os.geteuid() != 0:
        cp = run_cli("-c", DEFAULT)
    else:
        cp = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *CLI, "-c", DEFAULT],
                            capture_output=True, text=True, timeout=60, cwd="/")
    assert_clean_error(cp, "root")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to get past the root check")
def test_run_without_open_vswitch(tmp_path):
    """With Open vSwitch unreachable the run stops before building anything, with a message naming it."""
    env = dict(os.environ, OVS_RUNDIR=str(tmp_path))  # ovs-vsctl finds no database socket there
    assert_clean_error(run_cli("-c", DEFAULT, env=env), "Open vSwitch is not running")


@pytest.mark.emulation
def test_a_network_predicted_not_to_fit_is_refused_before_anything_starts(emulation_ok, tmp_path):
    """A k = 8 fat-tree with AF_XDP switch ports (640 ports, about 47 GB predicted) on a machine of
    24 GB: one line naming the size, the estimate, what is available and what to change; exit 2, no
    results directory, nothing left. Where AF_XDP ports cannot run (the kernel datapath), that
    refusal comes first and the memory check is not reached."""
    from emulator.capabilities import detect
    from measure.footprint import footprint, mem_available_bytes
    from topo import fat_tree

    caps = detect()
    if caps.ovs_datapath != "user" or caps.afxdp_missing:
        pytest.skip(f"AF_XDP ports cannot run here: {caps.afxdp_missing or 'the kernel datapath'}")
    if footprint(fat_tree(8), "afxdp", mem_available_bytes()).fits:
        pytest.skip("this machine has the memory for a k = 8 fat-tree of AF_XDP ports")
    cp = run_cli("--set", "topology.k=8", "--set", "switch_ports=afxdp", "--results", str(tmp_path / "res"))
    assert_clean_error(cp, "would not fit in this machine's memory")
    assert "640 afxdp switch ports" in cp.stderr and "switch_ports: system" in cp.stderr
    assert not (tmp_path / "res").exists() and leftovers() == []


@pytest.mark.emulation
def test_interrupted_run_leaves_nothing(emulation_ok, tmp_path):
    """SIGINT while the job's ranks are recording iterations: exit code 130, and no bridge, interface, namespace
    process or controller is left. The smallest network with every kind of part a run makes
    (:func:`conftest.two_rack_run`) and a job long enough to be running when the signal lands."""
    cfg = tmp_path / "long.yaml"
    cfg.write_text(two_rack_run(100))
    proc = subprocess.Popen([*CLI, "-c", str(cfg), "--results", str(tmp_path / "res")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = read_until(proc, "wave 0:")

    def recording():  # every rank has recorded an iteration
        assert proc.poll() is None, f"the run ended before its ranks recorded: {''.join(seen)}"
        records = glob.glob(str(tmp_path / "res" / "*" / "spread" / "jobs" / "j" / "j-rank*.jsonl"))
        return len(records) == 2 and all(os.path.getsize(r) for r in records)

    wait_until(recording, 120, "both ranks recording iterations")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + out
    assert "Traceback" not in out
    assert leftovers() == []


@pytest.mark.emulation
def test_policy_that_cannot_place_is_reported_and_others_run(emulation_ok, tmp_path):
    """ElasticFlow rounds a 3-worker job up to 4 GPUs, more than the 3 free: it waits for ever. The run reports
    that policy, still runs consolidation (its 3 workers on both machines), writes both to summary.json and
    exits 3."""
    cfg = tmp_path / "x.yaml"
    cfg.write_text("topology: {kind: leaf_spine, n_leaf: 1, n_spine: 1, hosts_per_leaf: 2}\n"
                   "background: {h1: 3, h2: 2}\n"
                   "jobs: [{name: j, model: small_cnn, workers: 3, collective: ring}]\n"
                   "policies: [elasticflow, consolidate]\niterations: 2\nwarmup_iterations: 0\n")
    cp = run_cli("-c", str(cfg), "--results", str(tmp_path / "res"), timeout=300)
    assert cp.returncode == 3, cp.stdout + cp.stderr
    assert "Traceback" not in cp.stdout + cp.stderr
    assert "elasticflow" in cp.stderr.strip().splitlines()[-1]
    (run_dir,) = list((tmp_path / "res").iterdir())
    import json
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [s["policy"] for s in summary["policies"]] == ["consolidate"]
    assert "elasticflow" in summary["unplaced"]
    assert leftovers() == []


TINY = two_rack_run(2, model="small_cnn")
"""A run that finishes, of the smallest model, with traffic over every switch."""

WITHOUT_RED = ("import runpy, sys\n"
               "from emulator import capabilities\n"
               "del capabilities.QDISC_TRIALS['red']\n"
               "sys.argv = sys.argv[1:]\n"
               "runpy.run_path(sys.argv[0], run_name='__main__')\n")
"""The CLI on a kernel without sch_red, whatever this one has: its qdisc probe never tries RED."""


def run_cli_without_red(*args, timeout=60):
    """Run the CLI as :func:`run_cli` does, on a kernel without sch_red (:data:`WITHOUT_RED`)."""
    return subprocess.run([sys.executable, "-c", WITHOUT_RED, CLI[1], *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.emulation
def test_cli_opens_on_the_placed_fabric_and_its_traffic_is_not_counted(emulation_ok, tmp_path):
    """``--cli``: once the policy has placed its job, Mininet's CLI runs on the live fabric (commands
    read from stdin here): pingall reaches every machine and a flood of pings crosses the fabric.
    Leaving it starts the job; the policy's bytes per link are its wave's, not the flood's."""
    cfg = tmp_path / "x.yaml"
    cfg.write_text(TINY)
    flood = 30 * 16000  # bytes each way: ping -c 30 -s 16000
    commands = "pingall\nsh echo cli-$((6*7))\nh1 ping -q -c 30 -i 0.01 -s 16000 h2\nexit\n"
    cp = run_cli("-c", str(cfg), "--results", str(tmp_path / "res"), "--cli", input=commands, timeout=300)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0, out
    assert "spread placed 1 job; none has started:" in out and "j: small_cnn, ring, 2 workers on h1, h2" in out
    assert "Results: 0% dropped (2/2 received)" in out and "cli-42" in out and "30 received" in out
    assert "left the CLI after" in out
    (run_dir,) = list((tmp_path / "res").iterdir())
    import json
    m = json.loads((run_dir / "spread" / "measurements.json").read_text())
    (wave,) = m["waves"]
    in_wave = {(u, v): b for u, v, b in wave["link_bytes"]}
    policy = {(u, v): b for u, v, b in m["link_bytes"]}
    assert in_wave and max(abs(b - in_wave.get(link, 0)) for link, b in policy.items()) < flood / 4, (policy, in_wave)
    assert leftovers() == []


@pytest.mark.emulation
def test_sigterm_while_the_cli_is_open_stops_the_run_and_leaves_nothing(emulation_ok, tmp_path):
    """Mininet's CLI turns Ctrl-C into the end of a command; SIGTERM still stops the run: exit code 130,
    nothing left behind, no job started."""
    cfg = tmp_path / "x.yaml"
    cfg.write_text(TINY)
    proc = subprocess.Popen([*CLI, "-c", str(cfg), "--results", str(tmp_path / "res"), "--cli"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = read_until(proc, "Mininet's CLI on the live fabric")
    proc.stdin.write("sh echo cli-$((6*7))\n")
    proc.stdin.flush()
    seen += read_until(proc, "cli-42")  # the CLI is reading commands
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + out
    assert "Traceback" not in out and "left the CLI" not in out
    assert glob.glob(str(tmp_path / "res" / "*" / "spread" / "jobs" / "j" / "j-rank*.jsonl")) == []
    assert leftovers() == []


@pytest.mark.emulation
def test_required_ecn_path_that_cannot_run_is_one_clear_error(emulation_ok, tmp_path):
    """Asking for kernel RED on a kernel without it (any kernel, its probe never trying RED) with marking
    required stops before any network is built, naming what is missing."""
    cfg = tmp_path / "x.yaml"
    cfg.write_text(TINY + "ecn: {method: red}\n")
    assert_clean_error(run_cli_without_red("-c", str(cfg), "--results", str(tmp_path / "res")),
                       "ECN marking (red) cannot run here: the kernel has no sch_red (RED qdisc)")
    assert leftovers() == []


@pytest.mark.emulation
def test_optional_ecn_that_cannot_run_says_not_measured(emulation_ok, tmp_path):
    """On a kernel without RED (as above) with marking optional, the run goes on and its results say ECN
    was not measured and why: no mark counts at all (never zeros), and the hosts keep their default ECN
    setting."""
    cfg = tmp_path / "x.yaml"
    cfg.write_text(TINY + "ecn: {method: red, marking: optional}\n")
    cp = run_cli_without_red("-c", str(cfg), "--results", str(tmp_path / "res"), timeout=300)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "ECN not measured" in cp.stdout
    (run_dir,) = list((tmp_path / "res").iterdir())
    import json
    summary = json.loads((run_dir / "summary.json").read_text())
    (s,) = summary["policies"]
    assert s["ecn_method"] == "none" and s["ecn_marks"] is None and s["ecn_marks_busiest_port"] is None
    assert summary["capabilities"]["ecn_why"] == "ECN not measured: the kernel has no sch_red (RED qdisc)"
    assert "red" not in summary["capabilities"]["qdiscs"] and summary["capabilities"]["qdiscs"]["htb"]
    measurements = json.loads((run_dir / "spread" / "measurements.json").read_text())
    assert all(w["window_link_marks"] is None and w["ecn"] is None for w in measurements["waves"])
    assert all(h["tcp_ecn"] != "1" for h in measurements["ecn"]["hosts"].values())
    assert leftovers() == []


@pytest.mark.parametrize("word, pattern", [
    ("lsit", "error: unknown command 'lsit' (did you mean 'list'?); valid: run, check, list, report, clean,"),
    ("reprodcue", "(did you mean 'reproduce'?)"),
    ("experiments/default.yaml", "error: unknown command 'experiments/default.yaml'; valid: run, check"),
])
def test_an_unknown_command_is_one_line_with_the_valid_ones(word, pattern):
    """A misspelt or missing command is an error naming the valid commands (and the closest one), not a run."""
    cp = run_cli(word, "-c", DEFAULT)
    assert_clean_error(cp, pattern)
    assert "options alone run 'run'" in cp.stderr


@pytest.mark.parametrize("args, pattern", [
    (["-c", DEFAULT, "--iterations", "0"], "config.iterations: 0 is out of range"),
    (["--backend", "sim", "-p", "nope"], "config.policies: unknown placement policy 'nope'"),
    (["-q", "--set", "iterations=-1"], "config.iterations: -1 is out of range"),
])
def test_options_alone_run_the_default_command(main_in_process, capsys, args, pattern):
    """A command line of options only is `run`: its options are taken and checked as run's."""
    assert main_in_process(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and pattern in err, err


def test_v_and_q_mean_more_and_less_output_and_vv_the_traceback(tmp_path):
    """-q: no progress lines; -v: each progress line stamped with the seconds since the start; an error is one
    line at every level but -vv, which adds its traceback."""
    import re

    common = ["--backend", "sim", "--set", "policies=[consolidate]", "--set", "iterations=2"]
    loud = run_cli(*common, "-v", "--results", str(tmp_path / "v"), timeout=120)
    assert loud.returncode == 0, loud.stderr
    assert re.search(r"^\[ *\d+\.\d s\] \[1/1\] policy consolidate", loud.stdout, re.M), loud.stdout
    quiet = run_cli(*common, "-q", "--results", str(tmp_path / "q"), timeout=120)
    assert quiet.returncode == 0 and "[1/1] policy consolidate" not in quiet.stdout, quiet.stdout
    for flags in ([], ["-v"], ["-q"]):
        assert_clean_error(run_cli("check", "/nonexistent/x.yaml", *flags), "/nonexistent/x.yaml")
    traced = run_cli("check", "/nonexistent/x.yaml", "-vv")
    assert traced.returncode == 2 and "Traceback (most recent call last)" in traced.stderr
    assert traced.stderr.strip().splitlines()[-1].startswith("error: ") and "/nonexistent/x.yaml" in traced.stderr
