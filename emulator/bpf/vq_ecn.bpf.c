// SPDX-License-Identifier: GPL-2.0
/*
 * Virtual-queue ECN marker for the egress (clsact) hook of emulated switch ports.
 *
 * Each port keeps a virtual queue drained at the port's configured rate: a packet of L bytes
 * arriving at time t finds a virtual backlog of V = max(0, busy_until - t) nanoseconds, and
 * extends busy_until by L / rate. The port's shaper is a token bucket of depth B, whose real
 * queue is the virtual backlog beyond the bucket: Q = max(0, V - B). When Q exceeds the
 * port's threshold K, an ECN-capable
 * IPv4 packet (ECT(0) or ECT(1)) is marked CE, as a DCTCP-style switch marks on the
 * instantaneous queue. With a second threshold K_max > K the marking probability rises
 * linearly from 0 at K to max_p at K_max (WRED on the instantaneous queue), and every
 * ECN-capable packet above K_max is marked. A packet that would not fit in the real FIFO below (limit_ns, the
 * FIFO's size at line rate) is not added to the virtual queue, as the FIFO tail-drops it.
 * Packets already CE are left alone, so a packet is marked at most once along its path.
 *
 * Maps (one program and one set of maps shared by every port, keyed by ifindex):
 *   port_cfg   ifindex -> rate, thresholds, max_p, limit  (written by the testbed)
 *   port_stats ifindex -> virtual queue and counters      (read by the testbed)
 *   flow_stats (ifindex, IPv4 4-tuple) -> packets, bytes, marks of TCP/UDP flows
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct port_cfg {
	__u64 rate_bytes_per_s;
	__u64 threshold_ns;      /* K: no mark at or below this virtual backlog */
	__u64 max_threshold_ns;  /* K_max >= K: every ECN-capable packet above it is marked */
	__u64 max_p;             /* marking probability at K_max, as a fraction of 2^32 */
	__u64 limit_ns;          /* the real FIFO's size at line rate; 0 for unbounded */
	__u64 burst_ns;          /* the shaper's token bucket depth at line rate */
};

struct port_stats {
	struct bpf_spin_lock lock;
	__u64 busy_until_ns;   /* virtual queue drains completely at this time */
	__u64 pkts;            /* packets seen at egress */
	__u64 bytes;           /* their bytes (L2, as the shaper counts them) */
	__u64 ect_pkts;        /* IPv4 packets that were ECN-capable (ECT(0), ECT(1)) on arrival */
	__u64 marks;           /* packets this port marked CE */
	__u64 over_not_ect;    /* packets above the threshold that could not be marked */
	__u64 vq_drops;        /* packets the real FIFO would have tail-dropped */
	__u64 max_backlog_ns;  /* largest queue (virtual backlog beyond the bucket) seen by an arriving packet */
};

struct flow_key {
	__u32 ifindex;
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
};

struct flow_stats {
	__u64 pkts;
	__u64 bytes;
	__u64 marks;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct port_cfg);
} port_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct port_stats);
} port_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, struct flow_stats);
} flow_stats SEC(".maps");

static __always_inline void count_flow(struct __sk_buff *skb, struct iphdr *ip, void *end, int marked)
{
	struct flow_key key = {};
	struct flow_stats zero = {}, *fs;

	if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP)
		return;
	if (ip->ihl != 5)
		return;
	__u16 *ports = (void *)(ip + 1);
	if ((void *)(ports + 2) > end)
		return;
	key.ifindex = skb->ifindex;
	key.saddr = ip->saddr;
	key.daddr = ip->daddr;
	key.sport = bpf_ntohs(ports[0]);
	key.dport = bpf_ntohs(ports[1]);
	fs = bpf_map_lookup_elem(&flow_stats, &key);
	if (!fs) {
		bpf_map_update_elem(&flow_stats, &key, &zero, BPF_NOEXIST);
		fs = bpf_map_lookup_elem(&flow_stats, &key);
		if (!fs)
			return;
	}
	__sync_fetch_and_add(&fs->pkts, 1);
	__sync_fetch_and_add(&fs->bytes, skb->len);
	if (marked)
		__sync_fetch_and_add(&fs->marks, 1);
}

SEC("tc")
int vq_ecn(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct port_cfg *cfg = bpf_map_lookup_elem(&port_cfg, &ifindex);
	struct port_stats *st = bpf_map_lookup_elem(&port_stats, &ifindex);

	if (!cfg || !st || cfg->rate_bytes_per_s == 0)
		return TC_ACT_OK;

	__u64 now = bpf_ktime_get_ns();
	__u64 tx_ns = (__u64)skb->len * 1000000000ULL / cfg->rate_bytes_per_s;
	__u64 backlog_ns;

	bpf_spin_lock(&st->lock);
	__u64 virtual_ns = st->busy_until_ns > now ? st->busy_until_ns - now : 0;
	backlog_ns = virtual_ns > cfg->burst_ns ? virtual_ns - cfg->burst_ns : 0;
	if (cfg->limit_ns && backlog_ns + tx_ns > cfg->limit_ns) {
		st->vq_drops++;
	} else {
		st->busy_until_ns = now + virtual_ns + tx_ns;
	}
	if (backlog_ns > st->max_backlog_ns)
		st->max_backlog_ns = backlog_ns;
	st->pkts++;
	st->bytes += skb->len;
	bpf_spin_unlock(&st->lock);

	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return TC_ACT_OK;

	__u8 ecn = ip->tos & 3;
	int mark = 0, over = 0;
	if (ecn == 1 || ecn == 2)
		__sync_fetch_and_add(&st->ect_pkts, 1);
	if (backlog_ns > cfg->max_threshold_ns) {
		over = 1;
	} else if (backlog_ns > cfg->threshold_ns) {
		/* linear ramp: P(mark) = max_p * (backlog - K) / (K_max - K) */
		__u64 span = cfg->max_threshold_ns - cfg->threshold_ns;
		__u64 p = cfg->max_p * (backlog_ns - cfg->threshold_ns) / span;
		over = (__u64)bpf_get_prandom_u32() < p;
	}
	if (over) {
		if (ecn == 1 || ecn == 2)
			mark = 1;
		else if (ecn == 0)
			__sync_fetch_and_add(&st->over_not_ect, 1);
	}
	count_flow(skb, ip, end, mark);
	if (!mark)
		return TC_ACT_OK;

	/* Set CE in the TOS byte and fix the IPv4 header checksum over the 16-bit word holding it. */
	__u16 old_word = *(__u16 *)ip;
	__u8 new_tos = ip->tos | 3;
	__u16 new_word = old_word;
	((__u8 *)&new_word)[1] = new_tos;
	bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), old_word, new_word, 2);
	bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct iphdr, tos), &new_tos, 1, 0);
	__sync_fetch_and_add(&st->marks, 1);
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
