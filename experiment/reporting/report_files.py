"""What a run directory's saved files show, drawn from those files alone: every run draws these at
its end, and ``run_testbed.py report RUN_DIR`` draws them again (or for the first time) for any
saved run, with its tables (``report.txt``).

* ``jct_cdf.png``: the distribution of job completion times per policy (JCT over the job's
  duration too, for trace runs), when a policy ran at least :data:`MIN_CDF_JOBS` jobs with a JCT
  (``jobs.csv``);
* ``links.png``: every link's utilisation over the measurement windows, drawn on the topology,
  one panel per policy (``topology.json`` and ``link_bytes.csv``; the emulator's measurements);
* ``cluster.png``: the cluster at each arrival per policy in the Titan paper's metrics (used
  machines, fragmentation rate, communication overhead, profit rate: its Figs. 2 and 4-6), when a
  policy's ``cluster.csv`` has at least two arrivals.

Reads only: a missing or empty file means the plot is not drawn, never an error.
"""

from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from collections.abc import Sequence

MIN_CDF_JOBS = 10
"""A JCT distribution is drawn when some policy ran at least this many jobs (a trace, an online mix)."""
TIER_ROWS = {"machine": 0, "edge": 1, "leaf": 1, "agg": 2, "core": 3, "spine": 2}
"""Height of each kind of node in the topology picture (machines at the bottom)."""


def _rows(path: str) -> list[dict]:
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except (FileNotFoundError, csv.Error, UnicodeDecodeError):
        return []


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def jct_by_policy(run_dir: str) -> dict[str, list[tuple[float, float | None]]]:
    """``policy -> [(jct_s, jct over duration or None), ...]`` of every job with a JCT, in ``jobs.csv`` order."""
    out: dict[str, list] = defaultdict(list)
    for row in _rows(os.path.join(run_dir, "jobs.csv")):
        jct = _number(row.get("jct_s"))
        if jct is None:
            continue
        duration = _number(row.get("duration_s"))
        out[row["policy"]].append((jct, jct / duration if duration else None))
    return dict(out)


