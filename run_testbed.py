#!/usr/bin/env python3
"""Run a placement experiment on the emulated cluster, or on the flow-level simulator.

    sudo python3 run_testbed.py                          # default experiment, every policy
    sudo python3 run_testbed.py -c experiments/x.yaml -p consolidate -p spread
    sudo python3 run_testbed.py --set topology.k=6 --set iterations=5   # config fields changed for this run
    python3 run_testbed.py --backend sim                 # the same experiment on the simulator, no root
    python3 run_testbed.py check -c experiments/x.yaml   # validate a config, no root needed
    python3 run_testbed.py list [policies|schedulers|models|collectives|topologies|back]  # what a config can name
    python3 run_testbed.py --backend sim -c experiments/trace.yaml   # a cluster trace on the simulator
    python3 run_testbed.py validate RUN_DIR --estimates my_sim.csv   # your simulator against a run
    python3 run_testbed.py validate RUN_DIR --simulator latency_us=60,token_buckets=true
                                                        # the run re-simulated with other options, against it
    python3 run_testbed.py report RUN_DIR                # a saved run's tables and plots rendered again from its files
    python3 run_testbed.py calibrate RUN_DIR             # the simulator's latency and ECN mark share, fitted to a run
    python3 run_testbed.py sweep -c experiments/x.yaml --vary topology.oversubscription=1,2,4,8,20 --seeds 1-10
                                                        # one parameter x seeds on the simulator, no root
                                                        # (--backend emu: on the emulator, as root)
    python3 run_testbed.py reproduce titan-fig1          # a paper's headline result, ours beside the paper's
    python3 run_testbed.py reproduce --list              # every reproduction, its figure and run time
    sudo python3 run_testbed.py clean                    # undo what a killed run recorded changing

Exit codes: 0 done; 1 ``clean`` could not undo a recorded change (it stays recorded), or an internal
error (a bug: please report its traceback); 2 an error the user can mend (a bad config, option or
file; one line on stderr); 3 some policy could not place every job (the others are reported);
130 interrupted (Ctrl-C, SIGTERM; the run is cleaned up and its finished policies are written).
A run under ``sudo`` hands the results it writes to the user who ran ``sudo``; every run keeps what
it printed in ``run.log`` in its directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import signal
import sys
import textwrap
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
VENV_PYTHON = os.path.join(HERE, ".venv", "bin", "python")
if (os.path.exists(VENV_PYTHON) and os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(HERE, ".venv"))
        and not os.environ.get("TESTBED_NO_VENV_REEXEC")):
    # `sudo python3 run_testbed.py` with the system Python: run in the project's venv (made by setup).
    os.environ["TESTBED_NO_VENV_REEXEC"] = "1"
    os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__), *sys.argv[1:]])
if HERE not in sys.path:
    sys.path.insert(0, HERE)
SETUP_COMMAND = "sudo make setup"


def _not_set_up(e: ModuleNotFoundError) -> str | None:
    """The one-line answer to a module missing from this Python because the set-up has not run or did not
    finish (no .venv, or one without the pinned packages); None when the module is one of the project's
    own (a bug, reported with its traceback)."""
    top = (e.name or "").split(".")[0]
    if not top or os.path.isfile(os.path.join(HERE, top, "__init__.py")):
        return None
    return (f"error: Python module {top!r} is missing from {sys.prefix}: the set-up has not run or did not "
            f"finish; run it: {SETUP_COMMAND} (in {HERE})")


try:
    from common.errors import ConfigError, TestbedError
    from experiment import BACKENDS
    from experiment.reporting import results
except ModuleNotFoundError as _e:
    _line = _not_set_up(_e)
    if _line is None:
        raise
    print(_line, file=sys.stderr)
    sys.exit(2)

DEFAULT_CONFIG = os.path.join(HERE, "experiments", "default.yaml")


def _interrupt(signum, frame):
    """The first SIGINT or SIGTERM stops the run; any further one only says cleanup is under way,
    so it cannot cut the undoing of the run's changes short (emulator.journal shields each step)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _again)
    raise KeyboardInterrupt


