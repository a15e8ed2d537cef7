"""Bytes per directed link from the controller's port statistics (measure.linkstats.LinkSeries)."""

from __future__ import annotations

import json

from measure.linkstats import LinkSeries
from topo import fat_tree


def test_each_directed_link_reads_one_counter_and_never_steps_back(tmp_path):
    """A link between two switches is polled at both ends; the series of a direction is the sender's
    transmit counter alone, so bytes over any interval are never negative. A machine's uplink is the
    switch's receive counter."""
    g = fat_tree(4)
    a, c = "a1", "c1"
    h, e = "h1", "e1"
    ports = {(a, c): g.edges[a, c]["ports"], (h, e): g.edges[h, e]["ports"]}
    rows = []
    for i in range(6):
        t = float(i)
        # a1 -> c1 sends 1000 B/s; c1 has received 40 B less (in flight) and a1 has received 500 B/s from c1
        rows.append({"t": t, "dpid": g.nodes[a]["dpid"], "port": ports[(a, c)][a], "tx_bytes": 1000 * i,
                     "rx_bytes": 500 * i})
        rows.append({"t": t + 0.01, "dpid": g.nodes[c]["dpid"], "port": ports[(a, c)][c],
                     "tx_bytes": max(0, 500 * i - 20), "rx_bytes": max(0, 1000 * i - 40)})
        rows.append({"t": t, "dpid": g.nodes[e]["dpid"], "port": ports[(h, e)][e], "tx_bytes": 0, "rx_bytes": 300 * i})
    path = tmp_path / "port_stats.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = LinkSeries(g, str(path))
    assert s.samples[(a, c)][1] == [1000 * i for i in range(6)]          # a1's transmit counter only
    assert s.samples[(c, a)][1] == [max(0, 500 * i - 20) for i in range(6)]  # c1's transmit counter only
    assert s.bytes_between((h, e), 1.0, 3.0) == 600                       # e1's receive counter
    for link in ((a, c), (c, a)):
        for t0 in (0.2, 1.005, 2.5):
            assert s.bytes_between(link, t0, t0 + 0.01) >= 0
