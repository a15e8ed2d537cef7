"""Check that every pinned requirement is installed at its version and that its module imports.

    python scripts/check_requirements.py requirements.txt

Prints one line per problem and exits 1 if there is any; silent and 0 when all is well. The
set-up runs it after pip, so a requirement pip skipped or could not build stops the set-up.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys

MODULES = {"os-ken": "os_ken", "PyYAML": "yaml", "pytest-xdist": "xdist"}
"""Distribution name -> module name where the two differ (others import as their lower-cased name)."""
EXTRA_MODULES = ("mininet.net",)
"""Modules from the distribution's packages (the venv sees the system's site packages)."""


def pins(path: str) -> list[tuple[str, str]]:
    """``(name, version)`` of every ``name==version`` line of a requirements file."""
    out = []
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s#;]+)", line)
            if m:
                out.append((m.group(1), m.group(2)))
    return out


def problems(path: str) -> list[str]:
    out = []
    for name, want in pins(path):
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name}=={want}: not installed")
            continue
        if have.split("+")[0] != want.split("+")[0]:
            out.append(f"{name}=={want}: {have} is installed")
        module = MODULES.get(name, name.lower().replace("-", "_"))
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - any failure to import is the problem reported
            out.append(f"{name}: import {module} fails: {type(e).__name__}: {e}")
    for module in EXTRA_MODULES:
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001
            out.append(f"import {module} fails: {type(e).__name__}: {e}")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_requirements.py REQUIREMENTS_FILE", file=sys.stderr)
        return 2
    found = problems(argv[1])
    for line in found:
        print(f"setup: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