def _again(signum, frame):
    print("interrupted again: still stopping the run and undoing its changes", file=sys.stderr, flush=True)


def cmd_run(args) -> int:
    """Run an experiment; the command-line overrides are validated with the rest of the config
    (run_experiment validates before it needs root or builds anything)."""
    from experiment import backend_class, make_backend
    from experiment.config import schema as config
    from experiment.config.overrides import apply_settings
    from experiment.run.driver import run_experiment

    chosen = backend_class(args.backend)
    if args.cli and not chosen.opens_cli:
        raise ConfigError(f"--cli opens Mininet's CLI on an emulated fabric; the {chosen.what} has none (use "
                          f"--backend emu)")
    cfg = apply_settings(config.load(args.config), args.set)
    changes = {}
    if args.iterations is not None:
        changes["iterations"] = args.iterations
    if args.results is not None:
        changes["results_dir"] = args.results
    if args.policy:
        changes["policies"] = tuple(args.policy)
    if args.container is not None:
        changes["container"] = dataclasses.replace(cfg.container, engine=args.container)
    cfg = dataclasses.replace(cfg, **changes)
    with results.handed_to_invoker(cfg.results_dir):
        run_experiment(cfg, make_backend(args.backend, **({"cli": True} if args.cli else {})), say=_say(args))
    return 0


def cmd_check(args) -> int:
    """Validate a config without root: everything a run would reject for the config alone."""
    from experiment import backend_class
    from experiment.config import schema as config
    from experiment.config.overrides import apply_settings

    cfg = apply_settings(config.load(args.config), args.set)
    g = config.validate(cfg, backend=args.backend)
    n_m = sum(1 for _, d in g.nodes(data=True) if d["role"] == "machine")
    gpus = sum(d["gpus"] for _, d in g.nodes(data=True) if d["role"] == "machine")
    if cfg.trace.file:
        from common.paths import shown
        from experiment.config.workload import experiment_jobs

        jobs = f"{len(experiment_jobs(cfg, g))} jobs of trace {shown(cfg.trace.file)}"
    else:
        jobs = f"{len(cfg.jobs)} jobs"
    head = f"{args.config}: ok: {cfg.topology.kind} with {n_m} machines / {gpus} GPUs, {jobs}, " \
           f"policies {', '.join(config.policy_specs(cfg))}"
    print(f"{head}; {backend_class(args.backend).checks.describe(cfg, g)}")
    return 0


def cmd_clean(args) -> int:
    """Undo what runs that died (kill -9, a crash) recorded changing on this machine, and nothing else."""
    from emulator import capabilities, journal

    capabilities.require_root()
    paths = journal.records()
    if not paths:
        print("clean: nothing to undo (no run left changes on this machine)")
        return 0
    failures = journal.clean()
    if failures:
        print(f"error: {len(failures)} change(s) could not be undone (first: {failures[0]}); they stay recorded "
              f"in {journal.RECORDS_DIR}", file=sys.stderr)
        return 1
    return 0


