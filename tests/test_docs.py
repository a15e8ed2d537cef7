"""The documentation: the configuration reference is generated from the declared rules and current,
and every relative link of the README and docs/ points at a file of the repository."""

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
