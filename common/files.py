"""Reading a user-supplied file safely: a regular file only, of bounded size.

A path given by a user may name a FIFO (opening it would wait for a writer for ever), a device
(``/dev/zero`` never ends) or a directory. :func:`read_regular_file` checks the path with
``stat`` before opening it, opens it without blocking, checks the opened file again (it may
have been replaced in between) and reads at most one byte past the limit whatever the file
claims its size is.
"""

from __future__ import annotations

import os
import stat


class UnreadableFile(Exception):
    """Why a file cannot be read, as a phrase for a message (``a FIFO, not a regular file``).

    Attributes:
        missing: the path does not exist.
    """

    def __init__(self, reason: str, missing: bool = False):
        super().__init__(reason)
        self.missing = missing


def file_type(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, for a message (``a directory``, ``a FIFO``, ...)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    Raises:
        UnreadableFile: the path does not exist, cannot be opened, is not a regular file, or
            holds more than ``max_bytes``.
    """
    try:
        mode = os.stat(path).st_mode
        data = b""
        if stat.S_ISREG(mode):
            # O_NONBLOCK: should a FIFO replace the file after the stat, opening it does not wait for a writer.
            with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
                mode = os.fstat(f.fileno()).st_mode
                data = f.read(max_bytes + 1) if stat.S_ISREG(mode) else b""
    except FileNotFoundError as exc:
        raise UnreadableFile(exc.strerror or "no such file", missing=True) from None
    except OSError as exc:
        raise UnreadableFile(exc.strerror or str(exc)) from None
    if not stat.S_ISREG(mode):
        kind = file_type(mode)
        raise UnreadableFile(f"{kind}, not a regular file" if kind != "not a regular file" else kind)
    if len(data) > max_bytes:
        raise UnreadableFile(f"larger than {max_bytes >> 20} MiB" if max_bytes >= 1 << 20 else
                             f"larger than {max_bytes} bytes")
    return data
