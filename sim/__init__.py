"""Flow-level simulation. For now: the step-synchronous bandwidth bound of a collective on a
routed fabric (``sim.steps``), used by the fidelity benchmark and tests. Pure: no root, no
emulator.
"""
