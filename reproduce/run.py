"""Run a reproduction into a results directory of its own and report it: the shell around
:class:`reproduce.base.Reproduction`.

``<results>/<timestamp>-reproduce-<name>/`` holds ``reproduction.json`` (what was compared, every
figure with its ratio, the notes and the run's wall time), ``reproduction.csv`` (one row per figure),
``reproduction.txt`` (the table printed), ``reproduction.png`` and the runs behind them, with
``status.json`` as every run directory has.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from collections.abc import Callable

from common.errors import ConfigError
from experiment.reporting import results
from experiment.reporting.tables import format_table
from reproduce import REPRODUCTIONS, get
from reproduce.base import Context, Outcome, Reproduction, number_text

COLUMNS = ("quantity", "ours", "paper_low", "paper_high", "unit", "ratio", "agrees", "source")


def choose_backend(repro: Reproduction, backend: str | None) -> str:
    """``backend``, or the reproduction's default, checked against those it runs on."""
    if backend is None:
        return repro.backends[0]
    if backend not in repro.backends:
        raise ConfigError(f"reproduce {repro.name}: it runs on {' or '.join(repro.backends)}, not {backend!r}")
    return backend


def run_reproduction(name: str, results_dir: str, backend: str | None = None, workers: int = 1,
                     say: Callable[[str], None] = print, say_table: Callable[[str], None] = print) -> str:
    """Validate, run, write and print one reproduction; its directory.

    Raises:
        ConfigError: unknown name, a back end it does not run on, or an invalid config (nothing has run).
        TestbedError: a run failed (``status.json`` says so; what finished is kept), or the back end
            refused this machine before anything ran (then no directory is left).
    """
    repro = get(name)
    backend = choose_backend(repro, backend)
    what = repro.check(backend)
    out_dir = os.path.abspath(results.make_run_dir(f"reproduce-{name}", results_dir))
    results.write_status(out_dir, "running")
    say(f"reproduce {name} ({repro.paper}, {repro.source}) in {out_dir}: {what}")
    t0 = time.monotonic()
    try:
        outcome = repro.run(Context(out_dir, say, backend, workers))
    except BaseException as e:
        if os.listdir(out_dir) == ["status.json"]:  # refused before anything ran (root, the machine): no trace
            shutil.rmtree(out_dir)
        elif isinstance(e, KeyboardInterrupt):
            results.write_status(out_dir, "interrupted")
        else:
            results.write_status(out_dir, "failed", f"{type(e).__name__}: {e}")
        raise
    wall_s = time.monotonic() - t0
    lines = report_lines(repro, outcome, backend, wall_s)
    write(out_dir, repro, outcome, backend, wall_s, lines)
    for line in lines:
        say_table(line)
    say_table(f"written: {out_dir}/reproduction.json, reproduction.csv, reproduction.txt"
              + (", reproduction.png" if outcome.plot else ""))
    results.write_status(out_dir, "complete")
    return out_dir


def report_lines(repro: Reproduction, outcome: Outcome, backend: str, wall_s: float) -> list[str]:
    """The table of ours beside the paper's, its heading and notes."""
    rows = [[f.quantity, number_text(f.ours), f.paper_text(), f.unit, number_text(f.ratio),
             {True: "yes", False: "no", None: "-"}[f.agrees], f.source] for f in outcome.figures]
    head = (f"{repro.name}: {repro.paper}, {repro.source} ({backend}, {wall_s:.1f} s). "
            f"The paper: {repro.claim}.")
    table = format_table(["quantity", "ours", "paper", "unit", "ours/paper", "agrees", "paper's source"], rows)
    return [head, "", *table.splitlines(), *(f"- {n}" for n in outcome.notes),
            *(f"- the gap, swept: {e.text()}" for e in outcome.explanations)]