def cmd_validate(args) -> int:
    """Compare anyone's per-job estimates (a CSV), or the run re-simulated with other simulator options,
    with a run's measurements; no root needed."""
    from common.jsonfile import write_json_atomic
    from common.specs import safe_name
    from experiment.reporting.validation import marks_to_dict, marks_validation_lines
    from experiment.validate.estimates import compare_estimates, read_estimates, report_lines, write_estimates_report
    from experiment.validate.revalidate import options_name, parse_simulator_options, read_recorded_run

    if (args.estimates is None) == (args.simulator is None):
        print("error: give one of --estimates FILE.csv or --simulator KEY=VALUE,...", file=sys.stderr)
        return 2
    name, marks = None, []
    if args.estimates is not None:
        estimates = read_estimates(args.estimates)
    else:
        options = parse_simulator_options(args.simulator)
        run = read_recorded_run(args.run_dir)
        simulated = run.simulate(options)
        text, estimates = run.estimates(options, simulated)
        marks = run.mark_comparisons(simulated)
        name = safe_name("sim-" + options_name(options))
        csv_path = os.path.join(args.run_dir, f"estimates-{name}.csv")
        with open(csv_path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"re-simulated with simulator {options_name(options)}: {csv_path}")
    report = compare_estimates(args.run_dir, estimates)
    print("\n".join(report_lines(report) + marks_validation_lines(marks)))
    written = write_estimates_report(report, args.run_dir, name)
    if marks:
        written.append(os.path.join(args.run_dir, f"validation-{name}-ecn.json"))
        write_json_atomic(written[-1], marks_to_dict(marks), indent=1)
    if written:
        print(f"written: {', '.join(written)}")
    return 0


def cmd_calibrate(args) -> int:
    """Fit the simulator's per-message latency to a run's uncontended jobs, TCP's share of a shared link
    and the ECN mark share to its contended ones, whichever the run has; no root needed."""
    from common.jsonfile import write_json_atomic
    from experiment.validate.revalidate import (
        CALIBRATED_CLASS,
        MARKS_CLASS,
        SHARED_CLASS,
        NothingToFit,
        calibrate_latency,
        calibrate_mark_share,
        calibrate_tcp_efficiency,
        read_recorded_run,
    )

    run = read_recorded_run(args.run_dir)
    print(f"fitting simulator.latency_us to the {CALIBRATED_CLASS} jobs of {args.run_dir} (the step-level simulator "
          f"re-run on the recorded schedule, about 20 times)...", flush=True)
    fitted: dict = {}
    try:
        c = calibrate_latency(run)
    except NothingToFit as e:
        c = None
        print(f"latency_us: not fitted ({e})")
    if c is not None:
        fitted["latency_us"] = c.latency_us
        print(f"latency_us: {c.latency_us:g} (paper-scale µs per message at dilation {run.cfg.dilation:g}; "
              f"{c.wall_us:g} µs of wall time)")
        print(f"  {CALIBRATED_CLASS:<13} configured ({run.cfg.simulator.latency_us:g} µs): {c.before.line()}")
        print(f"  {CALIBRATED_CLASS:<13} fitted: {c.after.line()}")
        for cls, after in c.by_class_after.items():
            if cls != CALIBRATED_CLASS:
                before = c.by_class_before.get(cls)
                print(f"  {cls:<13} {before.line() if before else '-'} -> {after.line()}")
    print(f"fitting simulator.tcp_efficiency to the {SHARED_CLASS} jobs...", flush=True)
    eff = calibrate_tcp_efficiency(run, {"latency_us": c.latency_us} if c else None)
    if eff is None:
        print(f"tcp_efficiency: not fitted (no {SHARED_CLASS} job was measured, or none saturated a link with "
              f"another flow in the simulator)")
    else:
        fitted.update(sharing="tcp", tcp_efficiency=eff.efficiency)
        print(f"tcp_efficiency: {eff.efficiency:g} (the share of its rate a link saturated by two TCP flows or more "
              f"carries; configured {run.cfg.simulator.sharing} {run.cfg.simulator.tcp_efficiency:g})")
        print(f"  {SHARED_CLASS:<13} configured: {eff.before.line()}")
        print(f"  {SHARED_CLASS:<13} fitted:     {eff.after.line()}")
    share = calibrate_mark_share(run)
    if share is None:
        print(f"ecn_mark_share: not fitted (no {MARKS_CLASS} job of the run was marked)")
    else:
        fitted.update(ecn=True, ecn_mark_share=share.share)
        print(f"ecn_mark_share: {share.share:g} (fitted on {share.jobs} marked {MARKS_CLASS} jobs; configured "
              f"{run.cfg.simulator.ecn_mark_share:g})")
        for cls, after in share.by_class_after.items():
            print(f"  {cls:<13} configured: {share.by_class_before[cls].line()}\n  {'':<13} fitted:     {after.line()}")
    if not fitted:
        print(f"error: {args.run_dir}: nothing to fit: no {CALIBRATED_CLASS} job and no {SHARED_CLASS} job",
              file=sys.stderr)
        return 2
    path = os.path.join(args.run_dir, "calibration.json")
    write_json_atomic(path, {"simulator": fitted, "latency": c.to_dict() if c else None,
                             "sharing": eff.to_dict() if eff else None,
                             "ecn": share.to_dict() if share else None}, indent=1)
    print(f"written: {path}")
    options = ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in fitted.items())
    print(f"use it: simulator: {{{options}}} in a config run at dilation {run.cfg.dilation:g}"
          + (f" (the latency at dilation D: {c.wall_us:g} / D)" if c else ""))
    return 0


