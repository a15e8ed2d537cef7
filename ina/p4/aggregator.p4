/*
 * Statistical in-network aggregation switch for bmv2 simple_switch (P4_16, v1model).
 *
 * The switch rules of ina/aggregator.py, numbered as there, byte for byte: one pool of aggregator
 * slots shared by every job, claimed by the slot index a packet carries, summed lane by lane
 * (int32, wrap-around flagged as OVERFLOW), emitted when the job's fan-in is reached, released by
 * the result on its way back; a packet whose slot another (job, seq) holds falls back to the
 * parameter server (PS) unaggregated. The wire format is ina/protocol.py's HEADER_FIELDS; the
 * malformed checks run in the same order as ina.protocol.decode, so each dropped packet is
 * counted under the same reason. ina/vectors.py holds the scenarios both must pass.
 *
 * Tables (programmed by ina/p4/switch.py through simple_switch_CLI):
 *   ina_config  keyless; default action set_slots(mask): slots in use = mask + 1, a power of two
 *               up to INA_SLOTS (the registers' size, fixed at compile time).
 *   ina_job     job_id -> set_job(fan_in, is_leaf, out_bit, check_members, group): the per-job entry
 *               (rule 3); group, where not 0, the multicast group its results are copied to (rule 2).
 *   ina_member  (job_id, IPv4 source) -> NoAction: the hosts an installed job's packets may come
 *               from (its machines and its PS); with check_members, any other source is dropped
 *               and counted under ST_FOREIGN (rule 1b).
 *   ina_out     direction (0 towards the PS, 1 towards the workers) -> to_port(port) |
 *               to_group(multicast group) | back() (out of the port it came in: the default,
 *               for an aggregator attached one-armed to its ToR).
 *   plain       Ethernet destination -> to_port(port): non-INA traffic; unmatched: dropped and
 *               counted under ST_OTHER.
 *   ina_copy    (egress) replica id -> set_copy(ip, mac): a result's copy addressed to one child of
 *               its job (results multicast, rule 2): each node of a job's multicast group has its
 *               own replica id; the copy's IPv4 checksum is recomputed, its UDP checksum set to 0.
 *
 * Meter `pat` (packets, one cell): the switch's Peak Aggregation Throughput as claims per second
 *   (rule 8a), set with meter_set_rates (rates per microsecond, bursts in packets); never set, it
 *   never refuses.
 *
 * Counters: register `stats`, indexed by the ST_* constants below (ina.aggregator.AggregatorStats'
 * fields in order, then the malformed reasons of ina.protocol.MALFORMED_REASONS, then ST_OTHER);
 * tests/test_ina_p4.py checks the numbering against the Python side. Counters `job_to_ps` and
 * `job_to_workers`, indexed by job id: the packets of each job forwarded in each direction
 * (ina.aggregator.Aggregator.job_traffic), whether the job has an entry here or not.
 */

#include <core.p4>
#include <v1model.p4>

#ifndef INA_SLOTS
#define INA_SLOTS 4096
#endif
/* Value lanes per packet (ina.protocol.VALUES_PER_PACKET unless compiled for another count:
   ina/p4/build.py passes -DLANES=n -DLANES_FILE and an include directory whose ina_lanes.p4
   defines FOR_LANES over lanes 0..n-1). */
#ifndef LANES
#define LANES 32
#endif

const bit<16> INA_UDP_PORT = 18766;
const bit<16> UDP_BYTES = 8;
const bit<16> HEADER_BYTES = 20;
const bit<16> PAYLOAD_BYTES = HEADER_BYTES + LANES * 4;

/* Flag bits (ina.protocol.Flag). */
const bit<8> F_RESULT = 0x01;
const bit<8> F_COLLISION = 0x02;
const bit<8> F_RESEND = 0x04;
const bit<8> F_ECN = 0x08;
const bit<8> F_OVERFLOW = 0x10;
const bit<8> F_PARTIAL = 0x20;
const bit<8> F_RESERVED = 0xC0;
const bit<8> F_KEPT = 0x18;  /* ECN | OVERFLOW: what a slot keeps of its contributions' flags */

/* Slot states (ina.aggregator.SlotState). */
const bit<8> FREE = 0;
const bit<8> AGGREGATING = 1;
const bit<8> COMPLETE = 2;
const bit<8> BYPASS = 3;