def write(out_dir: str, repro: Reproduction, outcome: Outcome, backend: str, wall_s: float,
          lines: list[str]) -> None:
    """``reproduction.json``, ``.csv`` and ``.txt``."""
    results.write_json(os.path.join(out_dir, "reproduction.json"), {
        "name": repro.name, "paper": repro.paper, "source": repro.source, "claim": repro.claim, "backend": backend,
        "wall_s": wall_s, "figures": [f.to_dict() for f in outcome.figures], "notes": list(outcome.notes),
        "explanations": [e.to_dict() for e in outcome.explanations],
        "runs": [os.path.relpath(r, out_dir) for r in outcome.runs],
        "plot": os.path.basename(outcome.plot) if outcome.plot else None})
    with open(os.path.join(out_dir, "reproduction.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for fig in outcome.figures:
            w.writerow(fig.to_dict())
    with open(os.path.join(out_dir, "reproduction.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def catalogue_lines() -> list[str]:
    """``reproduce --list``: every reproduction, where its numbers come from, its back ends and run time."""
    def minutes(m: float | None) -> str:
        return "-" if m is None else f"{m:g}" if m >= 1 else "<1"

    rows = [[name, cls.paper, cls.source, ", ".join(cls.backends), minutes(cls.minutes)]
            for name, cls in REPRODUCTIONS.items()]
    table = format_table(["name", "paper", "reproduces", "back ends", "minutes"], rows)
    claims = []
    for name, cls in REPRODUCTIONS.items():
        claims += [f"  {name}: {cls.claim}.", f"    the paper's setup: {cls.setup}.",
                   f"    ours differs: {cls.differs or 'nowhere'}."]
    measured = [cls.minutes for cls in REPRODUCTIONS.values() if cls.minutes is not None]
    unmeasured = len(REPRODUCTIONS) - len(measured)
    total = (f"run all: python3 run_testbed.py reproduce all   (about {sum(measured):.0f} minutes for the "
             f"{len(measured)} measured" + (f", more for the {unmeasured} not measured yet)" if unmeasured else ")"))
    return [*table.splitlines(), "", "What each paper reports, on what setup, and where ours differs:", *claims, "",
            "run one: python3 run_testbed.py reproduce NAME   (minutes measured on a 2-core machine, on the first "
            "back end; -: not measured there yet)", total]


CLOSE = 0.2
"""A figure within this share of the paper's value (the nearest end of its range) counts as close."""
VERDICTS = ("close", "explained", "differs", "not measured")


def verdict(figure: dict, explanations: list[dict]) -> str:
    """Where one figure of ``reproduction.json`` stands: ``close`` (within :data:`CLOSE` of the paper's,
    or on its value where that is 0), ``explained`` (not close, and a swept parameter reaches the
    paper's number: the run's explanation of that quantity), ``differs`` or ``not measured``."""
    if figure["ours"] is None:
        return "not measured"
    ratio = figure["ratio"]
    if figure["agrees"] or (ratio is not None and abs(ratio - 1.0) <= CLOSE):
        return "close"
    if any(e["quantity"] == figure["quantity"] and e["reaches"] is not None for e in explanations):
        return "explained"
    return "differs"


def summary_rows(out_dirs: list[str]) -> list[dict]:
    """One row per reproduction run into ``out_dirs``: its paper, back end, run time and how many of
    its figures are in each :data:`VERDICTS`."""
    rows = []
    for out_dir in out_dirs:
        with open(os.path.join(out_dir, "reproduction.json")) as f:
            data = json.load(f)
        counts = dict.fromkeys(VERDICTS, 0)
        for figure in data["figures"]:
            counts[verdict(figure, data["explanations"])] += 1
        rows.append({"name": data["name"], "paper": data["paper"], "backend": data["backend"],
                     "minutes": data["wall_s"] / 60.0, **counts, "dir": out_dir})
    return rows


def summary_lines(rows: list[dict]) -> list[str]:
    """The table ``reproduce all`` ends with: per reproduction, then per paper, the figures close to
    the paper's, explained by one swept parameter, different, or not measured."""
    papers: dict[str, dict] = {}
    for r in rows:
        p = papers.setdefault(r["paper"], {"minutes": 0.0, **dict.fromkeys(VERDICTS, 0)})
        p["minutes"] += r["minutes"]
        for v in VERDICTS:
            p[v] += r[v]
    head = ["reproduction", "paper", "back end", "minutes", *VERDICTS]
    table = [[r["name"], r["paper"], r["backend"], f"{r['minutes']:.1f}", *(str(r[v]) for v in VERDICTS)]
             for r in rows]
    table += [[f"all of {name}", name, "", f"{p['minutes']:.1f}", *(str(p[v]) for v in VERDICTS)]
              for name, p in papers.items()]
    return [f"The reproductions, figure by figure: close = within {CLOSE:.0%} of the paper's, explained = one "
            f"swept parameter reaches it:", *format_table(head, table).splitlines()]


def write_summary(results_dir: str, rows: list[dict], lines: list[str]) -> str:
    """``<results>/<time>-reproduce-all/``: ``summary.txt`` (the table) and ``summary.csv`` (its rows, with
    each reproduction's directory); the directory."""
    out_dir = os.path.abspath(results.make_run_dir("reproduce-all", results_dir))
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out_dir, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["name"])
        w.writeheader()
        w.writerows(rows)
    results.write_status(out_dir, "complete")
    return out_dir
