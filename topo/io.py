"""``topology.json``: the topology as a file, the contract between the run's processes.

The run writes the graph once; the controller, the INA engines and the analysis read it back
instead of discovering anything. The format is networkx's node-link JSON
(``networkx.node_link_data(g, edges="links")``): graph attributes under ``"graph"``, nodes in
insertion order under ``"nodes"`` (each ``{"id": name, ...attributes}``), links under ``"links"``
(each ``{"source", "target", ...attributes}``). A hand-written file follows the same schema
(:mod:`topo.schema`) with ``"kind": "file"``.
"""

from __future__ import annotations

import json
import os
import tempfile

import networkx as nx

from common.errors import TopologyError
from topo.schema import validate_topology


def write_topology_json(g: nx.Graph, path: str | os.PathLike) -> None:
    """Validate ``g`` and write it to ``path`` atomically.

    The JSON goes to a temporary file in the same directory, which then replaces ``path``
    (``os.replace``), so a reader never sees a half-written file.

    Raises:
        TopologyError: ``g`` is invalid, or the file cannot be written (the message names the path).
    """
    validate_topology(g)
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


def read_topology_json(path: str | os.PathLike) -> nx.Graph:
    """Load and validate a topology written by :func:`write_topology_json` (or by hand).

    Raises:
        TopologyError: the file is unreadable, not node-link JSON, or breaks the schema; the message
            names the path.
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TopologyError(f"cannot read topology file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise TopologyError(f"topology file {path}: expected a JSON object (node-link data), "
                            f"got {type(data).__name__}")
    try:
        # Explicit defaults: networkx would make a MultiGraph of a hand-written file that omits "multigraph".
        g = nx.node_link_graph(data, directed=False, multigraph=False, edges="links")
    except (KeyError, TypeError, ValueError, AttributeError, nx.NetworkXError) as exc:
        raise TopologyError(f"topology file {path}: not networkx node-link data ({type(exc).__name__}: "
                            f"{exc})") from exc
    try:
        validate_topology(g)
    except TopologyError as exc:
        raise TopologyError(f"topology file {path}: {exc}") from exc
    return g
