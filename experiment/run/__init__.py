"""Running an experiment: the driver, the experiment loop, one policy's run of a config, the
simulator back end and the durations clock, re-simulating a recorded schedule, and parameter sweeps
with their executors (``docs/architecture.md``)."""
