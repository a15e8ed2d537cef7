"""The project's error hierarchy.

Errors a user can cause are raised at package boundaries as one of these, with a
message that names what failed, the offending value and the valid choices. The
command-line entry points catch :class:`TestbedError` and print the message
without a traceback.
"""


class TestbedError(Exception):
    """Base class of every error the project raises on purpose."""


class ConfigError(TestbedError):
    """A malformed or inconsistent experiment configuration."""


class TopologyError(TestbedError):
    """A topology that is malformed or cannot be built as asked."""


class PlacementError(TestbedError):
    """A placement request that no policy can satisfy, or an unknown policy."""


class JobError(TestbedError):
    """A job that cannot be described or run (unknown model, bad worker count, failed rank)."""


class EmulationError(TestbedError):
    """The emulated network or one of its processes failed."""


def unknown_name(kind: str, name: str, valid) -> str:
    """Return the standard message for an unknown registry name."""
    import difflib

    valid = sorted(valid)
    hint = difflib.get_close_matches(name, valid, n=1)
    msg = f"unknown {kind} {name!r}; valid: {', '.join(valid)}"
    if hint:
        msg += f" (did you mean {hint[0]!r}?)"
    return msg
