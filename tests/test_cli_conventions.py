"""The command line's conventions: --version, -c and --set on every command that takes a config,
`list`, `run.log`, the hand-over of results written under sudo, the set-up's requirement check, and
the packaging (setup.py's packages and entry point, an executable run_testbed.py)."""

from __future__ import annotations

import importlib
import os
import sys

import pytest
from conftest import ROOT
from test_cli import DEFAULT, assert_clean_error, run_cli

from common.errors import ConfigError
from experiment.config import schema as config
from experiment.config.overrides import apply_settings


def test_version_and_help_show_exit_codes_and_run_flags():
    from common.version import VERSION

    cp = run_cli("--version")
    assert cp.returncode == 0 and cp.stdout.strip() == f"run_testbed.py {VERSION}", cp.stdout + cp.stderr
    top = run_cli("-h").stdout
    for text in ("exit codes:", "1 `clean` left a change recorded", "130 interrupted", "--set KEY=VALUE",
                 "-c, --config FILE", "list", "--backend {emu,sim}"):
        assert text in top, text


def test_check_takes_the_config_as_c_or_positional_with_settings():
    by_flag = run_cli("check", "-c", DEFAULT, "--set", "iterations=4", "--set", "topology.k=6")
    assert by_flag.returncode == 0 and "fat_tree with 54 machines" in by_flag.stdout, by_flag.stderr
    assert_clean_error(run_cli("check", DEFAULT, "--set", "topology.k=5"), "config.topology")
    assert_clean_error(run_cli("check", "-c", DEFAULT, DEFAULT + ".x"), "give the config once")


def test_settings_change_fields_and_are_checked_as_a_file_is():
    cfg = config.load(DEFAULT)
    out = apply_settings(cfg, ["topology.k=6", "jobs.0.workers=4", "policies=[consolidate, spread]",
                               "ecn.method=bpf", "background.h7=1"])
    assert out.topology.params["k"] == 6 and out.jobs[0].workers == 4 and out.ecn.method == "bpf"
    assert out.policies == ("consolidate", "spread") and out.background["h7"] == 1
    assert out.jobs[1:] == cfg.jobs[1:] and out.scale == cfg.scale
    for bad, message in [("iterations=-1", "config.iterations: -1 is out of range"),
                         ("ecn.methd=bpf", "did you mean 'method'"),
                         ("jobs.9.workers=1", "'9' is not an index of a list of 5"),
                         ("iterations.x=1", "'x' is below a value"),
                         ("iterations", "expected KEY=VALUE"),
                         ("iterations=[1", "is not a YAML value")]:
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
            apply_settings(cfg, [bad])


def test_a_link_delay_is_refused_not_ignored():
    """Neither back end gives links a propagation delay: a topology asking for one is one clear error."""
    cfg = apply_settings(config.load(DEFAULT), ["topology.delay_us=5"])
    with pytest.raises(ConfigError, match="link propagation delay is neither emulated nor simulated"):
        config.validate(cfg, backend="sim")


def test_list_names_every_registered_entry():
    from experiment.config.catalogue import render
    from jobs.collective import JOB_COLLECTIVES
    from jobs.models import MODELS
    from placement import POLICIES
    from scheduling import SCHEDULERS
    from topo import TOPOLOGIES

    text = render()
    for name in [*POLICIES, *SCHEDULERS, *MODELS, *JOB_COLLECTIVES, *TOPOLOGIES, "emu", "sim"]:
        assert f"\n  {name} " in text, name
    assert "variant='r'" in text  # a policy's keywords with their defaults
    only = render("schedulers")
    assert "tiresias" in only and "consolidate" not in only
    cp = run_cli("list", "models")
    assert cp.returncode == 0 and "vgg16" in cp.stdout and "resnet50" in cp.stdout
    assert_clean_error(run_cli("list", "nope"), "list 'nope': not one of")


