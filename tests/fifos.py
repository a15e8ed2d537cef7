"""Reading a FIFO in a test without hanging the suite when the reader under test blocks."""

from __future__ import annotations

import os
import threading

import pytest


def read_fifo_within(read, fifo: str, timeout_s: float = 10.0) -> Exception | None:
    """``read(fifo)`` in a thread: the exception it raised, or None.

    A read still blocked after ``timeout_s`` seconds is released (a writer opens and closes the
    FIFO, so the reader sees end of file) and fails the test.
    """
    outcome = {}

    def run():
        try:
            read(fifo)
        except Exception as e:  # handed to the test to check
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout_s)
        pytest.fail(f"reading the FIFO {fifo} blocked for {timeout_s:g} s")
    return outcome.get("error")
