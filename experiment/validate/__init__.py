"""Validating simulators against a run: anyone's per-job estimates from a CSV file, and a recorded
run re-simulated with other simulator options and fitted (``run_testbed.py validate``, ``calibrate``)."""
