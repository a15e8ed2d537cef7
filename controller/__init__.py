"""The OpenFlow 1.3 controller.

``rules`` is the pure core: ``(topology, mode) -> flow and group rules``, tested without a switch.
``app`` is a thin os-ken application around it (install rules, poll port statistics), and
``launcher`` starts that application as its own process, listening on 127.0.0.1 only. Only
``app`` and ``launcher`` import os-ken.
"""
