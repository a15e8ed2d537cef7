"""The experiments a reproduction runs, through the testbed's one path: a config run by the driver
(:func:`experiment.run.driver.execute`) or swept (:func:`experiment.run.sweep.run_sweep`), into the
reproduction's directory. Configs are read from the repository, whatever the current directory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from reproduce.base import Context

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(rel_path: str):
    """The experiment config at ``rel_path`` in the repository (its paths relative to its own directory)."""
    from experiment.config import schema as config

    return config.load(os.path.join(ROOT, rel_path))


def check_config(cfg, backend: str) -> str:
    """Validate ``cfg`` for ``backend`` as ``run_testbed.py check`` does; what it runs, in a few words."""
    from experiment.config import schema as config

    g = config.validate(cfg, backend=backend)
    machines = sum(1 for _, d in g.nodes(data=True) if d["role"] == "machine")
    return f"{', '.join(config.policy_specs(cfg))} on {machines} machines"


def check_sweep(cfg, vary: str, seeds: Sequence[int], backend: str) -> str:
    """Validate the sweep's config at every value (:func:`experiment.run.sweep_spec.sweep_points`, with its
    first seed: the seeds change nothing a check looks at, and the sweep checks every point again
    before it runs); what it runs."""
    from experiment.run.sweep_spec import parse_vary, sweep_points

    parsed = parse_vary(vary)
    sweep_points(cfg, parsed, seeds[:1], backend)
    runs = len(parsed.values) * len(seeds)
    return f"{runs} runs of {cfg.name} ({vary}, {len(seeds)} seed{'s' if len(seeds) > 1 else ''})"


def run_config(cfg, ctx: Context, label: str, incomplete_ok: bool = False):
    """Run every policy of ``cfg`` on the context's back end into ``label/``; the
    :class:`experiment.run.driver.RunOutcome` (with ``incomplete_ok``, also where some policy could
    not place every job: a result the reproduction reports).

    Raises:
        PolicyIncomplete: some policy could not place every job (the others' results are written).
        TestbedError: the back end failed.
    """
    from experiment import make_backend
    from experiment.run.driver import execute

    with open(os.devnull, "w") as report:  # the run's report.txt keeps its tables; the reproduction prints its own
        out = execute(cfg, make_backend(ctx.backend), say=ctx.say, run_dir=ctx.path(label), stream=report)
    if out.unplaced and not incomplete_ok:
        raise out.incomplete()
    return out


def run_sweep(cfg, vary: str, seeds: Sequence[int], ctx: Context, label: str):
    """Sweep ``cfg`` over ``vary`` (``PATH=V1,V2,...``) and ``seeds`` into ``label/``; the
    :class:`experiment.run.sweep.SweepResult`."""
    from experiment.run.sweep import run_sweep as sweep
    from experiment.run.sweep_spec import parse_vary

    return sweep(cfg, parse_vary(vary), seeds, run_dir=ctx.path(label), workers=ctx.workers, say=ctx.say,
                 backend=ctx.backend)



def trust_note(out, what: str = "the run") -> str | None:
    """The fidelity monitor's verdict on every policy of an emulated run (``out``, a
    :class:`experiment.run.driver.RunOutcome`), in one line: trusted, or flagged with its reasons;
    None for a back end that measures none (the simulator)."""
    verdicts = []
    for policy, run in out.runs.items():
        m = run.summary.emulated
        if m.trustworthy is not None:
            verdicts.append(f"{policy} trusted" if m.trustworthy else
                            f"{policy} NOT TRUSTED ({'; '.join(m.fidelity_reasons) or 'no reason given'})")
    if not verdicts:
        return None
    return f"the fidelity monitor's verdict on {what}: {', '.join(verdicts)}"


def sweep_trust_note(cfg, vary: str, seeds: Sequence[int], sweep_dir: str, backend: str) -> str | None:
    """The fidelity monitor's verdicts over every policy run of a sweep :func:`run_sweep` ran into
    ``sweep_dir`` (each point's ``summary.json``), in one line: how many were trusted and each one
    flagged with its reasons; None for a back end that measures none (the simulator)."""
    import json

    from experiment.run.sweep_spec import parse_vary, sweep_points

    verdicts = []
    for p in sweep_points(cfg, parse_vary(vary), seeds, backend):
        with open(os.path.join(sweep_dir, p.path, "summary.json")) as f:
            for policy in json.load(f)["policies"]:
                if policy.get("trustworthy") is not None:
                    verdicts.append((p.path, policy["policy"], policy["trustworthy"], policy["fidelity_reasons"]))
    if not verdicts:
        return None
    flagged = [f"{path} {policy} ({'; '.join(why) or 'no reason given'})"
               for path, policy, ok, why in verdicts if not ok]
    return (f"the fidelity monitor trusted {len(verdicts) - len(flagged)} of the sweep's {len(verdicts)} policy runs"
            + (f"; flagged: {', '.join(flagged)}" if flagged else ""))


def sweep_timelines(cfg, vary: str, seeds: Sequence[int], sweep_dir: str, policy: str, backend: str) -> list:
    """``(value, seed, timeline)`` of ``policy`` at every point of a sweep :func:`run_sweep` ran into
    ``sweep_dir`` (its ``timeline.csv``, with the overlaps every run writes), in the sweep's order."""
    from common.specs import safe_name
    from experiment.reporting.timeline import read_timeline_csv
    from experiment.run.sweep_spec import parse_vary, sweep_points

    return [(p.value, p.seed, read_timeline_csv(os.path.join(sweep_dir, p.path, safe_name(policy), "timeline.csv")))
            for p in sweep_points(cfg, parse_vary(vary), seeds, backend)]
