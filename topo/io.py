"""``topology.json``: the topology as a file, the contract between the run's processes.

The run writes the graph once; the controller, the INA engines and the analysis read it back
instead of discovering anything. The format is networkx's node-link JSON
(``networkx.node_link_data(g, edges="links")``): graph attributes under ``"graph"``, nodes in
insertion order under ``"nodes"`` (each ``{"id": name, ...attributes}``), links under ``"links"``
(each ``{"source", "target", ...attributes}``). A hand-written file follows the same schema
(:mod:`topo.schema`) with ``"kind": "file"``.

Reading trusts the file no more than a configuration: only a regular file of at most
:data:`MAX_FILE_BYTES` is read (a FIFO would block, ``/dev/zero`` never end), and its node and
link counts are checked against the back end's size limits before a graph is built.
"""

from __future__ import annotations

import json
import os
import tempfile

import networkx as nx

from common.errors import TopologyError
from common.files import UnreadableFile, read_regular_file
from topo.schema import EMULATOR_LIMITS, SizeLimits, check_size, validate_topology

MAX_FILE_BYTES = 16 << 20  # a topology at the simulator's size limits takes about 12 MiB, the emulator's 3 MiB


def write_topology_json(g: nx.Graph, path: str | os.PathLike, limits: SizeLimits = EMULATOR_LIMITS) -> None:
    """Validate ``g`` (within ``limits``, the back end's) and write it to ``path`` atomically.

    The JSON goes to a temporary file in the same directory, which then replaces ``path``
    (``os.replace``), so a reader never sees a half-written file.

    Raises:
        TopologyError: ``g`` is invalid, or the file cannot be written (the message names the path).
    """
    validate_topology(g, limits)
    path = os.fspath(path)
    data = nx.node_link_data(g, edges="links")
    directory = os.path.dirname(os.path.abspath(path))
    tmp_path = None
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory, delete=False,
                                         prefix=f".{os.path.basename(path)}.", suffix=".tmp") as tmp:
            tmp_path = tmp.name
            json.dump(data, tmp, indent=1, allow_nan=False)
            tmp.write("\n")
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_path, path)
    except (OSError, TypeError, ValueError) as exc:
        if tmp_path is not None and os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise TopologyError(f"cannot write topology file {path}: {exc}") from exc


def read_topology_json(path: str | os.PathLike, limits: SizeLimits = EMULATOR_LIMITS) -> nx.Graph:
    """Load and validate a topology written by :func:`write_topology_json` (or by hand).

    Args:
        path: the file.
        limits: the largest topology the back end takes (:class:`topo.schema.SizeLimits`).

    Raises:
        TopologyError: the file is unreadable, not a regular file, larger than
            :data:`MAX_FILE_BYTES`, not UTF-8 JSON, not node-link data, larger than ``limits``
            allow, or breaks the schema; the message is one line and names the path.
    """
    path = os.fspath(path)
    text = _read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TopologyError(f"cannot read topology file {path}: not JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer of > 4300 digits; nesting deeper than the stack
        raise TopologyError(f"cannot read topology file {path}: not usable JSON: {type(exc).__name__}: "
                            f"{str(exc)[:160]}") from None
    if not isinstance(data, dict):
        raise TopologyError(f"topology file {path}: expected a JSON object (node-link data), "
                            f"got {type(data).__name__}")
    nodes = data["nodes"] if isinstance(data.get("nodes"), list) else []
    links = data["links"] if isinstance(data.get("links"), list) else []
    n_machines = sum(1 for n in nodes if isinstance(n, dict) and n.get("role") == "machine")
    try:
        check_size("the topology", n_machines, len(nodes) - n_machines, len(links), limits)
    except TopologyError as exc:
        raise TopologyError(f"topology file {path}: {exc}") from None
    try:
        # Explicit defaults: networkx would make a MultiGraph of a hand-written file that omits "multigraph".
        g = nx.node_link_graph(data, directed=False, multigraph=False, edges="links")
    except (KeyError, TypeError, ValueError, AttributeError, nx.NetworkXError) as exc:
        raise TopologyError(f"topology file {path}: not networkx node-link data ({type(exc).__name__}: "
                            f"{exc})") from exc
    try:
        validate_topology(g, limits)
    except TopologyError as exc:
        raise TopologyError(f"topology file {path}: {exc}") from exc
    return g


def _read_text(path: str) -> str:
    """The UTF-8 text of the regular file ``path``, of at most :data:`MAX_FILE_BYTES`
    (:func:`common.files.read_regular_file`: a FIFO or a device is never opened)."""
    try:
        data = read_regular_file(path, MAX_FILE_BYTES)
    except UnreadableFile as exc:
        raise TopologyError(f"cannot read topology file {path}: {exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TopologyError(f"cannot read topology file {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} "
                            f"at offset {exc.start})") from None


