// What every MLTCP variant shares (docs/resolutions.md Cassini §6.1, §6.4): its parameters, its
// counters, a flow's iteration accounting and the scaling factor
//
//   F(bytes_ratio) = slope * bytes_ratio + intercept     (in thousandths)
//
// bytes_ratio = bytes acknowledged since the flow's iteration started / the flow's bytes of its
// last iteration (learned, §6.4 1.), capped at 1; 0 in a flow's first iteration. An iteration
// starts when the flow transmits again after being idle (CA_EVENT_TX_START: nothing in flight)
// for longer than the idle gap since its last ACK (§6.4 2., the idle-gap rule).
//
// Each variant's object has its own maps (the run finds them through the programs of the
// struct_ops it registered): mltcp_cfg, one struct mltcp_cfg written by the run after
// registration, and mltcp_stats, counters over every flow of that variant. Its per-flow state
// begins with a struct mltcp_flow, inside the socket's congestion-control private area.
#ifndef MLTCP_COMMON_H
#define MLTCP_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct mltcp_cfg {
	__u32 slope_milli;
	__u32 intercept_milli;
	__u32 gap_us;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mltcp_cfg);
} mltcp_cfg SEC(".maps");

// Counters over every flow: [0] iterations started, [1] ACKs growing the window in congestion
// avoidance, [2] of them with F above the intercept (a flow past the start of a learned
// iteration), [3] sum of F (milli) over those ACKs.
enum { MLTCP_ITERATIONS, MLTCP_CA_ACKS, MLTCP_CA_ACKS_ABOVE, MLTCP_F_SUM_MILLI, MLTCP_N_STATS };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MLTCP_N_STATS);
	__type(key, __u32);
	__type(value, __u64);
} mltcp_stats SEC(".maps");

// A flow's iteration accounting, the first member of every variant's private state.
struct mltcp_flow {
	__u64 last_ack_us;     // tcp_mstamp of the last ACK seen
	__u32 iter_start_una;  // snd_una when the flow's current iteration started
	__u32 iter_bytes;      // bytes acknowledged in the flow's last complete iteration (0: none yet)
	__u32 iterations;      // iterations seen
};

// The private area a variant's state must fit in (ICSK_CA_PRIV_SIZE).
#define MLTCP_PRIV_SIZE sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv)

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk) { return (struct tcp_sock *)sk; }
static __always_inline void *ca_priv(const struct sock *sk) {
	return ((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void mltcp_count(__u32 key, __u64 n) {
	__u64 *v = bpf_map_lookup_elem(&mltcp_stats, &key);
	if (v)
		__sync_fetch_and_add(v, n);
}

static __always_inline struct mltcp_cfg *mltcp_config(void) {
	__u32 key = 0;
	return bpf_map_lookup_elem(&mltcp_cfg, &key);
}

static __always_inline void mltcp_flow_init(struct mltcp_flow *fl, const struct tcp_sock *tp) {
	fl->last_ack_us = tp->tcp_mstamp;
	fl->iter_start_una = tp->snd_una;
	fl->iter_bytes = 0;
	fl->iterations = 0;
}

// At CA_EVENT_TX_START: a new iteration if the flow was idle for longer than the gap since its
// last ACK; the bytes of the one that ended become the flow's bytes per iteration.
static __always_inline void mltcp_flow_tx_start(struct mltcp_flow *fl, const struct tcp_sock *tp) {
	struct mltcp_cfg *cfg = mltcp_config();
	__u64 gap = cfg ? cfg->gap_us : 20000;
	if (tp->tcp_mstamp - fl->last_ack_us <= gap)
		return;
	__u32 sent = tp->snd_una - fl->iter_start_una;
	if (sent)
		fl->iter_bytes = sent;
	fl->iter_start_una = tp->snd_una;
	fl->iterations++;
	mltcp_count(MLTCP_ITERATIONS, 1);
}

// On every ACK the variant's cong_avoid sees (the idle gap is measured from the last one).
static __always_inline void mltcp_flow_ack(struct mltcp_flow *fl, const struct tcp_sock *tp) {
	fl->last_ack_us = tp->tcp_mstamp;
}

// F for an ACK that grows the window in congestion avoidance, in thousandths; counted.
static __always_inline __u32 mltcp_factor_milli(const struct mltcp_flow *fl, const struct tcp_sock *tp) {
	struct mltcp_cfg *cfg = mltcp_config();
	__u32 slope = cfg ? cfg->slope_milli : 1000, intercept = cfg ? cfg->intercept_milli : 1000;
	__u64 ratio = 0;  // thousandths
	if (fl->iter_bytes) {
		__u32 done = tp->snd_una - fl->iter_start_una;
		ratio = (__u64)done * 1000 / fl->iter_bytes;
		if (ratio > 1000)
			ratio = 1000;
	}
	__u32 f = intercept + (__u32)((__u64)slope * ratio / 1000);
	mltcp_count(MLTCP_CA_ACKS, 1);
	if (cfg && f > intercept)
		mltcp_count(MLTCP_CA_ACKS_ABOVE, 1);
	mltcp_count(MLTCP_F_SUM_MILLI, f);
	return f;
}

// Reno's (and CUBIC's) undo: the window before the reduction that proved spurious.
static __always_inline __u32 mltcp_undone_cwnd(const struct tcp_sock *tp) {
	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

#endif