def test_run_log_keeps_what_the_run_printed(tmp_path):
    """A quiet simulator run prints the report but no progress lines; run.log holds both."""
    cp = run_cli("--backend", "sim", "-q", "--set", "policies=[consolidate]", "--set", "iterations=2",
                 "--results", str(tmp_path), timeout=120)
    assert cp.returncode == 0, cp.stderr
    (run_dir,) = tmp_path.iterdir()
    log = (run_dir / "run.log").read_text()
    assert "[1/1] policy consolidate" not in cp.stdout and "[1/1] policy consolidate" in log
    assert log.startswith(f"run {run_dir}") and cp.stdout.strip() in log


@pytest.mark.skipif(os.geteuid() != 0, reason="handing files to another user needs root")
def test_results_written_under_sudo_go_to_the_invoking_user(tmp_path, monkeypatch):
    from experiment.reporting.results import handed_to_invoker

    base = tmp_path / "results"
    base.mkdir()
    (base / "old").mkdir()
    monkeypatch.setenv("SUDO_UID", "12345")
    monkeypatch.setenv("SUDO_GID", "12346")
    with pytest.raises(RuntimeError), handed_to_invoker(str(base)):
        (base / "run" / "p").mkdir(parents=True)
        (base / "run" / "p" / "x.json").write_text("{}")
        os.symlink("/etc/passwd", base / "run" / "link")
        raise RuntimeError("the run failed: what it wrote is handed over all the same")
    for path in (base / "run", base / "run" / "p", base / "run" / "p" / "x.json"):
        assert (path.stat().st_uid, path.stat().st_gid) == (12345, 12346), path
    assert (base / "run" / "link").lstat().st_uid == 12345 and os.stat("/etc/passwd").st_uid == 0
    assert (base / "old").stat().st_uid == 0 and base.stat().st_uid == 0
    with handed_to_invoker(str(tmp_path / "new" / "deeper")):
        (tmp_path / "new" / "deeper" / "run").mkdir(parents=True)
    assert (tmp_path / "new").stat().st_uid == 12345 and tmp_path.stat().st_uid == 0


def test_requirement_check_names_what_is_missing_or_wrong(tmp_path):
    import subprocess

    reqs = tmp_path / "requirements.txt"
    reqs.write_text("# pins\nnetworkx==0.0.1  # wrong version\nno-such-package-xyz==1.0\n")
    cp = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check_requirements.py"), str(reqs)],
                        capture_output=True, text=True)
    assert cp.returncode == 1
    assert "networkx==0.0.1: " in cp.stderr and "no-such-package-xyz==1.0: not installed" in cp.stderr
    ok = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check_requirements.py"),
                         os.path.join(ROOT, "requirements.txt")], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr


def test_a_quiet_sweep_prints_its_table_but_no_progress(tmp_path):
    cp = run_cli("sweep", "-q", "--vary", "iterations=1,2", "--set", "policies=[consolidate, spread]",
                 "--results", str(tmp_path), timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert "[1/2]" not in cp.stdout and "written:" in cp.stdout and "consolidate" in cp.stdout
    (sweep_dir,) = tmp_path.iterdir()
    log = (sweep_dir / "iterations=2" / "seed-1" / "run.log").read_text()
    assert log.count("[1/2] policy consolidate") == 1 and log.count("Per policy") == 1, log


def _setup_call() -> dict:
    """The keyword arguments setup.py passes to setup(), as written (literals only)."""
    import ast

    with open(os.path.join(ROOT, "setup.py")) as f:
        tree = ast.parse(f.read())
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "setup"]
    return {k.arg: k.value for k in call.keywords}


def test_setup_packages_cover_every_top_level_package(monkeypatch):
    """setup.py installs every top-level package of the repository (a directory with an __init__.py), so an
    installed copy runs every command; its console entry point names a function of run_testbed."""
    import ast

    from setuptools import find_packages

    kw = _setup_call()
    include = ast.literal_eval(kw["packages"].keywords[0].value)
    installed = {p for p in find_packages(ROOT, include=include) if "." not in p}
    top = {d for d in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, d, "__init__.py"))}
    assert top - installed == set(), "setup.py leaves these packages out"
    assert ast.literal_eval(kw["py_modules"]) == ["run_testbed"]
    (script,) = ast.literal_eval(kw["entry_points"])["console_scripts"]
    module, func = script.split("=")[1].strip().split(":")
    monkeypatch.setenv("TESTBED_NO_VENV_REEXEC", "1")  # imported here, not re-run in .venv
    run_testbed = importlib.import_module(module)
    assert callable(getattr(run_testbed, func))


