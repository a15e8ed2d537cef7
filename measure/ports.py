"""Switch port kinds a config may ask for, and their limits.

``system`` ports are the links' veths themselves; ``afxdp`` ports are AF_XDP sockets polled by a
PMD thread (:mod:`emulator.ports`), whose 4 kB frames cap the MTU at :data:`AFXDP_MAX_MTU`.
"""

PORT_TYPES = ("auto", "afxdp", "system")
AFXDP_MAX_MTU = 3000
