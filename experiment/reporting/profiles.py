"""Jobs' iteration and Up-phase times measured in a run, as a ``profiles.json`` Cassini reuses
(``cassini: {profiles: FILE}``; ``docs/resolutions.md`` Cassini §2.4: profiles are taken in isolation).

From a policy's iterations (``<run>/<policy>/timeline.csv``, either back end's;
:mod:`experiment.reporting.timeline`), for every job: its iteration time, the mean interval between the
starts of its consecutive iterations, and its Up phase, the mean time from its first rank's end of
compute to its last rank's end of communication, in paper-scale ms.

Every run writes ``<policy>/profiles.json`` beside its ``timeline.csv`` (:func:`run_profiles`), and
says for each job which other jobs ran at the same time on a link of a path between its machines
(``shared_with``, :func:`experiment.reporting.interleaving.shared_with`; those paths cover every link its
collective uses, so an empty list means it ran alone on its links). Profiles are taken in
isolation: reuse the file of a policy under which the jobs to profile have ``shared_with: []`` (the
config's jobs placed apart, e.g. ``-p consolidate``).
For a run without that file::

    .venv/bin/python -m experiment.reporting.profiles RUN_DIR --policy consolidate --out profiles.json

The file: ``{"source": RUN_DIR/POLICY, "jobs": {job: {"iter_ms", "up_ms", "iterations"[,
"shared_with"]}}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence

from common.errors import ConfigError
from experiment.reporting.timeline import UpPhase, read_timeline_csv


def measured_timings(timeline_csv: str) -> dict[str, dict]:
    """Every job's measured ``iter_ms``, ``up_ms`` and the iterations behind them (module docstring).

    Raises:
        ConfigError: the file is missing or malformed, or a job has fewer than two iterations.
    """
    try:
        phases = read_timeline_csv(timeline_csv)
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise ConfigError(f"profiles: cannot read {timeline_csv} ({type(e).__name__}: {e})") from None
    out = timings(phases)
    short = sorted({ph.job for ph in phases} - out.keys())
    if short:
        raise ConfigError(f"profiles: job {short[0]!r} has fewer than two consecutive iterations in {timeline_csv}")
    return out


def _iterations(phases: Iterable[UpPhase]) -> dict[str, list[UpPhase]]:
    """Every job's iterations in iteration order, jobs by name."""
    spans: dict[str, list[UpPhase]] = {}
    for ph in phases:
        spans.setdefault(ph.job, []).append(ph)
    return {job: sorted(its, key=lambda ph: ph.iteration) for job, its in sorted(spans.items())}


def _gaps(its: Sequence[UpPhase]) -> list[float]:
    return [b.start_s - a.start_s for a, b in zip(its, its[1:], strict=False) if b.iteration == a.iteration + 1]


def periods(phases: Iterable[UpPhase]) -> dict[str, list[float]]:
    """Every job's iteration times, start to start of consecutive iterations (seconds; a shifted job's
    waits for its instants included), in iteration order; jobs by name."""
    return {job: _gaps(its) for job, its in _iterations(phases).items()}


def timings(phases: Iterable[UpPhase]) -> dict[str, dict]:
    """``iter_ms``, ``up_ms`` and ``iterations`` of every job with two consecutive iterations or more."""
    out = {}
    for job, its in _iterations(phases).items():
        gaps = _gaps(its)
        if gaps:
            out[job] = {"iter_ms": statistics.fmean(gaps) * 1e3, "iterations": len(its),
                        "up_ms": statistics.fmean(ph.end_s - ph.up_start_s for ph in its) * 1e3}
    return out


def run_profiles(source: str, shared: Mapping[str, Sequence[str]], phases: Sequence[UpPhase]) -> dict:
    """The ``profiles.json`` of one policy's run (module docstring): its jobs' timings from ``phases`` and whom
    each shared links with (:func:`experiment.reporting.interleaving.shared_with`)."""
    return {"source": source,
            "jobs": {job: {**t, "shared_with": list(shared.get(job, ()))} for job, t in timings(phases).items()}}


def main(argv: Sequence[str] | None = None) -> int:
    """The command line of the module docstring."""
    ap = argparse.ArgumentParser(prog=".venv/bin/python -m experiment.reporting.profiles",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--policy", required=True, help="the policy whose run measured the jobs alone")
    ap.add_argument("--out", default="profiles.json")
    a = ap.parse_args(argv)
    from common.specs import safe_name

    source = os.path.join(a.run_dir, safe_name(a.policy))
    try:
        jobs = measured_timings(os.path.join(source, "timeline.csv"))
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"source": source, "jobs": jobs}, f, indent=1)
    except (ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for job, t in jobs.items():
        print(f"{job}: iteration {t['iter_ms']:.1f} ms, Up {t['up_ms']:.1f} ms over {t['iterations']} iterations")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
