"""A Scapy layer for INA packets, built from :data:`ina.protocol.HEADER_FIELDS`, for reading captures.

``Ether() / IP() / UDP() / Ina(...)`` builds a packet and ``rdpcap`` dissects one: the layer is
bound to UDP port :data:`~ina.protocol.INA_UDP_PORT` (the destination towards the PS, the source
of results). Field names, widths and order
come from the protocol's field table, so this layer cannot drift from the codec; the values are a
list of signed 32-bit integers whose length is the ``count`` field (any values per packet; built
without a ``count``, it is the number of values given). Anything after them is Scapy padding.

This is the only module of :mod:`ina` that imports Scapy (the worker's and the switch's paths
use the struct codec of :mod:`ina.protocol`).
"""

from __future__ import annotations

from scapy.fields import (
    BitField,
    ByteField,
    FieldLenField,
    FieldListField,
    FlagsField,
    IntField,
    ShortField,
    SignedIntField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_bottom_up, bind_layers

from ina.protocol import HEADER_FIELDS, INA_UDP_PORT, MAX_VALUES_PER_PACKET, Flag

_UINT_FIELDS = {8: ByteField, 16: ShortField, 32: IntField}
FLAG_NAMES = [Flag(1 << bit).name if bit < len(Flag) else f"RSV{bit}" for bit in range(8)]
"""Flag bit names, least significant first, as Scapy's ``FlagsField`` wants them."""


def _scapy_field(field):
    default = field.default if field.default is not None else 0
    if field.kind == "flags":
        return FlagsField(field.name, default, field.bits, FLAG_NAMES)
    if field.name == "count":
        return FieldLenField(field.name, None, count_of="values", fmt="H")
    make = _UINT_FIELDS.get(field.bits)
    return make(field.name, default) if make else BitField(field.name, default, field.bits)


class Ina(Packet):
    """The INA header and its int32 values (see :mod:`ina.protocol`)."""

    name = "INA"
    fields_desc = [_scapy_field(f) for f in HEADER_FIELDS] + [
        FieldListField("values", [], SignedIntField("value", 0), count_from=lambda pkt: pkt.count,
                       max_count=MAX_VALUES_PER_PACKET),  # Scapy's default limit of a list is 100
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        """Nothing follows the values: the rest is padding."""
        return b"", s


bind_layers(UDP, Ina, dport=INA_UDP_PORT)  # built packets go to the PS
bind_bottom_up(UDP, Ina, sport=INA_UDP_PORT)  # dissected results, from the PS to a worker's port
