# Two commands, run as root on a fresh Debian 12 machine:
#   make run    set up, then run the default experiment
#   make test   set up (with Docker, which the tests of workers in containers need), then run the test suite
# and, once set up, as any user: make unit (the unit tests), make lint (ruff); as root, make clean-run
# (undo what a killed run left behind).
# DOCKER=1 adds Docker to any target's set-up (experiments with `container: {engine: docker}`).
PY := .venv/bin/python
CONFIG ?= experiments/default.yaml

.PHONY: setup run test unit lint bench-fidelity clean-run vm

setup:
	@bash scripts/setup.sh $(if $(DOCKER),--docker) $(if $(VM),--vm)

run: setup
	$(PY) run_testbed.py -c $(CONFIG)

test: DOCKER := 1
# TESTBED_REQUIRE_SETUP: a test needing what the set-up installs fails instead of skipping; -rs: every
# skip that remains (optional by design: bmv2 without P4_PREFIX, a kernel without RED) says why. The unit
# tier runs on every core (-n auto); the emulation tier after it, alone, as the emulated network needs
# the machine to itself to keep up.
test: setup
	$(PY) -m ruff check .
	TESTBED_REQUIRE_SETUP=1 $(PY) -m pytest -q -rs --durations=10 -n auto -m "not emulation" tests
	TESTBED_REQUIRE_SETUP=1 $(PY) -m pytest -q -rs --durations=15 -m emulation tests

# unit and lint need the venv only: where the set-up has made it they run as any user; where it has
# not, they run the set-up first, which needs root (apt, Open vSwitch).
unit: $(PY)
	$(PY) -m pytest -q -n auto -m "not emulation" tests

lint: $(PY)
	$(PY) -m ruff check .

$(PY):
	@bash scripts/setup.sh

# The full-feature VM on the offline Debian box: build the box if missing, boot, run what needs the
# stock kernel, copy the results out (results/vm-*), destroy the VM (docs/vm.md).
vm: VM := 1
vm: setup
	$(PY) -m vm

# The emulator's fidelity benchmark: allreduce measured against its bound (docs/benchmarks.md lists the others).
bench-fidelity: setup
	$(PY) bench/fidelity.py

# Undo what a killed or crashed run left on the machine (root): run_testbed.py clean (docs/faults.md).
clean-run:
	$(PY) run_testbed.py clean
