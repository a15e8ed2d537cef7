"""A resource used as a context manager: started on entry, stopped on exit."""

from __future__ import annotations


class StartStop:
    """Mixin for a class with ``start()`` and an idempotent ``stop()``: ``with X(...) as x`` starts
    it, stops it again if starting fails part-way (so nothing it began is left), and stops it on
    exit, whatever happened inside."""

    def start(self) -> None:  # pragma: no cover - the subclass's
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - the subclass's
        raise NotImplementedError

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
