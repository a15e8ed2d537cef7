"""Summaries, tables, CSV/JSON files and plots of an experiment's results.

Definitions used in every table:

* *machines*: machines hosting a worker of some job; *idle used*: those of them that were idle
  (no background load) before; *in use*: machines of the cluster with any busy GPU (background
  or jobs), and *fragmented*: machines partly used, both at the busiest wave (the cluster
  metrics of the Titan paper);
* *communication time per iteration* of a job: for each recorded iteration, the largest
  communication time over the job's ranks (the allreduce ends for the job when its slowest
  rank is done); mean and 99th percentile over all iterations of all jobs;
* *cross-machine bytes*: bytes that left machines onto the fabric (machine -> switch links),
  warm-up iterations and rendezvous included, summed over waves;
* *measurement window* of a wave: from the start of its first recorded iteration to the end
  of its last (worker start-up and warm-up excluded);
* *busiest-link utilisation*: over every directed link and wave, the highest
  ``bytes in the window * 8 / (window length * emulated link rate)``, bytes from the
  controller's port-statistics samples;
* *CPU*: whole-machine utilisation sampled inside the measurement windows; a 95th
  percentile at or above 95% flags the policy's timings as possibly CPU-bound.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict

from common.units import MEGA


def percentile(values, q: float) -> float | None:
    """The ``q`` percentile (0..100) by linear interpolation, None for no values."""
    v = sorted(values)
    if not v:
        return None
    pos = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _mean(values) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def job_iteration_times(records) -> dict[str, dict[int, dict[str, float]]]:
    """Per job and iteration: the slowest rank's communication and compute time."""
    out: dict[str, dict[int, dict[str, float]]] = defaultdict(dict)
    for r in records:
        it = out[r.job].setdefault(r.iteration, {"comm_s": 0.0, "compute_s": 0.0, "ranks": 0})
        it["comm_s"] = max(it["comm_s"], r.comm_s)
        it["compute_s"] = max(it["compute_s"], r.compute_s)
        it["ranks"] += 1
    return out


def _utilisation(nbytes: float, length_s: float, rate_mbps: float) -> float | None:
    return nbytes * 8 / (length_s * rate_mbps * MEGA) if length_s > 0 else None


def link_rows(result: dict):
    """Every directed link of every wave of a policy's result, as dicts.

    Keys: ``wave``, ``src``, ``dst``, ``rate_mbps``; ``bytes``, ``duration_s`` and
    ``wave_utilisation`` over the whole wave (kernel counters, start-up included);
    ``window_bytes``, ``window_s`` and ``window_utilisation`` over the measurement window
    (None where the window or the samples do not cover the link).
    """
    rates = {(u, v): r for u, v, r in result["link_rate_mbps"]}
    for w in result["waves"]:
        window = dict(((u, v), b) for u, v, b in w["window_link_bytes"])
        length_s = w["window_s"][1] - w["window_s"][0] if w["window_s"] else 0.0
        for u, v, b in w["link_bytes"]:
            rate = rates.get((u, v)) or rates[(v, u)]
            wb = window.get((u, v))
            yield {"wave": w["index"], "src": u, "dst": v, "rate_mbps": rate, "bytes": b,
                   "duration_s": w["duration_s"], "wave_utilisation": _utilisation(b, w["duration_s"], rate),
                   "window_bytes": wb, "window_s": length_s if w["window_s"] else None,
                   "window_utilisation": None if wb is None else _utilisation(wb, length_s, rate)}


def summarise_policy(cfg, g, result: dict, records) -> dict:
    """The per-policy summary written to ``summary.json`` and shown in the tables."""
    machines_used = sorted({m for p in result["placements"] for m, _ in p["slots"]},
                           key=lambda m: g.nodes[m]["index"])
    idle_before = [m for m in machines_used if cfg.background.get(m, 0) == 0]
    cross_bytes = sum(b for w in result["waves"] for u, _, b in w["link_bytes"] if g.nodes[u]["role"] == "machine")
    busiest = (0.0, None, None)
    for row in link_rows(result):
        if row["window_utilisation"] is not None and row["window_utilisation"] > busiest[0]:
            busiest = (row["window_utilisation"], f"{row['src']}->{row['dst']}", row["wave"])
    per_job = {}
    times = job_iteration_times(records)
    all_comm = []
    for p in result["placements"]:
        job = p["job"]
        its = times.get(job, {})
        comm = [v["comm_s"] for v in its.values()]
        all_comm += comm
        spec = next(j for j in cfg.jobs if j.name == job)
        per_job[job] = {
            "model": spec.model, "workers": spec.workers, "collective": spec.collective, "wave": p["wave"],
            "machines": sorted({m for m, _ in p["slots"]}, key=lambda m: g.nodes[m]["index"]),
            "iterations_recorded": len(its),
            "complete": all(v["ranks"] == spec.workers for v in its.values()) and len(its) == cfg.iterations,
            "comm_mean_s": _mean(comm), "comm_p99_s": percentile(comm, 99),
            "compute_mean_s": _mean(v["compute_s"] for v in its.values()),
        }
    return {
        "policy": result["policy"],
        "machines_used": len(machines_used),
        "idle_machines_used": len(idle_before),
        "cross_machine_bytes": cross_bytes,
        "cluster_machines_in_use": max(c["machines_in_use"] for c in result["cluster_states"]),
        "fragmented_machines": max(c["fragmented_machines"] for c in result["cluster_states"]),
        "comm_mean_s": _mean(all_comm),
        "comm_p99_s": percentile(all_comm, 99),
        "busiest_link": busiest[1],
        "busiest_link_utilisation": busiest[0],
        "waves": len(result["waves"]),
        "wall_time_s": result["wall_time_s"],
        "cpu_mean": result["cpu_measured"]["mean"],
        "cpu_p95": result["cpu_measured"]["p95"],
        "cpu_saturated": result["cpu_measured"]["saturated"],
        "jobs": per_job,
    }


