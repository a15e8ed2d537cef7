"""A run's results: its directory and log, typed records, report tables, files and plots, timelines,
interleaving and profiles, the NetPack job metrics, the export, and the statistics of estimates
against measurements. Imports the config, never the running of an experiment (``docs/architecture.md``)."""