def write_jct_cdf(run_dir: str) -> list[str]:
    """``jct_cdf.png`` (see the module docstring). Returns the PNG paths written."""
    jcts = jct_by_policy(run_dir)
    if not jcts or max(len(v) for v in jcts.values()) < MIN_CDF_JOBS:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    slowdown = any(s is not None for v in jcts.values() for _, s in v)
    fig, axes = plt.subplots(1, 2 if slowdown else 1, figsize=(11 if slowdown else 6, 4), squeeze=False)
    for policy, values in jcts.items():
        xs = sorted(j for j, _ in values)
        axes[0][0].step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=policy)
        if slowdown:
            ss = sorted(s for _, s in values if s is not None)
            axes[0][1].step(ss, [(i + 1) / len(ss) for i in range(len(ss))], where="post", label=policy)
    axes[0][0].set_xlabel("JCT, paper-scale s (arrival to end)")
    axes[0][0].set_xscale("log")
    if slowdown:
        axes[0][1].set_xlabel("JCT / duration (1: no queueing, no network cost)")
        axes[0][1].set_xscale("log")
    for ax in axes[0]:
        ax.set_ylabel("fraction of jobs")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"job completion times ({', '.join(f'{p}: {len(v)} jobs' for p, v in jcts.items())})", fontsize=9)
    fig.tight_layout()
    path = os.path.join(run_dir, "jct_cdf.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def link_utilisation(run_dir: str) -> dict[str, dict[frozenset, float]]:
    """``policy -> {link (both ends): utilisation}``: the larger of the link's two directions, the
    largest over the policy's waves, over each wave's measurement window (``link_bytes.csv``)."""
    out: dict[str, dict] = defaultdict(dict)
    for row in _rows(os.path.join(run_dir, "link_bytes.csv")):
        u = _number(row.get("window_utilisation"))
        if u is None:
            continue
        key = frozenset((row["src"], row["dst"]))
        out[row["policy"]][key] = max(out[row["policy"]].get(key, 0.0), max(0.0, u))
    return dict(out)


def layout(nodes: Sequence[dict]) -> dict[str, tuple[float, float]]:
    """Each node's position: machines at the bottom, then each switch tier above, each row spread evenly
    in the topology's own order."""
    rows: dict[int, list[str]] = defaultdict(list)
    for n in nodes:
        tier = "machine" if n.get("role") == "machine" else n.get("tier") or "edge"
        rows[TIER_ROWS.get(tier, max(TIER_ROWS.values()) + 1)].append(n["id"])
    pos = {}
    for y, names in rows.items():
        for i, name in enumerate(names):
            pos[name] = ((i + 0.5) / len(names), float(y))
    return pos


def write_links_plot(run_dir: str) -> list[str]:
    """``links.png`` (see the module docstring). Returns the PNG paths written."""
    util = link_utilisation(run_dir)
    try:
        with open(os.path.join(run_dir, "topology.json")) as f:
            topo = json.load(f)
    except (FileNotFoundError, ValueError):
        return []
    if not util:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    pos = layout(topo["nodes"])
    policies = list(util)
    cols = min(4, len(policies))
    rows = -(-len(policies) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows + 0.6), squeeze=False)
    cmap, norm = colormaps["viridis_r"], Normalize(0.0, 1.0)
    machines = [n["id"] for n in topo["nodes"] if n.get("role") == "machine"]
    for ax, policy in zip(axes.flat, policies, strict=False):
        for link in topo["links"]:
            a, b = link["source"], link["target"]
            u = util[policy].get(frozenset((a, b)))
            (xa, ya), (xb, yb) = pos[a], pos[b]
            if u is None or u < 0.01:
                ax.plot([xa, xb], [ya, yb], color="0.85", lw=0.6, zorder=1)
            else:
                ax.plot([xa, xb], [ya, yb], color=cmap(norm(u)), lw=0.8 + 3.2 * min(u, 1.0), zorder=2)
        ax.scatter([pos[m][0] for m in machines], [pos[m][1] for m in machines], s=6, color="0.3", zorder=3)
        switches = [n["id"] for n in topo["nodes"] if n.get("role") != "machine"]
        ax.scatter([pos[s][0] for s in switches], [pos[s][1] for s in switches], s=14, marker="s", color="0.3",
                   zorder=3)
        busiest = max(util[policy].values(), default=0.0)
        ax.set_title(f"{policy} (busiest {busiest:.0%})", fontsize=9)
        ax.set_axis_off()
    for ax in list(axes.flat)[len(policies):]:
        ax.set_axis_off()
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.8,
                 label="link utilisation (busier direction, busiest wave)")
    path = os.path.join(run_dir, "links.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


CLUSTER_PANELS = (("used_machines", "used machines"), ("fragmentation_rate", "fragmentation rate"),
                  ("comm_overhead_bytes", "communication overhead, GB"), ("profit_rate", "profit rate"))
"""``cluster.png``'s panels: a ``cluster.csv`` column and its axis label."""


def cluster_by_policy(run_dir: str) -> dict[str, list[dict]]:
    """``policy -> cluster.csv rows`` for every policy of ``summary.json`` that has that file."""
    from common.specs import safe_name

    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            policies = [p["policy"] for p in json.load(f)["policies"]]
    except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
        return {}
    out = {p: _rows(os.path.join(run_dir, safe_name(p), "cluster.csv")) for p in policies}
    return {p: rows for p, rows in out.items() if rows}


def write_cluster_plot(run_dir: str) -> list[str]:
    """``cluster.png`` (see the module docstring). Returns the PNG paths written."""
    series = cluster_by_policy(run_dir)
    if not series or max(len(rows) for rows in series.values()) < 2:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CLUSTER_PANELS), figsize=(4.2 * len(CLUSTER_PANELS), 3.6), squeeze=False)
    for ax, (column, label) in zip(axes[0], CLUSTER_PANELS, strict=True):
        scale = 1e-9 if column == "comm_overhead_bytes" else 1.0
        for policy, rows in series.items():
            points = [(_number(r["time_s"]), _number(r[column])) for r in rows]
            points = [(t, v * scale) for t, v in points if t is not None and v is not None]
            ax.step([t for t, _ in points], [v for _, v in points], where="post", label=policy)
        ax.set_xlabel("time, paper-scale s (each arrival)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("the cluster at each arrival (Titan's metrics; cluster.csv per policy)", fontsize=9)
    fig.tight_layout()
    path = os.path.join(run_dir, "cluster.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def write_file_plots(run_dir: str) -> list[str]:
    """Every plot of this module that the run's files allow. Returns the PNG paths written."""
    return write_jct_cdf(run_dir) + write_links_plot(run_dir) + write_cluster_plot(run_dir)
