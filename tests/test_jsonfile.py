"""Atomic JSON writing (``common.jsonfile``): a failed write leaves the previous file whole."""

from __future__ import annotations

import json

import pytest

from common.jsonfile import write_json_atomic


def test_a_write_replaces_the_file_whole(tmp_path):
    path = tmp_path / "summary.json"
    write_json_atomic(str(path), {"b": 1, "a": [1, 2]})
    assert json.loads(path.read_text()) == {"a": [1, 2], "b": 1}
    assert path.read_text().index('"a"') < path.read_text().index('"b"')  # sorted keys by default
    write_json_atomic(str(path), {"c": 3}, durable=True)
    assert json.loads(path.read_text()) == {"c": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    """Serialisation fails half-way (an object JSON cannot encode, after some keys were written): the old
    content stays, whole, and no temporary file is left beside it."""
    path = tmp_path / "summary.json"
    write_json_atomic(str(path), {"ok": True})
    with pytest.raises(TypeError):
        write_json_atomic(str(path), {"a": 1, "z": object()})
    assert json.loads(path.read_text()) == {"ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