def test_run_testbed_is_an_executable_python3_script():
    """`./run_testbed.py` runs as typed: executable (in git too), with a python3 shebang (stock Debian and
    Ubuntu have no `python`)."""
    import subprocess

    path = os.path.join(ROOT, "run_testbed.py")
    with open(path) as f:
        assert f.readline() == "#!/usr/bin/env python3\n"
    assert os.access(path, os.X_OK)
    mode = subprocess.run(["git", "ls-files", "-s", "run_testbed.py"], cwd=ROOT, capture_output=True, text=True)
    if mode.returncode == 0 and mode.stdout:  # a git checkout (an unpacked archive has no index)
        assert mode.stdout.startswith("100755 "), mode.stdout


def _commands(monkeypatch) -> dict:
    """run_testbed's parser for each command, by name."""
    import argparse

    monkeypatch.setenv("TESTBED_NO_VENV_REEXEC", "1")
    run_testbed = importlib.import_module("run_testbed")
    (sub,) = [a for a in run_testbed._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == set(run_testbed.COMMANDS)
    return sub.choices


def test_every_command_has_a_description_and_examples(monkeypatch):
    """`run_testbed.py COMMAND -h` says what the command does and shows it used, as typed on a stock system."""
    for name, parser in _commands(monkeypatch).items():
        text = parser.format_help()
        assert parser.description and len(parser.description) > 60, name
        examples = text.split("examples:\n", 1)[1].splitlines()
        assert examples and all(" run_testbed.py " in e and e.lstrip().split()[0] in ("python3", "sudo")
                                for e in examples), (name, examples)
        assert any(f"run_testbed.py {name} " in e + " " for e in examples), (name, examples)
    cp = run_cli("sweep", "-h")
    assert cp.returncode == 0 and "examples:\n  python3 run_testbed.py sweep -c" in cp.stdout


def test_an_option_has_one_metavar_in_every_command_and_the_main_help(monkeypatch):
    """An option named by several commands shows the same value name in each (and in the main help's
    summary of run's options): -p is SPEC everywhere, -c FILE, --results DIR, --workers N."""
    shown: dict[str, set] = {}
    for parser in _commands(monkeypatch).values():
        for action in parser._actions:
            if action.option_strings and action.nargs != 0:
                for opt in action.option_strings:
                    shown.setdefault(opt, set()).add(action.metavar)
    assert {k: v for k, v in shown.items() if len(v) > 1} == {}
    assert shown["-p"] == shown["--reference"] == {"SPEC"} and shown["-c"] == {"FILE"}
    assert shown["--results"] == {"DIR"} and shown["--workers"] == {"N"}
    top = run_cli("-h").stdout
    assert "-p, --policy SPEC" in top and "-c, --config FILE" in top


def test_makefile_targets_exist_and_unit_and_lint_need_only_the_venv():
    """Every .PHONY target has a rule; with the venv there, `make unit` and `make lint` do not run the set-up
    (which needs root); without it they run it first."""
    import subprocess

    def dry(*args):
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # under make
        cp = subprocess.run(["make", "-n", "-s", "--no-print-directory", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        return cp.stdout

    with open(os.path.join(ROOT, "Makefile")) as f:
        (phony,) = [line.split(":", 1)[1].split() for line in f if line.startswith(".PHONY:")]
    for target in phony:
        dry(target, f"PY={sys.executable}")
    for target, command in [("unit", "-m pytest -q -n auto -m \"not emulation\" tests"), ("lint", "-m ruff check .")]:
        assert dry(target, f"PY={sys.executable}").splitlines() == [f"{sys.executable} {command}"]
        assert "scripts/setup.sh" in dry(target, "PY=/nonexistent/bin/python")
