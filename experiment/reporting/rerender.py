"""A finished run rendered again from its saved files: ``run_testbed.py report RUN_DIR``.

:func:`load_run` reads what the tables and plots are made of: ``summary.json`` (every policy's
:class:`experiment.reporting.summary.PolicySummary`, the back end, the policies that could not place every
job), ``jobs.csv`` (the order the jobs were placed in) and each policy's ``timeline.csv``.
:func:`render` gives ``report.txt``'s text from them (byte for byte what the run wrote, for runs of
this version) and :func:`redraw` draws every plot they hold again, with those of
:mod:`experiment.reporting.report_files`. The queue plots need the emulator's per-port samples, which a run
does not keep beyond ``queues.csv``'s summary: they are the run's own.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence

from common.errors import ConfigError
from common.specs import safe_name
from experiment.reporting.summary import PolicySummary
from experiment.reporting.timeline import read_timeline_csv


@dataclasses.dataclass(frozen=True)
class SavedRun:
    """What a run directory holds of the report.

    Attributes:
        run_dir: the directory.
        backend: the name of the back end that ran it (``experiment.BACKENDS``).
        summaries: every policy that finished, in the order it ran.
        unplaced: the policies that could not place every job, with why.
        timelines: each policy's iterations and Up phases (empty where none were recorded).
    """

    run_dir: str
    backend: str
    summaries: tuple[PolicySummary, ...]
    unplaced: Mapping[str, str]
    timelines: Mapping[str, tuple]


def load_run(run_dir: str) -> SavedRun:
    """Read a finished run's ``summary.json`` and timelines.

    Raises:
        ConfigError: not a finished run's directory, or its files cannot be read (one line, naming
            the file).
    """
    path = os.path.join(run_dir, "summary.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        summaries = tuple(PolicySummary.from_dict(p) for p in data["policies"])
        backend, unplaced = data["backend"], dict(data.get("unplaced") or {})
        order = _job_order(os.path.join(run_dir, "jobs.csv"))
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{run_dir}: not a finished run's directory (no summary.json)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as e:
        raise ConfigError(f"{path}: cannot read it: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConfigError(f"{path}: not a summary this version writes ({type(e).__name__}: {e})") from None
    summaries = tuple(_in_placement_order(s, order.get(s.policy, ())) for s in summaries)
    timelines = {}
    for s in summaries:
        csv_path = os.path.join(run_dir, safe_name(s.policy), "timeline.csv")
        try:
            timelines[s.policy] = read_timeline_csv(csv_path) if os.path.exists(csv_path) else ()
        except (OSError, UnicodeDecodeError, KeyError, ValueError) as e:
            raise ConfigError(f"{csv_path}: cannot read it: {e}") from None
    return SavedRun(run_dir, backend, summaries, unplaced, timelines)


def _job_order(path: str) -> dict[str, list[str]]:
    """Each policy's jobs in ``jobs.csv``'s order, which is the run's (placement order;
    ``summary.json`` keys its jobs by name, in sorted order). Empty where there is no such file."""
    order: dict[str, list[str]] = {}
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                order.setdefault(row["policy"], []).append(row["job"])
    except FileNotFoundError:
        pass
    return order


def _in_placement_order(s: PolicySummary, names: Sequence[str]) -> PolicySummary:
    rank = {name: i for i, name in enumerate(names)}
    return dataclasses.replace(s, jobs=tuple(sorted(s.jobs, key=lambda j: rank.get(j.job, len(rank)))))


def render(saved: SavedRun) -> str:
    """``report.txt``'s text (without its final newline), from the saved files."""
    from experiment import saved_backend_class
    from experiment.reporting.report import report_text

    cls = saved_backend_class(saved.backend)
    return report_text(saved.summaries, saved.backend, saved.timelines, cls is not None and cls.measured,
                       saved.unplaced)


def redraw(saved: SavedRun) -> list[str]:
    """Draw every plot the saved files hold into the run directory again; the paths drawn."""
    from experiment.reporting.report import summary_plots
    from experiment.reporting.report_files import write_file_plots

    return summary_plots(saved.run_dir, saved.summaries, saved.timelines) + write_file_plots(saved.run_dir)
