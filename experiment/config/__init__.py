"""An experiment's configuration and what it reads: the config tree and its field rules, its safe
YAML reader, ``--set`` overrides, the generated reference, what a config can name, cluster traces
and Poisson traces, and the jobs a config runs. Imports no other part of ``experiment`` but its
back-end registry (``docs/architecture.md``)."""
