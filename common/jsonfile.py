"""Writing JSON files atomically: a reader, or a run cut short, sees the old file or the new one,
never part of one."""

from __future__ import annotations

import json
import os


def write_json_atomic(path: str, obj, *, durable: bool = False, **dump_kwargs) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file and a rename.

    Args:
        path: the file to (re)place.
        obj: JSON-serialisable data.
        durable: also flush the data to disk before the rename (for records that must survive
            a crash of the machine, not only of the process).
        dump_kwargs: passed to :func:`json.dump` (default: ``indent=1, sort_keys=True``).
    """
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(obj, f, **({"indent": 1, "sort_keys": True} | dump_kwargs))
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
