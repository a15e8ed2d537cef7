"""What a config can name, from the registries themselves: ``run_testbed.py list``. Pure: the
registries in, sections of ``(name, details, description)`` rows out.

Policies and schedulers with their spec keywords and defaults (what ``name,key=value`` may set),
models with their gradient size and compute time, collectives, topologies with their builder's
parameters, and the back ends.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

from common.specs import spec_keywords

Row = tuple[str, str, str]
"""``(name, details, description)``."""


@dataclasses.dataclass(frozen=True)
class Section:
    """One registry: its title, the config key that names its entries, and a row per entry."""

    title: str
    key: str
    rows: tuple[Row, ...]


def first_sentence(text: str) -> str:
    """Up to the first full stop followed by a space and a capital, or the whole text."""
    m = re.search(r"\.\s+(?=[A-Z`(])", text)
    return (text[:m.start() + 1] if m else text).strip()


def summary(obj) -> str:
    """The first sentence of the first paragraph of ``obj``'s docstring, on one line (empty without one)."""
    return first_sentence(" ".join((inspect.getdoc(obj) or "").strip().split("\n\n")[0].split()))


def first_line(obj) -> str:
    """:func:`summary` without its full stop, as a listing shows it."""
    return summary(obj).rstrip(".")


def _keywords(params: dict[str, inspect.Parameter]) -> str:
    return ", ".join(name if p.default is inspect.Parameter.empty else f"{name}={p.default!r}"
                     for name, p in params.items()) or "-"


def spec_rows(registry: dict, context: tuple[str, ...] = ()) -> tuple[Row, ...]:
    """A row per class of a spec registry (policies, schedulers): its spec keywords and what it is."""
    return tuple((name, _keywords(spec_keywords(cls, context)), first_line(cls)) for name, cls in registry.items())


def sections() -> tuple[Section, ...]:
    """Every registry a config names entries of, in the order a config file meets them."""
    from experiment import backend_classes
    from jobs.collective import JOB_COLLECTIVES
    from jobs.models import MODELS
    from placement import GIVEN_BY_THE_RUN, POLICIES
    from scheduling import SCHEDULERS
    from topo import TOPOLOGIES

    topologies = tuple((kind, _keywords({k: p for k, p in inspect.signature(fn).parameters.items()
                                         if k not in ("limits", "name", "delay_us")}),
                        first_line(fn)) for kind, fn in TOPOLOGIES.items())
    models = tuple((name, f"{m.param_bytes / 1e6:.1f} MB of gradients in {len(m.bucket_bytes)} buckets, "
                          f"{m.compute_time_s:g} s compute, batch {m.batch_size}", m.source.split(";")[0])
                   for name, m in MODELS.items())
    collectives = tuple((name, "", JOB_COLLECTIVES[name].help) for name in sorted(JOB_COLLECTIVES))
    return (
        Section("topologies", "topology.kind (its parameters beside it)", topologies),
        Section("models", "jobs[].model", models),
        Section("collectives", "jobs[].collective", collectives),
        Section("placement policies", "policies (spec: name,key=value,...)", spec_rows(POLICIES, GIVEN_BY_THE_RUN)),
        Section("schedulers", "scheduler (spec: name,key=value,...)", spec_rows(SCHEDULERS)),
        Section("back ends", "run --backend", tuple((name, "", cls.help) for name, cls in backend_classes().items())),
    )


def matches(title: str, which: str | None) -> bool:
    """Whether ``which`` (``policies``, ``placement``, ``back``, ...) names the section ``title``."""
    return not which or title.startswith(which) or any(word.startswith(which) for word in title.split())


def render(which: str | None = None) -> str:
    """The sections (or those ``which`` names: :func:`matches`) as text for a terminal."""
    out = []
    for s in sections():
        if not matches(s.title, which):
            continue
        width = max(len(r[0]) for r in s.rows)
        out.append(f"{s.title} ({s.key}):")
        for name, details, text in s.rows:
            line = f"  {name:<{width}}  {text}"
            out.append(line.rstrip())
            if details:
                out.append(f"  {'':<{width}}  {details}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