SUMMARY_COLUMNS = [
    ("policy", "policy", "{}"),
    ("machines_used", "machines", "{}"),
    ("idle_machines_used", "idle used", "{}"),
    ("cluster_machines_in_use", "in use", "{}"),
    ("fragmented_machines", "fragmented", "{}"),
    ("cross_machine_bytes", "cross-machine MB", None),
    ("comm_mean_s", "comm mean s", "{:.3f}"),
    ("comm_p99_s", "comm p99 s", "{:.3f}"),
    ("busiest_link_utilisation", "busiest link util", "{:.0%}"),
    ("busiest_link", "busiest link", "{}"),
    ("cpu_mean", "cpu mean", "{:.0%}"),
]


def _fmt(key, fmt, value) -> str:
    if value is None:
        return "-"
    if key == "cross_machine_bytes":
        return f"{value / 1e6:.2f}"
    return fmt.format(value)


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, sep, *body])


def summary_tables(summaries: list[dict]) -> str:
    """The terminal report: one row per policy, then one table per policy's jobs."""
    rows = [[_fmt(k, f, s.get(k)) for k, _, f in SUMMARY_COLUMNS] for s in summaries]
    parts = ["Per policy (emulated, measured):", format_table([h for _, h, _ in SUMMARY_COLUMNS], rows)]
    for s in summaries:
        jrows = [[job, j["model"], str(j["workers"]), j["collective"], str(len(j["machines"])), str(j["wave"]),
                  _fmt("", "{:.3f}", j["comm_mean_s"]), _fmt("", "{:.3f}", j["comm_p99_s"]),
                  "yes" if j["complete"] else "NO"]
                 for job, j in s["jobs"].items()]
        parts += ["", f"Jobs under {s['policy']}:", format_table(
            ["job", "model", "workers", "collective", "machines", "wave", "comm mean s", "comm p99 s", "complete"],
            jrows)]
        if s.get("cpu_saturated"):
            parts.append(f"  WARNING: CPU saturated under {s['policy']} (p95 {s['cpu_p95']:.0%}): "
                         f"timings may reflect the emulator, not the network; raise the scale factor")
    return "\n".join(parts)


def write_run_report(run_dir: str, cfg, g, results: dict, caps: dict, stream, unplaced: dict | None = None) -> None:
    """Write summary.json, summary.csv, jobs.csv, link_bytes.csv, report.txt and plots; print tables.

    ``unplaced`` maps policies that could not place every job to the reason.
    """
    unplaced = unplaced or {}
    summaries = [r["summary"] for r in results.values() if "summary" in r]
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump({"name": cfg.name, "scale": cfg.scale, "capabilities": caps, "policies": summaries,
                   "unplaced": unplaced}, f, indent=1, sort_keys=True)
    keys = [k for k, _, _ in SUMMARY_COLUMNS] + ["waves", "wall_time_s", "cpu_saturated"]
    with open(os.path.join(run_dir, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys)
        for s in summaries:
            w.writerow([s.get(k) for k in keys])
    with open(os.path.join(run_dir, "jobs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        cols = ["model", "workers", "collective", "wave", "iterations_recorded", "complete", "comm_mean_s",
                "comm_p99_s", "compute_mean_s"]
        w.writerow(["policy", "job", *cols, "machines"])
        for s in summaries:
            for job, j in s["jobs"].items():
                w.writerow([s["policy"], job, *[j[c] for c in cols], " ".join(j["machines"])])
    with open(os.path.join(run_dir, "link_bytes.csv"), "w", newline="") as f:
        w = csv.writer(f)
        cols = ["wave", "src", "dst", "rate_mbps", "bytes", "duration_s", "wave_utilisation", "window_bytes",
                "window_s", "window_utilisation"]
        w.writerow(["policy", *cols])
        for spec, r in results.items():
            for row in link_rows(r):
                w.writerow([spec, *("" if row[c] is None else row[c] for c in cols)])
    text = summary_tables(summaries)
    for spec, why in unplaced.items():
        text += f"\n\nPolicy {spec} could not place every job: {why}"
    with open(os.path.join(run_dir, "report.txt"), "w") as f:
        f.write(text + "\n")
    plots = write_plots(run_dir, summaries)
    print("\n" + text, file=stream)
    print(f"\nresults: {run_dir} (summary.json, summary.csv, jobs.csv, link_bytes.csv"
          + "".join(f", {os.path.basename(p)}" for p in plots) + ")", file=stream, flush=True)


def write_plots(run_dir: str, summaries: list[dict]) -> list[str]:
    """Bar charts of communication time and cross-machine traffic per policy. Returns the PNG paths."""
    if not summaries:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s["policy"] for s in summaries]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    x = range(len(names))
    axes[0].bar([i - 0.2 for i in x], [s["comm_mean_s"] or 0 for s in summaries], 0.4, label="mean")
    axes[0].bar([i + 0.2 for i in x], [s["comm_p99_s"] or 0 for s in summaries], 0.4, label="p99")
    axes[0].set_ylabel("communication time per iteration (s)")
    axes[0].legend()
    axes[1].bar(x, [s["cross_machine_bytes"] / 1e6 for s in summaries], color="tab:orange")
    axes[1].set_ylabel("cross-machine traffic (MB, emulated)")
    axes[2].bar(x, [100 * s["busiest_link_utilisation"] for s in summaries], color="tab:green")
    axes[2].set_ylabel("busiest-link utilisation (%)")
    for ax in axes:
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=20, ha="right")
    fig.tight_layout()
    path = os.path.join(run_dir, "policies.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
