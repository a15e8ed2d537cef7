"""common.lifecycle.StartStop: the context-manager shape of networks and INA fabrics."""

from __future__ import annotations

import pytest

from common.lifecycle import StartStop


class _Resource(StartStop):
    def __init__(self, fail: bool = False):
        self.calls: list[str] = []
        self.fail = fail

    def start(self) -> None:
        self.calls.append("start")
        if self.fail:
            raise RuntimeError("half-way")

    def stop(self) -> None:
        self.calls.append("stop")


def test_started_on_entry_and_stopped_on_exit_even_after_an_error():
    """Entry starts, exit stops, also when the body raises; the body gets the resource itself."""
    r = _Resource()
    with pytest.raises(KeyError):
        with r as got:
            assert got is r and r.calls == ["start"]
            raise KeyError("body")
    assert r.calls == ["start", "stop"]


def test_a_failed_start_is_stopped_and_the_error_kept():
    """A start that fails part-way is undone by stop before the error propagates; the body never runs."""
    r = _Resource(fail=True)
    with pytest.raises(RuntimeError, match="half-way"):
        with r:
            r.calls.append("body")
    assert r.calls == ["start", "stop"]