def cmd_sweep(args) -> int:
    """Sweep one config field over values and seeds on the simulator (no root). Every point is
    validated before anything runs; the run directory is printed at the end."""
    from experiment.config import schema as config
    from experiment.config.overrides import apply_settings
    from experiment.run.sweep import run_sweep
    from experiment.run.sweep_spec import parse_seeds, parse_vary

    cfg = apply_settings(config.load(args.config), args.set)
    if args.results is not None:
        cfg = dataclasses.replace(cfg, results_dir=args.results)
    vary = parse_vary(args.vary)
    seeds = parse_seeds(args.seeds) if args.seeds is not None else (cfg.seed,)
    say = _say(args)
    try:
        with results.handed_to_invoker(cfg.results_dir):
            result = run_sweep(cfg, vary, seeds, policies=args.policy, reference=args.reference,
                               workers=args.workers, backend=args.backend, say=say, on=args.executor,
                               address=args.dask_scheduler, say_table=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print("interrupted: the sweep and its worker processes were stopped; the runs done so far are written",
              file=sys.stderr)
        return 130
    print(result.run_dir)
    return 0


def cmd_report(args) -> int:
    """A saved run's tables and plots rendered again from its files (``summary.json``, the timelines,
    the CSVs); ``report.txt`` is written where it is missing. No root."""
    from experiment.reporting.rerender import load_run, redraw, render

    saved = load_run(args.run_dir)
    text = render(saved)
    print(text)
    path = os.path.join(args.run_dir, "report.txt")
    try:
        with results.handed_to_invoker(args.run_dir):
            if not os.path.exists(path):
                with open(path, "w") as f:
                    f.write(text + "\n")
            plots = redraw(saved)
    except OSError as e:
        raise ConfigError(f"{args.run_dir}: cannot write its plots: {e}") from None
    print(f"\nplots: {', '.join(os.path.basename(p) for p in plots) if plots else 'none (nothing to draw)'}")
    return 0


def cmd_reproduce(args) -> int:
    """Run reproductions of the papers' headline results (or list them); ours beside the paper's."""
    from reproduce import REPRODUCTIONS
    from reproduce.run import catalogue_lines, run_reproduction, summary_lines, summary_rows, write_summary

    if args.list or not args.names:
        print("\n".join(catalogue_lines()))
        return 0
    every = args.names == ["all"]
    names = list(REPRODUCTIONS) if every else args.names
    for name in names:
        if name not in REPRODUCTIONS:
            raise ConfigError(f"reproduce: no reproduction {name!r}; valid: {', '.join(REPRODUCTIONS)}, all")
    say = _say(args)
    with results.handed_to_invoker(args.results):
        dirs = []
        for name in names:
            # all: each on --backend where it offers it, else on its own (a named one is refused instead)
            backend = None if every and args.backend not in REPRODUCTIONS[name].backends else args.backend
            dirs.append(run_reproduction(name, args.results, backend=backend, workers=args.workers, say=say,
                                         say_table=lambda line: print(line, flush=True)))
        if len(dirs) > 1:
            rows = summary_rows(dirs)
            lines = summary_lines(rows)
            print("\n" + "\n".join(lines) + f"\nwritten: {write_summary(args.results, rows, lines)}/summary.txt, "
                  "summary.csv", flush=True)
    return 0


def cmd_list(args) -> int:
    """What a config can name: topologies, models, collectives, policies, schedulers, back ends."""
    from experiment.config.catalogue import matches, render, sections

    titles = [sec.title for sec in sections()]
    if not any(matches(t, args.what) for t in titles):
        raise ConfigError(f"list {args.what!r}: not one of {', '.join(titles)}")
    print(render(args.what), end="")
    return 0


def _verbosity(args) -> int:
    """How much the terminal gets: 0 by default, less with each ``-q``, more with each ``-v``."""
    return getattr(args, "verbose", 0) - getattr(args, "quiet", 0)


def _say(args):
    """The progress line printer: nothing with ``-q`` (``run.log`` keeps the lines), the lines by default,
    each stamped with the seconds since the command started with ``-v``."""
    level = _verbosity(args)
    if level < 0:
        return lambda msg: None
    if level == 0:
        return lambda msg: print(msg, flush=True)
    start = time.monotonic()
    return lambda msg: print(f"[{time.monotonic() - start:7.1f} s] {msg}", flush=True)


def _version() -> str:
    from common.version import VERSION

    return f"%(prog)s {VERSION}"


class _ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit code 2, like every other error a user can cause."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} -h)\n")