/* Counter indexes of the stats register. */
const bit<32> ST_PACKETS = 0;
const bit<32> ST_PASSED = 1;
const bit<32> ST_RESULTS = 2;
const bit<32> ST_RELEASED = 3;
const bit<32> ST_RESENDS = 4;
const bit<32> ST_CLAIMS = 5;
const bit<32> ST_CONTRIBUTIONS = 6;
const bit<32> ST_DUPLICATES = 7;
const bit<32> ST_COLLISIONS = 8;
const bit<32> ST_AGGREGATES = 9;
const bit<32> ST_OVERFLOWS = 10;
const bit<32> ST_FOREIGN = 11;
const bit<32> ST_OVER_PAT = 12;
const bit<32> ST_MALFORMED_TRUNCATED = 13;
const bit<32> ST_MALFORMED_BAD_VERSION = 14;
const bit<32> ST_MALFORMED_RESERVED_BITS = 15;
const bit<32> ST_MALFORMED_BAD_COUNT = 16;
const bit<32> ST_MALFORMED_TRAILING_BYTES = 17;
const bit<32> ST_MALFORMED_BAD_BITMAP = 18;
const bit<32> ST_OTHER = 19;
#define N_STATS 20

/* Directions of ina_out. */
const bit<1> TO_PS = 0;
const bit<1> TO_WORKERS = 1;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<6> dscp;
    bit<2> ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3> frag_flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> checksum;
    bit<32> src;
    bit<32> dst;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* ina.protocol.HEADER_FIELDS, in wire order. */
header ina_t {
    bit<8> version;
    bit<8> flags;
    bit<16> job_id;
    bit<32> seq;
    bit<32> bitmap;
    bit<8> fan_in;
    bit<8> reserved;
    bit<16> slot;
    bit<16> count;
    bit<16> pad;
}

#ifdef LANES_FILE
#include "ina_lanes.p4"
#else
#define FOR_LANES(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31)
#endif

#define DECLARE_LANE(k) bit<32> v##k;
header ina_values_t {
    FOR_LANES(DECLARE_LANE)
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
    udp_t udp;
    ina_t ina;
    ina_values_t values;
}

struct metadata_t {
    bit<1> is_ina;
    bit<16> mask;
    bit<1> installed;
    bit<8> fan_in;
    bit<1> is_leaf;
    bit<8> out_bit;
    bit<1> check_members;
    bit<1> go;   /* 1: the packet leaves through ina_out; 0: dropped (absorbed, duplicate, malformed) */
    bit<1> dir;
    bit<16> group;  /* the job's results multicast group; 0: none */
    bit<1> copied;  /* a result's copy addressed to a child (egress) */
}

parser InaParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 17): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        /* Towards the PS (its port the destination) or a result from it (its port the source). */
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (INA_UDP_PORT, _): parse_ina;
            (_, INA_UDP_PORT): parse_ina;
            default: accept;
        }
    }
    state parse_ina {
        meta.is_ina = 1;
        /* A frame too short for the header stops here with a parser error; the ingress then
           finds hdr.ina invalid and counts the packet as truncated. */
        packet.extract(hdr.ina);
        transition select(hdr.ina.version, hdr.ina.flags & F_RESERVED, hdr.ina.reserved, hdr.ina.pad,
                          hdr.ina.count) {
            (1, 0, 0, 0, LANES): parse_values;
            default: accept;  /* malformed: the ingress names the reason */
        }
    }
    state parse_values {
        packet.extract(hdr.values);
        transition accept;
    }
}

control InaVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control InaIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<64>>(N_STATS) stats;
    register<bit<8>>(INA_SLOTS) slot_state;
    register<bit<48>>(INA_SLOTS) slot_key;  /* job_id << 32 | seq */
    register<bit<32>>(INA_SLOTS) slot_bitmap;
    register<bit<8>>(INA_SLOTS) slot_count;
    register<bit<8>>(INA_SLOTS) slot_flags;
    register<bit<32>>(INA_SLOTS * LANES) slot_values;  /* lane k of slot i at i * LANES + k */
    counter(65536, CounterType.packets) job_to_ps;
    counter(65536, CounterType.packets) job_to_workers;
    /* The switch's Peak Aggregation Throughput, in claims per second (rule 8): a packets meter
       whose rates the control plane sets (meter_set_rates pat 0); never set, every claim is green. */
    meter(32w1, MeterType.packets) pat;

    action count(bit<32> index) {
        bit<64> c;
        stats.read(c, index);
        stats.write(index, c + 1);
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_slots(bit<16> mask) {
        meta.mask = mask;
    }

    table ina_config {
        actions = { set_slots; }
        default_action = set_slots(0);
    }

    action set_job(bit<8> fan_in, bit<1> is_leaf, bit<8> out_bit, bit<1> check_members, bit<16> group) {
        meta.installed = 1;
        meta.fan_in = fan_in;
        meta.is_leaf = is_leaf;
        meta.out_bit = out_bit;
        meta.check_members = check_members;
        meta.group = group;
    }

    action not_installed() {
        meta.installed = 0;
        meta.check_members = 0;
        meta.group = 0;
    }

    table ina_job {
        key = { hdr.ina.job_id: exact; }
        actions = { set_job; not_installed; }
        default_action = not_installed();
        size = 1024;
    }

    table ina_member {
        key = { hdr.ina.job_id: exact; hdr.ipv4.src: exact; }
        actions = { NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    action to_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action to_group(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }

    action back() {
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    table ina_out {
        key = { meta.dir: exact; }
        actions = { to_port; to_group; back; }
        default_action = back();
        size = 2;
    }

    table plain {
        key = { hdr.ethernet.dst: exact; }
        actions = { to_port; drop; }
        default_action = drop();
        size = 256;
    }

    /* Out towards the PS or the workers (ina_out decides the port), unchanged ... */
    action forward(bit<1> dir) {
        meta.go = 1;
        meta.dir = dir;
    }

    /* ... or rewritten by the switch: UDP checksum 0 (none). */
    action forward_rewritten(bit<1> dir) {
        meta.go = 1;
        meta.dir = dir;
        hdr.udp.checksum = 0;
    }

    apply {
        if (meta.is_ina == 0) {
            if (!plain.apply().hit) {
                count(ST_OTHER);
            }
        } else {
            count(ST_PACKETS);
            /* Rule 1: malformed, checked in ina.protocol.decode's order; lengths from the UDP header. */
            bit<32> malformed = 0;
            if (hdr.udp.length < UDP_BYTES + HEADER_BYTES || !hdr.ina.isValid()) {
                malformed = ST_MALFORMED_TRUNCATED;
            } else if (hdr.ina.version != 1) {
                malformed = ST_MALFORMED_BAD_VERSION;
            } else if (hdr.ina.flags & F_RESERVED != 0 || hdr.ina.reserved != 0 || hdr.ina.pad != 0) {
                malformed = ST_MALFORMED_RESERVED_BITS;
            } else if (hdr.ina.count != LANES) {
                malformed = ST_MALFORMED_BAD_COUNT;
            } else if (hdr.udp.length < UDP_BYTES + PAYLOAD_BYTES || !hdr.values.isValid()) {
                malformed = ST_MALFORMED_TRUNCATED;
            } else if (hdr.udp.length > UDP_BYTES + PAYLOAD_BYTES) {
                malformed = ST_MALFORMED_TRAILING_BYTES;
            }
            if (malformed != 0) {
                count(malformed);
            } else {
                ina_config.apply();
                bit<32> i = (bit<32>)(hdr.ina.slot & meta.mask);
                bit<48> key = hdr.ina.job_id ++ hdr.ina.seq;
                bit<8> state;
                bit<48> held_key;
                slot_state.read(state, i);
                slot_key.read(held_key, i);
                bool holds = state != FREE && held_key == key;
                ina_job.apply();
                bool foreign = false;
                if (meta.installed == 1 && meta.check_members == 1) {
                    foreign = !ina_member.apply().hit;
                }
                if (foreign) {
                    /* Rule 1b: an installed job's packet from a host outside it. */
                    count(ST_FOREIGN);
                } else if (hdr.ina.flags & F_RESULT != 0) {
                    /* Rule 2: a result frees the slot holding its (job, seq), goes to the workers
                       (copied to the job's children where it has a multicast group). */
                    if (holds) {
                        slot_state.write(i, FREE);
                        count(ST_RELEASED);
                    }
                    count(ST_RESULTS);
                    forward(TO_WORKERS);
                } else if (meta.installed == 0) {
                    /* Rule 3: a job without an entry passes unchanged. */
                    count(ST_PASSED);
                    forward(TO_PS);
                } else {
                    /* Rule 4: congestion seen on the way is kept in the flags. */
                    if (hdr.ipv4.ecn == 3) {
                        hdr.ina.flags = hdr.ina.flags | F_ECN;
                    }
                    bit<32> bitmap = hdr.ina.bitmap;
                    if (hdr.ina.flags & F_RESEND != 0) {
                        /* Rule 5: resends go to the PS, which answers them. */
                        count(ST_RESENDS);
                        forward_rewritten(TO_PS);
                    } else if (hdr.ina.flags & F_COLLISION != 0) {
                        /* Rule 6: fell back at a lower switch. */
                        count(ST_PASSED);
                        forward_rewritten(TO_PS);
                    } else if (bitmap == 0 || bitmap & (bitmap - 1) != 0) {
                        /* Rule 7: every contribution is one child's: exactly one bit. */
                        count(ST_MALFORMED_BAD_BITMAP);
                    } else {
                        bit<32> held_bitmap;
                        bit<8> held_count;
                        bit<8> held_flags;
                        slot_bitmap.read(held_bitmap, i);
                        slot_count.read(held_count, i);
                        slot_flags.read(held_flags, i);
                        bit<32> base = i * LANES;
                        bool contributed = false;
                        bit<2> color = 0;
                        if (state == FREE) {
                            pat.execute_meter<bit<2>>(0, color);
                        }
                        if (state == FREE && color != 0) {
                            /* Rule 8a: beyond the PAT: the slot is held BYPASS for this (job, seq),
                               whose packets fall back (rule 11) until its result frees it. */
                            slot_state.write(i, BYPASS);
                            slot_key.write(i, key);
                            slot_bitmap.write(i, 0);
                            hdr.ina.flags = hdr.ina.flags | F_COLLISION;
                            count(ST_OVER_PAT);
                            count(ST_COLLISIONS);
                            forward_rewritten(TO_PS);
                        } else if (state == FREE) {
                            /* Rule 8: claim the slot with this packet's values. */
#define CLAIM_LANE(k) slot_values.write(base + k, hdr.values.v##k);
                            FOR_LANES(CLAIM_LANE)
                            slot_state.write(i, AGGREGATING);
                            slot_key.write(i, key);
                            held_bitmap = bitmap;
                            held_count = 1;
                            held_flags = hdr.ina.flags & F_KEPT;
                            count(ST_CLAIMS);
                            contributed = true;
                        } else if (holds && bitmap & held_bitmap != 0) {
                            /* Rule 9: this child's contribution is already in. */
                            count(ST_DUPLICATES);
                        } else if (holds && state == AGGREGATING) {
                            /* Rule 10: add lane by lane; the packet carries the sums from here on. */
                            bit<32> wrapped = 0;
                            bit<32> acc;
                            bit<32> sum;
#define ADD_LANE(k) slot_values.read(acc, base + k); \
                            sum = acc + hdr.values.v##k; \
                            wrapped = wrapped | (((acc ^ sum) & (hdr.values.v##k ^ sum)) >> 31); \
                            slot_values.write(base + k, sum); \
                            hdr.values.v##k = sum;
                            FOR_LANES(ADD_LANE)
                            held_bitmap = held_bitmap | bitmap;
                            held_count = held_count + 1;
                            held_flags = held_flags | (hdr.ina.flags & F_KEPT);
                            if (wrapped != 0) {
                                held_flags = held_flags | F_OVERFLOW;
                            }
                            contributed = true;
                        } else {
                            /* Rule 11: held by another (job, seq), or completed at the root: fall back. */
                            hdr.ina.flags = hdr.ina.flags | F_COLLISION;
                            count(ST_COLLISIONS);
                            forward_rewritten(TO_PS);
                        }
                        if (contributed) {
                            count(ST_CONTRIBUTIONS);
                            slot_bitmap.write(i, held_bitmap);
                            slot_count.write(i, held_count);
                            slot_flags.write(i, held_flags);
                            /* Rule 12: complete: the packet becomes the aggregate; else it is absorbed. */
                            if (held_count >= meta.fan_in) {
                                hdr.ina.flags = F_PARTIAL | held_flags;
                                hdr.ina.fan_in = meta.fan_in;
                                if (meta.is_leaf == 1) {
                                    hdr.ina.bitmap = (bit<32>)1 << meta.out_bit;
                                    slot_state.write(i, FREE);
                                } else {
                                    hdr.ina.bitmap = held_bitmap;
                                    slot_state.write(i, COMPLETE);
                                }
                                count(ST_AGGREGATES);
                                if (held_flags & F_OVERFLOW != 0) {
                                    count(ST_OVERFLOWS);
                                }
                                forward_rewritten(TO_PS);
                            }
                        }
                    }
                }
            }
            if (meta.go == 1) {
                if (meta.dir == TO_PS) {
                    job_to_ps.count((bit<32>)hdr.ina.job_id);
                } else {
                    job_to_workers.count((bit<32>)hdr.ina.job_id);
                }
                if (meta.dir == TO_WORKERS && meta.group != 0) {
                    standard_metadata.mcast_grp = meta.group;
                    hdr.udp.checksum = 0;
                } else {
                    ina_out.apply();
                }
            } else {
                drop();
            }
        }
    }
}

control InaEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action set_copy(bit<32> ip, bit<48> mac) {
        hdr.ipv4.dst = ip;
        hdr.ethernet.dst = mac;
        meta.copied = 1;
    }

    table ina_copy {
        key = { standard_metadata.egress_rid: exact; }
        actions = { set_copy; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    apply {
        if (standard_metadata.egress_rid != 0) {
            ina_copy.apply();
        }
    }
}

control InaComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && meta.copied == 1,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.frag_flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}

control InaDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.ina);
        packet.emit(hdr.values);
    }
}

V1Switch(InaParser(), InaVerifyChecksum(), InaIngress(), InaEgress(), InaComputeChecksum(), InaDeparser()) main;
