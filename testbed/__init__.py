"""The emulated cluster and the experiment runner.

The only package that imports Mininet. ``config`` loads and validates experiment files,
``capabilities`` detects what this machine offers, ``net`` realises a topology graph as a
Mininet network (OVS switches, shaped links) inside a context manager that always cleans
up, ``controller_proc`` runs the OpenFlow controller as a child process, ``runner`` drives
one experiment over every policy, and ``report`` writes results, tables and plots.
"""