def _one_line(e: Exception) -> str:
    """An error's message on one line (a path or a lower layer's text may hold line breaks)."""
    return " | ".join(line for line in str(e).splitlines() if line.strip())


COMMANDS = ("run", "check", "list", "report", "clean", "validate", "calibrate", "sweep", "reproduce")
TRACEBACK_VERBOSITY = 2  # -vv: an error the user can mend is shown with its traceback

EPILOG = f"""\
run (the default command) takes:
  -c, --config FILE     experiment YAML (default: experiments/default.yaml)
  -p, --policy SPEC     a policy to run instead of the config's list (repeatable)
  --backend {{{','.join(BACKENDS)}}}   emu: the emulated network (root; the default); sim: the simulator
  --set KEY=VALUE       change a config field for this run (repeatable), checked as the file is
  -q, --quiet           less output: no progress lines (run.log keeps them)
  -v, --verbose         more output: progress lines with the time since the start; -vv: an error's
                        traceback too
  see: python3 run_testbed.py COMMAND -h (each command's options, what it does, examples)

examples:
  sudo python3 run_testbed.py                                  # the default experiment, every policy
  python3 run_testbed.py --backend sim -c experiments/trace.yaml
  python3 run_testbed.py check -c experiments/x.yaml --set topology.k=6
  python3 run_testbed.py list policies
  python3 run_testbed.py reproduce netpack-fig12               # a paper's figure: ours beside the paper's

exit codes: 0 done; 1 `clean` left a change recorded, or an internal error (a bug); 2 an error you
can mend (one line on stderr); 3 a policy could not place every job; 130 interrupted (cleaned up).
"""


