"""Where the project's own files are: child processes run with this directory on their path."""

import os

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The repository's (or the installed packages') top directory, the parent of ``common/``."""
