"""In-network aggregation (INA): the wire protocol and a software switch engine.

Statistical INA as in ATP (Lao et al., NSDI '21) and NetPack (ASPLOS '24, spec §1.4): a
switch's aggregator memory is one pool of slots shared by every job, a slot is claimed per
packet by ``(job_id, seq)`` and released when the result passes back, and a packet whose slot
is held by another ``(job_id, seq)`` falls back, unaggregated, to the job's parameter server.

Modules:

- :mod:`ina.protocol`: the INA header, declared once as a field table, its struct codec, the
  slot hash and the float <-> int32 conversion of the worker side.
- :mod:`ina.aggregator`: :class:`~ina.aggregator.Aggregator`, the switch state machine (numbered rules
  a P4_16 v1model program mirrors), and :class:`~ina.aggregator.ParameterServer`, which finishes
  what the switches could not and answers with the result.
- :mod:`ina.vectors`: test vectors generated from the state machine and stored as a data file
  (``vectors.json``), so the P4 program is checked against exactly the same bytes.
- :mod:`ina.scapy_layer`: a Scapy layer built from the same field table, for reading captures.
  It is the only module that imports Scapy; everything else is standard library only.
"""