ABOUT = {
    # command: (its line in the main help, what it does, examples)
    "run": ("run an experiment (the default command)",
            "Run an experiment: build the config's fabric, place its jobs with each policy, run their traffic and "
            "report per policy and per job. The emulated network (the default back end) needs root; --backend sim "
            "runs the same config on the simulator, no root. The command that runs when only options are given.",
            ["sudo python3 run_testbed.py run -c experiments/validation.yaml -p consolidate -p spread",
             "python3 run_testbed.py --backend sim --set iterations=5      # run is the default command",
             "sudo python3 run_testbed.py -p consolidate --set iterations=3 --cli   # look at the live fabric"]),
    "check": ("validate a config without running it (no root needed)",
              "Validate a config and its --set changes without running anything or needing root: what a run "
              "would refuse for the config alone is one line on stderr, exit code 2; a config that passes is "
              "summarised with what the back end adds (for the emulator: the dilation and the least wall time).",
              ["python3 run_testbed.py check experiments/default.yaml",
               "python3 run_testbed.py check -c my.yaml --set topology.k=6 --backend sim"]),
    "list": (("what a config can name: topologies, models, collectives, policies and schedulers with their keywords, "
              "back ends"),
             "What a config can name, read from the registries: topologies, models, collectives, placement "
             "policies and schedulers with their keywords and defaults, back ends. WHAT prints one section.",
             ["python3 run_testbed.py list", "python3 run_testbed.py list policies"]),
    "report": (("a saved run's tables and plots rendered again from its files (summary.json, timelines, CSVs), "
                "with its JCT distribution and link utilisation plots (no root needed)"),
               "Render a saved run's tables and plots again from its files (summary.json, the timelines, the "
               "CSVs); report.txt is written where it is missing. No root.",
               ["python3 run_testbed.py report results/RUN_DIR"]),
    "clean": ("undo the recorded changes of runs that were killed (nothing else)",
              "Undo what runs that died (kill -9, a crash) recorded changing on this machine, and nothing else. "
              "Needs root.",
              ["sudo python3 run_testbed.py clean"]),
    "validate": ("compare your simulator's per-job estimates (CSV) with a run's measurements (no root needed)",
                 "Compare per-job estimates with a run's measurements: your simulator's (a CSV), or this "
                 "testbed's simulator re-run on the run's schedule with other options. No root.",
                 ["python3 run_testbed.py validate results/RUN_DIR --estimates my_sim.csv",
                  "python3 run_testbed.py validate results/RUN_DIR --simulator latency_us=60,token_buckets=true"]),
    "calibrate": (("fit the simulator's per-message latency to a run's uncontended jobs, and TCP's share of a "
                   "shared link and the ECN mark share to its contended jobs (no root needed)"),
                  "Fit the simulator's per-message latency to a run's uncontended jobs, TCP's share of a shared "
                  "link and the ECN mark share to its contended ones, whichever the run has; writes "
                  "calibration.json in the run's directory. No root.",
                  ["python3 run_testbed.py calibrate results/RUN_DIR"]),
    "sweep": (("vary one config field over values and seeds and compare the policies' normalised JCT (on the "
               "simulator, no root; or --backend emu)"),
              "Vary one config field over values and seeds and compare the policies' JCT, normalised to a "
              "reference policy; every point is checked before anything runs. On the simulator (no root), or "
              "point after point on the emulator with --backend emu (root).",
              ["python3 run_testbed.py sweep -c experiments/netpack_sim.yaml --vary topology.oversubscription=1,5,20 "
               "--seeds 1-10 --workers 2",
               "sudo python3 run_testbed.py sweep --backend emu --vary iterations=2,5 -p consolidate -p spread"]),
    "reproduce": (("run a paper's headline result and print ours beside the paper's numbers, with the ratio and a plot "
                   "(--list: every reproduction)"),
                  "Run a paper's headline result and print ours beside the paper's numbers, with the ratio and a "
                  "plot; without a NAME (or with --list), the reproductions, what each compares and its run time.",
                  ["python3 run_testbed.py reproduce --list", "python3 run_testbed.py reproduce titan-fig1",
                   "sudo python3 run_testbed.py reproduce titan-fig1 --backend emu"]),
}


