"""Read a pinned BPF hash map directly through the ``bpf(2)`` system call.

The port sampler reads the ECN marker's per-port counters four times a second next to the
qdisc counters; spawning ``bpftool`` for that costs about 10 ms, which is time between the two
reads during which the queues move (see :mod:`emulator.queues`). Three commands are enough:
``BPF_OBJ_GET`` (open the pinned map), ``BPF_MAP_GET_NEXT_KEY`` and ``BPF_MAP_LOOKUP_ELEM``.
"""

from __future__ import annotations

import ctypes
import os
import platform

from common.errors import EmulationError

BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_GET_NEXT_KEY = 4
BPF_OBJ_GET = 7
SYSCALL_BPF = {"x86_64": 321, "aarch64": 280}

_libc = ctypes.CDLL(None, use_errno=True)


class _ObjGet(ctypes.Structure):
    _fields_ = [("pathname", ctypes.c_uint64), ("bpf_fd", ctypes.c_uint32), ("file_flags", ctypes.c_uint32)]


class _MapElem(ctypes.Structure):
    _fields_ = [("map_fd", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("key", ctypes.c_uint64),
                ("value", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    """One bpf(2) call; the return value, or -errno."""
    nr = SYSCALL_BPF.get(platform.machine())
    if nr is None:
        raise EmulationError(f"reading BPF maps directly is not supported on {platform.machine()}")
    # the kernel reads a union bpf_attr; pass a zero-padded 128-byte buffer holding ``attr``
    buf = ctypes.create_string_buffer(128)
    ctypes.memmove(buf, ctypes.byref(attr), ctypes.sizeof(attr))
    ret = _libc.syscall(nr, cmd, buf, ctypes.c_uint(128))
    return ret if ret >= 0 else -ctypes.get_errno()


class PinnedMap:
    """A pinned BPF hash map opened read-only for iteration; close it with :meth:`close`.

    Args:
        path: the map's path on a bpffs.
        key_size: bytes per key.
        value_size: bytes per value.
    """

    def __init__(self, path: str, key_size: int, value_size: int):
        self.key_size, self.value_size = key_size, value_size
        self._path = ctypes.create_string_buffer(os.fsencode(path))
        fd = _bpf(BPF_OBJ_GET, _ObjGet(pathname=ctypes.addressof(self._path)))
        if fd < 0:
            raise EmulationError(f"cannot open the pinned BPF map {path}: {os.strerror(-fd)}")
        self.fd: int | None = fd

    def items(self) -> list[tuple[bytes, bytes]]:
        """Every ``(key, value)`` pair, as raw bytes in the kernel's layout.

        A key deleted while iterating ends the walk early (``GET_NEXT_KEY`` restarts from the
        first key when given a missing one, so a seen key stops it); the marker's maps never
        delete entries.
        """
        if self.fd is None:
            raise EmulationError("the BPF map is closed")
        key = ctypes.create_string_buffer(self.key_size)
        nxt = ctypes.create_string_buffer(self.key_size)
        value = ctypes.create_string_buffer(self.value_size)
        out, seen, first = [], set(), True
        while True:
            attr = _MapElem(map_fd=self.fd, key=0 if first else ctypes.addressof(key), value=ctypes.addressof(nxt))
            ret = _bpf(BPF_MAP_GET_NEXT_KEY, attr)
            if ret < 0:
                if -ret == 2:  # ENOENT: no more keys
                    return out
                raise EmulationError(f"walking a BPF map failed: {os.strerror(-ret)}")
            first = False
            k = nxt.raw
            if k in seen:
                return out
            seen.add(k)
            ctypes.memmove(key, nxt, self.key_size)
            ret = _bpf(BPF_MAP_LOOKUP_ELEM, _MapElem(map_fd=self.fd, key=ctypes.addressof(key),
                                                     value=ctypes.addressof(value)))
            if ret == 0:
                out.append((k, value.raw))
            elif -ret != 2:  # an entry gone since GET_NEXT_KEY is skipped
                raise EmulationError(f"reading a BPF map entry failed: {os.strerror(-ret)}")

    def close(self) -> None:
        """Close the map's file descriptor (idempotent)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
