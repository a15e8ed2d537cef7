"""The documentation: the configuration reference is generated from the declared rules and current,
every relative link of the README and docs/ points at a file of the repository, and every table of measured
figures names the command that reproduces it and the machine it was measured on."""

from __future__ import annotations

import os
import re

from conftest import ROOT

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _pages() -> list[str]:
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + sorted(os.path.join(docs, n) for n in os.listdir(docs)
                                                      if n.endswith(".md"))


def test_configuration_reference_is_generated_and_describes_every_field():
    from experiment.config.reference import missing_descriptions, render
    from experiment.config.schema import ExperimentConfig

    assert missing_descriptions(ExperimentConfig) == []
    with open(os.path.join(ROOT, "docs", "configuration.md")) as f:
        assert f.read() == render(), "docs/configuration.md is stale: python -m experiment.config.reference > it"


def test_relative_links_resolve_and_nothing_points_outside_the_repository():
    bad = []
    for page in _pages():
        with open(page) as f:
            text = f.read()
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            path = os.path.normpath(os.path.join(os.path.dirname(page), target))
            if not path.startswith(ROOT + os.sep) or not os.path.exists(path):
                bad.append(f"{os.path.relpath(page, ROOT)}: {target}")
        if "../shared" in text:
            bad.append(f"{os.path.relpath(page, ROOT)}: names ../shared")
    assert bad == []


def test_commands_shown_run_as_typed_on_a_stock_system():
    """Every page shows the testbed as `python3 run_testbed.py` (`sudo python3 ...` for root): stock Debian and
    Ubuntu have no `python` command, and sudo resets PATH; the script switches into .venv itself."""
    shown = [os.path.join(ROOT, "run_testbed.py")] + _pages() + sorted(
        os.path.join(ROOT, "experiments", n) for n in os.listdir(os.path.join(ROOT, "experiments"))
        if n.endswith(".yaml"))
    wrong = re.compile(r"(?<![\w/.-])python run_testbed|\.venv/bin/python run_testbed|sudo -E ")
    bad = []
    for page in shown:
        with open(page) as f:
            for i, line in enumerate(f, 1):
                if wrong.search(line):
                    bad.append(f"{os.path.relpath(page, ROOT)}:{i}: {line.strip()[:80]}")
    assert bad == []



MACHINE = "#the-machine-behind-the-figures"
COMMAND = re.compile(r"run_testbed\.py|bench/|pytest|make |python -m ")
OTHER_MACHINE = re.compile(r"\bthe VM\b|\bVM under\b")
HEADING = re.compile(r"(#{1,6}) (.*)")


def _names_a_command(text: str) -> bool:
    """A backquoted span (which may wrap a line) or an indented line holds a command."""
    spans = re.findall(r"`[^`]*`", text) + re.findall(r"^(?: {4}|\t).*", text, re.M)
    return any(COMMAND.search(s) for s in spans)


def _figure_tables(lines: list[str]):
    """Yield (first line, text from the table's heading to its end, text from its page section's heading
    to its end) for every figure table of a page given as lines (see the test below for the rule)."""
    code, fenced = [], False
    for line in lines:
        fence = line.startswith("```")
        code.append(fenced or fence or line.startswith(("    ", "\t")))
        fenced = fenced != fence
    headings = []  # (line, level, title) of every heading above
    i = 0
    while i < len(lines):
        heading = None if code[i] else HEADING.match(lines[i])
        if heading:
            headings.append((i, len(heading.group(1)), heading.group(2).strip()))
        if code[i] or not lines[i].startswith("|"):
            i += 1
            continue
        end = i
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        k = i  # the introduction: the paragraph above the table, past any code between them
        while k > 0 and (not lines[k - 1].strip() or code[k - 1]):
            k -= 1
        intro_end = k
        while k > 0 and lines[k - 1].strip() and not lines[k - 1].startswith(("#", "|")):
            k -= 1
        intro = "\n".join(lines[k:intro_end])
        under_figures, level = False, 7
        for _, lvl, title in reversed(headings):
            if lvl < level:
                under_figures = under_figures or title.lower().startswith("figures")
                level = lvl
        if under_figures or re.search(r"\bmeasured\b", intro, re.I) or MACHINE in intro:
            own = headings[-1][0] if headings else 0
            section = next((h for h, lvl, _ in reversed(headings) if lvl <= 2), 0)
            yield i + 1, "\n".join(lines[own:end]), "\n".join(lines[section:end])
        i = end


def test_every_figure_table_names_its_machine_and_command():
    """A figure table is a markdown table under a heading titled "Figures..." (down to the next heading
    of its level or above), or one whose introduction (the paragraph above it, past any code block between
    them) says "measured" or links the machine section. Every figure table names the command that
    reproduces it (a backquoted span or an indented line holding `run_testbed.py`, `bench/`, `pytest`,
    `make ` or `python -m `) between its own heading and its end, and the machine it was measured on (a
    link to docs/README.md#the-machine-behind-the-figures, or "the VM") between its page section's heading
    (level 1 or 2) and its end. docs/configuration.md is generated and holds no figures."""
    bad = []
    for page in _pages():
        if page.endswith(os.path.join("docs", "configuration.md")):
            continue
        with open(page) as f:
            lines = f.read().split("\n")
        for line, own, section in _figure_tables(lines):
            where = f"{os.path.relpath(page, ROOT)}:{line}"
            if not _names_a_command(own):
                bad.append(f"{where}: no command")
            if MACHINE not in section and not OTHER_MACHINE.search(section):
                bad.append(f"{where}: no machine")
    assert bad == []