def _command(sub, name: str, parents: list) -> argparse.ArgumentParser:
    """A subcommand's parser (:data:`ABOUT`): its line in the main help, and its own help's description and
    examples."""
    help, about, examples = ABOUT[name]
    return sub.add_parser(name, parents=parents, help=help, description=textwrap.fill(about, 78),
                          epilog="examples:\n" + "\n".join(f"  {e}" for e in examples),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _unknown_command(word: str) -> str:
    """The one-line error for a first word that is neither a command nor an option."""
    close = difflib.get_close_matches(word, COMMANDS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (f"error: unknown command {word!r}{hint}; valid: {', '.join(COMMANDS)}; options alone run "
            f"'run' (see run_testbed.py -h)")


def _parser() -> argparse.ArgumentParser:
    ap = _ArgumentParser(prog="run_testbed.py", description=__doc__.splitlines()[0], epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=_version())
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="count", default=0,
                        help="less output: no progress lines (run.log keeps them)")
    common.add_argument("-v", "--verbose", action="count", default=0,
                        help="more output: progress lines stamped with the seconds since the start; -vv: an "
                             "error's traceback too")
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("-c", "--config", metavar="FILE", help=f"experiment YAML (default: {DEFAULT_CONFIG})")
    config.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="change a config field (dotted path, e.g. topology.k=6, jobs.0.workers=4, "
                             "policies=[consolidate,spread]); repeatable; checked as the file is")
    from experiment import backend_classes

    backend_help = "; ".join(f"{name}: {cls.help}" for name, cls in backend_classes().items())
    sub = ap.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    run = _command(sub, "run", [common, config])
    run.add_argument("-p", "--policy", action="append", metavar="SPEC",
                     help="policy spec to run instead of the config's list (repeatable, e.g. -p consolidate "
                          "-p random)")
    run.add_argument("--backend", choices=tuple(BACKENDS), default="emu", help=f"{backend_help}; default: %(default)s")
    run.add_argument("--iterations", type=int, metavar="N", help="override the config's iterations")
    run.add_argument("--container", choices=("none", "docker"),
                     help="override the config's container.engine: workers as processes, or in Docker containers "
                          "of the locally built worker image (needs `make setup DOCKER=1`)")
    run.add_argument("--results", metavar="DIR", help="results base directory (default: the config's results_dir)")
    run.add_argument("--cli", action="store_true",
                     help="once each policy has placed its first jobs, before they start, open Mininet's CLI on the "
                          "live fabric (pingall, dump, 'h1 ping h2', xterm); the run goes on when you leave it "
                          "(exit or Ctrl-D), that time and its traffic not counted (emulated network only)")
    check = _command(sub, "check", [common, config])
    check.add_argument("config_file", nargs="?", metavar="FILE", help="the config (or -c FILE)")
    check.add_argument("--backend", choices=tuple(BACKENDS), default="emu",
                       help="validate for this back end (as run --backend); default: %(default)s")
    lst = _command(sub, "list", [common])
    lst.add_argument("what", nargs="?", help="one section: topologies, models, collectives, policies, schedulers, "
                                             "back")
    report = _command(sub, "report", [common])
    report.add_argument("run_dir", help="a run's results directory (results/<timestamp>-<name>)")
    _command(sub, "clean", [common])
    validate = _command(sub, "validate", [common])
    validate.add_argument("run_dir", help="a run's results directory (results/<timestamp>-<name>)")
    validate.add_argument("--estimates", help="CSV: job, comm_s and/or iteration_s[, policy]")
    validate.add_argument("--simulator", metavar="KEY=VALUE,...",
                          help="instead: re-simulate the run's schedule with its config's simulator section changed "
                               "so (e.g. latency_us=60,token_buckets=true) and compare that")
    calibrate = _command(sub, "calibrate", [common])
    calibrate.add_argument("run_dir", help="an emulated run's results directory (results/<timestamp>-<name>)")
    sweep = _command(sub, "sweep", [common, config])
    sweep.add_argument("--vary", required=True, metavar="PATH=V1,V2,...",
                       help="the config field (a dotted path, e.g. topology.oversubscription) and its values")
    sweep.add_argument("--seeds", help="seeds each value runs with, e.g. 1-10 or 1,2,5 (default: the config's seed)")
    sweep.add_argument("-p", "--policy", action="append", metavar="SPEC",
                       help="policy spec to run instead of the config's list (repeatable)")
    sweep.add_argument("--reference", metavar="SPEC",
                       help="the policy spec JCTs are normalised to (default: the first netpack policy, else the "
                            "first)")
    sweep.add_argument("--workers", type=int, default=1, metavar="N",
                       help="runs at once: a local process pool, or a local Dask cluster's processes (default: "
                            "%(default)s)")
    sweep.add_argument("--executor", default="local", choices=("local", "dask"),
                       help="where the runs go: this machine, or a Dask cluster (default: %(default)s)")
    sweep.add_argument("--dask-scheduler", metavar="ADDRESS",
                       help="with --executor dask: the scheduler of a running cluster (default: a local cluster)")
    sweep.add_argument("--backend", choices=tuple(BACKENDS), default="sim",
                       help="sim: the flow-level simulator (no root); emu: the emulated network, one point after "
                            "another (root); default: %(default)s")
    sweep.add_argument("--results", metavar="DIR", help="results base directory (default: the config's results_dir)")
    repro = _command(sub, "reproduce", [common])
    repro.add_argument("names", nargs="*", metavar="NAME", help="reproductions to run (all: every one)")
    repro.add_argument("--list", action="store_true", help="list the reproductions and what each compares")
    repro.add_argument("--backend", choices=tuple(BACKENDS),
                       help="run its experiments on this back end, where it offers a choice (default: its first; "
                            "with all, each that does not offer it runs on its first)")
    repro.add_argument("--workers", type=int, default=1, metavar="N",
                       help="sweep points run at once (default: %(default)s)")
    repro.add_argument("--results", default="results", metavar="DIR",
                       help="results base directory (default: %(default)s)")
    return ap


