"""``run.log``: what a run says on the terminal, kept in its directory.

A run's first lines (what the back end prepares) come before its directory exists: they are held
and written first once it does. Every progress line (``say``) and everything the report prints
(``stream``) goes to the file as it goes to the terminal; a quiet run (``say`` silent) still
writes every line to the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TextIO

RUN_LOG = "run.log"


class RunLog:
    """Tees a run's ``say`` and ``stream`` into ``<run_dir>/run.log`` once :meth:`open` is called.

    Args:
        say: the terminal's progress line printer (may print nothing: ``-q``).
        stream: the terminal stream the report prints to.
    """

    def __init__(self, say: Callable[[str], None], stream: TextIO):
        self._say, self._stream = say, stream
        self._held: list[str] = []
        self._file: TextIO | None = None

    def say(self, msg: str) -> None:
        self._say(msg)
        self._keep(msg + "\n")

    def write(self, text: str) -> int:
        """The report's output (a file-like ``stream``)."""
        self._stream.write(text)
        self._keep(text)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()
        if self._file is not None:
            self._file.flush()

    def _keep(self, text: str) -> None:
        if self._file is None:
            self._held.append(text)
        else:
            self._file.write(text)
            self._file.flush()

    def open(self, run_dir: str) -> None:
        """Start writing ``run.log`` in ``run_dir`` (appending: a resumed directory keeps its log)."""
        if self._file is None:
            self._file = open(os.path.join(run_dir, RUN_LOG), "a", encoding="utf-8")
            self._file.write("".join(self._held))
            self._file.flush()
            self._held.clear()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
