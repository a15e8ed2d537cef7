"""Kernel RED's marks beside the BPF marker's: the same experiment run with each (``make vm``).

The BPF marker (:mod:`emulator.ecn`) stands in for RED where the kernel has no ``sch_red``; the
VM runs both. This module reads the two runs' results and sets their marks side by side, per
policy, per switch port and per job::

    .venv/bin/python -m vm.marks RED_RUN_DIR BPF_RUN_DIR [--csv marks.csv]

What it compares, and why RED and the BPF marker differ where they do: ``docs/vm.md`` (RED beside
the BPF marker) and ``docs/ecn.md``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
from collections import defaultdict


@dataclasses.dataclass(frozen=True)
class MarksRow:
    """Marks of one port or job under one policy, by each marker (None: not in that run)."""

    policy: str
    kind: str  # "port" or "job"
    name: str
    red: int | None
    bpf: int | None

    @property
    def ratio(self) -> float | None:
        """BPF / RED marks (None where either is missing or RED marked nothing)."""
        return self.bpf / self.red if self.red and self.bpf is not None else None


def port_marks(run_dir: str) -> dict[str, dict[str, int]]:
    """Per policy, each switch port's marks in the measurement windows (``src->dst``), from ``link_bytes.csv``."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    with open(os.path.join(run_dir, "link_bytes.csv"), newline="") as f:
        for row in csv.DictReader(f):
            if row["window_marks"] not in ("", None):
                out[row["policy"]][f"{row['src']}->{row['dst']}"] += int(row["window_marks"])
    return {p: dict(ports) for p, ports in out.items()}


def job_marks(run_dir: str) -> dict[str, dict[str, int | None]]:
    """Per policy, each job's marks (its connections' marked packets), from ``summary.json``."""
    with open(os.path.join(run_dir, "summary.json")) as f:
        policies = json.load(f)["policies"]
    return {p["policy"]: {name: j.get("ecn_marks") for name, j in p["jobs"].items()} for p in policies}


def compare(red: tuple[dict, dict], bpf: tuple[dict, dict]) -> list[MarksRow]:
    """Rows for every port and job either run marked, policies and names in order; ports that
    neither run marked are left out.

    Args:
        red, bpf: each run's ``(port_marks, job_marks)``.
    """
    rows = []
    for policy in sorted(set(red[0]) | set(bpf[0]) | set(red[1]) | set(bpf[1])):
        r_ports, b_ports = red[0].get(policy, {}), bpf[0].get(policy, {})
        for port in sorted(set(r_ports) | set(b_ports)):
            if r_ports.get(port) or b_ports.get(port):
                rows.append(MarksRow(policy, "port", port, r_ports.get(port), b_ports.get(port)))
        r_jobs, b_jobs = red[1].get(policy, {}), bpf[1].get(policy, {})
        for job in sorted(set(r_jobs) | set(b_jobs)):
            rows.append(MarksRow(policy, "job", job, r_jobs.get(job), b_jobs.get(job)))
    return rows


def totals(rows: list[MarksRow]) -> dict[str, tuple[int, int]]:
    """Per policy, the ports' marks summed: ``(red, bpf)``."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        if r.kind == "port":
            out[r.policy][0] += r.red or 0
            out[r.policy][1] += r.bpf or 0
    return {p: (a, b) for p, (a, b) in out.items()}


def table(rows: list[MarksRow]) -> str:
    """The rows as a terminal table, each policy's port total first."""
    def cell(v):
        return "-" if v is None else str(v)

    lines = [f"{'policy':<12} {'kind':<5} {'port or job':<14} {'RED':>7} {'BPF':>7} {'BPF/RED':>8}"]
    sums = totals(rows)
    for policy in sorted({r.policy for r in rows}):
        red, bpf = sums.get(policy, (0, 0))
        ratio = f"{bpf / red:.2f}" if red else "-"
        lines.append(f"{policy:<12} {'all':<5} {'ports':<14} {red:>7} {bpf:>7} {ratio:>8}")
        for r in rows:
            if r.policy == policy:
                ratio = "-" if r.ratio is None else f"{r.ratio:.2f}"
                lines.append(f"{'':<12} {r.kind:<5} {r.name:<14} {cell(r.red):>7} {cell(r.bpf):>7} {ratio:>8}")
    return "\n".join(lines)


def write_csv(path: str, rows: list[MarksRow]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", "kind", "name", "red_marks", "bpf_marks"])
        for r in rows:
            w.writerow([r.policy, r.kind, r.name, "" if r.red is None else r.red, "" if r.bpf is None else r.bpf])


def compare_runs(red_dir: str, bpf_dir: str) -> list[MarksRow]:
    return compare((port_marks(red_dir), job_marks(red_dir)), (port_marks(bpf_dir), job_marks(bpf_dir)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=".venv/bin/python -m vm.marks", description=__doc__.split("\n\n")[0])
    parser.add_argument("red_run", help="a run directory of the experiment with ecn.method red")
    parser.add_argument("bpf_run", help="a run directory of the same experiment with ecn.method bpf")
    parser.add_argument("--csv", help="also write the rows to this CSV file")
    args = parser.parse_args(argv)
    try:
        rows = compare_runs(args.red_run, args.bpf_run)
    except (OSError, KeyError, ValueError) as e:
        print(f"vm.marks: cannot read the runs: {e}", file=sys.stderr)
        return 2
    print(table(rows))
    if args.csv:
        write_csv(args.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
