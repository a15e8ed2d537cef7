"""The NetPack paper's job-level metrics (``docs/resolutions.md`` NetPack §5.6), for both back ends' reports.

* **JCT normalised to a reference policy**: each policy's mean job completion time over the
  reference's (the paper normalises to NetPack = 1). The reference is the first policy named
  ``netpack`` (with any parameters), else the first policy. JCT includes queueing here, as the
  loop measures it (arrival to end); the paper does not say (§6 #29).
* **Distribution efficiency** (DE): the mean over jobs of ``JCT_with_1_GPU / (JCT × GPUs)``. With
  perfect linear scaling and no network, a job of G GPUs would finish in its compute time alone,
  so ``JCT_with_1_GPU = G × iterations × compute time per iteration`` (ours, as the spec's reading
  of the paper's GPU-time) and ``DE_j = iterations × compute_s / JCT``: 1 for a cluster whose
  network and queue cost nothing, lower the more they cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from experiment.reporting.tables import format_table


def _name(spec: str) -> str:
    """A policy spec's registry name (``netpack,pat_gbps=14`` -> ``netpack``)."""
    return spec.split(",", 1)[0]


def distribution_efficiency(jobs: Iterable[tuple[int, float | None, float | None]]) -> float | None:
    """The mean of ``iterations × compute_s / jct_s`` over ``(iterations, compute_s, jct_s)`` of the
    jobs with both times known and a positive JCT; None when there is none."""
    values = [n * c / j for n, c, j in jobs if c is not None and j is not None and j > 0]
    return sum(values) / len(values) if values else None


def reference_policy(policies: Sequence[str]) -> str | None:
    """The policy JCTs are normalised to: the first named ``netpack``, else the first (None: none)."""
    return next((p for p in policies if _name(p) == "netpack"), policies[0] if policies else None)


def normalised(values: Mapping[str, float | None], reference: str | None) -> dict[str, float | None]:
    """Each policy's value over the reference's (None where either is unknown or the reference's is 0)."""
    ref = values.get(reference) if reference is not None else None
    return {p: v / ref if v is not None and ref else None for p, v in values.items()}


def jct_lines(rows: Sequence[tuple[str, float | None, float | None]]) -> list[str]:
    """The report's JCT table from ``(policy, mean JCT s, DE)`` rows: JCT, JCT over the reference's,
    DE; no lines when no JCT is known."""
    if not any(jct is not None for _, jct, _ in rows):
        return []
    ref = reference_policy([p for p, _, _ in rows])
    ratio = normalised({p: jct for p, jct, _ in rows}, ref)

    def cell(fmt: str, v: float | None) -> str:
        return "-" if v is None else fmt.format(v)

    table = [[p, cell("{:.3f}", jct), cell("{:.2f}", ratio[p]), cell("{:.2f}", de)] for p, jct, de in rows]
    return [f"Job completion (NetPack's metrics; JCT from arrival, normalised to {ref}; distribution "
            "efficiency DE: 1 = compute time alone):",
            format_table(["policy", "JCT mean s", f"JCT / {_name(ref)}", "DE"], table)]
