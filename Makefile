# Two commands, run as root on a fresh Debian 12 machine:
#   make run    set up, then run the default experiment
#   make test   set up, then run the test suite
PY := .venv/bin/python
CONFIG ?= experiments/default.yaml

.PHONY: setup run test unit bench lint clean

setup:
	@bash scripts/setup.sh

run: setup
	$(PY) run_testbed.py -c $(CONFIG)

test: setup
	$(PY) -m ruff check .
	$(PY) -m pytest -q --durations=15 tests

unit: setup
	$(PY) -m pytest -q -m "not emulation" tests

bench: setup
	$(PY) bench/fidelity.py

clean:
	$(PY) run_testbed.py clean
