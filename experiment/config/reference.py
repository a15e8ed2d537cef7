"""The configuration reference (``docs/configuration.md``), generated from the declared field rules.

Every key of a config file, section by section: its rule (type and range, from
:mod:`experiment.config.rules`), its default, and the first sentence of its description in its
dataclass's ``Attributes:`` docstring; the topology builders' parameters from their ``Args:``.
Pure: the config classes in, Markdown out. A test checks that the committed page is this output
and that every field has a description.

    .venv/bin/python -m experiment.config.reference > docs/configuration.md
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re

from experiment.config.catalogue import first_sentence, summary
from experiment.config.rules import Section

HEADER = """\
# Configuration reference

An experiment is one YAML file (`experiments/default.yaml` is the default). Every key below is
optional unless its default says *required*; an unknown key, a value of the wrong type or out of
range is refused in one line naming it (`python3 run_testbed.py check -c FILE`), before anything
runs. `--set KEY=VALUE` on the command line changes one key (a dotted path: `topology.k=6`,
`jobs.0.workers=4`, `ecn.method=bpf`) and is checked the same way. A relative path in a config
file is relative to that file's directory (`file: ../traces/philly/philly.csv` in
`experiments/`); one given with `--set` is relative to the current directory. A run's
`config.json` is the fully resolved config, its paths absolute, and is itself a config file that
repeats the run.

Rates are paper-scale (Mbit/s of the cluster being modelled); `scale` divides rates and bytes
alike, and `dilation` slows the emulated network and compute together
([fidelity.md](fidelity.md)). What each name a config can use means (policies, schedulers,
models, collectives, topologies): `python3 run_testbed.py list`.

This page is generated from the declared rules (`.venv/bin/python -m experiment.config.reference >
docs/configuration.md`).
"""

_ROLE = re.compile(r":(?:mod|func|class|data|attr|meth):`~?([^`]+)`")


def plain(text: str) -> str:
    """Docstring markup as Markdown: Sphinx roles and double back-quotes become code."""
    text = _ROLE.sub(lambda m: f"`{m.group(1)}`", text)
    return text.replace("``", "`").replace("|", "\\|")


def described(doc: str, heading: str = "Attributes:") -> dict[str, str]:
    """``name -> description`` of a Google-style docstring section (``Attributes:``, ``Args:``)."""
    out: dict[str, str] = {}
    lines = (doc or "").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == heading)
    except StopIteration:
        return out
    indent, name = None, None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent:
            break
        m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)(?: \([^)]*\))?:\s*(.*)", line) if depth == indent else None
        if m:
            name = m.group(1)
            out[name] = m.group(2)
        elif name is not None:
            out[name] += " " + line.strip()
    return out


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "*required*"
    if dataclasses.is_dataclass(value):
        return "(section)"
    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value, default=str)}`"


def _rule(field: dataclasses.Field) -> str:
    rule = field.metadata["rule"]
    if isinstance(rule, Section):
        return "section"
    describe = getattr(rule, "describe", None)
    return plain(describe()) if describe else ""


def missing_descriptions(cls, where: str = "config") -> list[str]:
    """Every field (below ``cls``, recursively) without a description: what the test refuses."""
    doc = described(inspect.getdoc(cls) or "")
    out = []
    for f in dataclasses.fields(cls):
        if f.name not in doc and not f.metadata.get("flat"):
            out.append(f"{where}.{f.name}")
        rule = f.metadata["rule"]
        item = getattr(rule, "item", None)
        sub = rule.cls if isinstance(rule, Section) else item.cls if isinstance(item, Section) else None
        if sub is not None:
            out += missing_descriptions(sub, f"{where}.{f.name}")
    return out


def _table(cls, prefix: str, sections: list[tuple[str, type]]) -> list[str]:
    doc = described(inspect.getdoc(cls) or "")
    rows = ["| key | type and range | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        if f.metadata.get("flat"):
            continue
        rule = f.metadata["rule"]
        item = getattr(rule, "item", None)
        sub = rule.cls if isinstance(rule, Section) else item.cls if isinstance(item, Section) else None
        key = f"{prefix}{f.name}"
        text = plain(first_sentence(" ".join(doc.get(f.name, "").split())))
        if sub is not None:
            anchor = key.replace(".", "").replace("[]", "")
            text += f" See [{key}](#{anchor})."
            sections.append((key + ("[]" if item is not None else ""), sub))
        rows.append(f"| `{key}` | {_rule(f) if sub is None else 'list of sections' if item else 'section'} | "
                    f"{_default(f)} | {text} |")
    return rows


def _topology_section() -> list[str]:
    from topo import TOPOLOGIES

    out = ["## topology", "",
           "`kind` names the builder; its parameters sit beside it (`topology: {kind: fat_tree, k: 4}`).", ""]
    out += ["| kind | parameter | default | meaning |", "|---|---|---|---|"]
    for kind, builder in TOPOLOGIES.items():
        args = described(inspect.getdoc(builder) or "", "Args:")
        for name, p in inspect.signature(builder).parameters.items():
            if name in ("limits", "name", "delay_us"):
                continue
            default = "*required*" if p.default is inspect.Parameter.empty else f"`{json.dumps(p.default)}`"
            text = plain(first_sentence(" ".join(args.get(name, "").split())))
            out.append(f"| `{kind}` | `{name}` | {default} | {text} |")
    out += ["", "Links have no propagation delay on either back end: a topology with `delay_us` above 0 is "
            "refused ([topologies.md](topologies.md)).", ""]
    return out


def render() -> str:
    """The whole reference page."""
    from experiment.config.schema import ExperimentConfig, TopologyConfig

    sections: list[tuple[str, type]] = []
    out = [HEADER, "## Top level", ""]
    out += _table(ExperimentConfig, "", sections)
    out.append("")
    for key, cls in sections:
        if cls is TopologyConfig:
            out += _topology_section()
            continue
        out += [f"## {key.replace('[]', '')}", "", plain(summary(cls)), ""]
        nested: list[tuple[str, type]] = []
        out += _table(cls, f"{key}.", nested)
        out.append("")
        sections += [n for n in nested if n not in sections]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
