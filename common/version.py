"""The testbed's version (``run_testbed.py --version``; setup.py reads it from here)."""

VERSION = "0.2.0"
