"""Where the project's own files are: child processes run with this directory on their path."""

import os

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The repository's (or the installed packages') top directory, the parent of ``common/``."""


def shown(path: str) -> str:
    """``path`` as a message prints it: relative to the current directory when it lies under it."""
    if not path or not os.path.isabs(path):
        return path
    rel = os.path.relpath(path)
    return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel
