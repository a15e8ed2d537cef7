"""The emulated cluster and the experiment runner.

The only package that imports Mininet (the experiment's config is :mod:`experiment.config.schema`).
``capabilities`` detects what this machine offers, ``net`` realises a topology graph as a
Mininet network (OVS switches, shaped links) inside a context manager that always cleans
up, ``controller_proc`` runs the OpenFlow controller as a child process, and ``runner`` drives
one experiment over every policy. The run's typed records, report, export and estimates live in
:mod:`experiment` (:mod:`experiment.reporting.measurements`, :mod:`experiment.reporting.report`, ...).
"""
