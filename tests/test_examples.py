"""Every example in examples/ runs and prints its results."""

import os
import subprocess
import sys

import pytest
from conftest import ROOT

EXAMPLES = sorted(f for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".py"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name):
    """The example exits 0 and prints something for every policy."""
    cp = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name)], capture_output=True, text=True,
                        timeout=120, cwd=ROOT)
    assert cp.returncode == 0, cp.stderr
    assert "consolidate:" in cp.stdout and "allreduce bound" in cp.stdout