def main(argv=None) -> int:
    """Entry point: the command's exit code."""
    try:
        return _main(argv)
    except ModuleNotFoundError as e:
        line = _not_set_up(e)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of the output left (``... | head``): nothing more to say, and nowhere to say it;
        # stdout goes to /dev/null so the interpreter's last flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _main(argv) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        print(_unknown_command(argv[0]), file=sys.stderr)
        return 2
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help", "--version"):
        argv = ["run", *argv]
    ap = _parser()
    args = ap.parse_args(argv)
    if getattr(args, "config_file", None):
        if args.config:
            ap.error("check: give the config once (-c FILE or FILE)")
        args.config = args.config_file
    if hasattr(args, "config"):
        args.config = args.config or DEFAULT_CONFIG
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        return {"run": cmd_run, "check": cmd_check, "list": cmd_list, "report": cmd_report, "clean": cmd_clean,
                "validate": cmd_validate, "calibrate": cmd_calibrate, "sweep": cmd_sweep,
                "reproduce": cmd_reproduce}[args.command](args)
    except TestbedError as e:
        if _verbosity(args) >= TRACEBACK_VERBOSITY:
            traceback.print_exc()
        if type(e).__name__ == "PolicyIncomplete":
            print(f"incomplete: {_one_line(e)}", file=sys.stderr)
            return 3
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the run stopped and undid what it had set up (an emulated network, its processes); "
              "what had finished is written", file=sys.stderr)
        return 130


def _exit(code: int) -> None:
    """Exit with ``code``. The work is done: a signal arriving while the interpreter shuts down would
    meet the default handler (Python restores it at shutdown) and replace the exit code by -15 or -2."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    sys.exit(code)


def cli() -> None:
    """The console entry point (``dtnet-testbed``, setup.py): :func:`main` with its exit code."""
    _exit(main())


if __name__ == "__main__":
    cli()
