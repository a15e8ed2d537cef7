// MLTCP-Reno: TCP Reno whose additive increase is scaled by how far the flow is through its
// training iteration's bytes (MLTCP, shared/specs/cassini.md §6.1, §6.4), as BPF struct_ops.
//
//   cwnd <- cwnd + F(bytes_ratio) * (Reno's per-ACK increase),  F = slope * bytes_ratio + intercept
//
// bytes_ratio = bytes acknowledged since the flow's iteration started / the flow's bytes of its
// last iteration (learned, §6.4 1.), capped at 1; 0 in a flow's first iteration. An iteration
// starts when the flow transmits again after being idle (CA_EVENT_TX_START: nothing in flight)
// for longer than the idle gap since its last ACK (§6.4 2., the idle-gap rule). Slow start,
// the multiplicative decrease on loss or ECN-Echo, and undo are Reno's.
//
// The parameters are in the one-entry array map mltcp_cfg (struct mltcp_cfg), set by the run
// after registration; F is computed in thousandths. Per-flow state lives in the socket's
// congestion-control private area (struct mltcp, within ICSK_CA_PRIV_SIZE).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

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

// Counters over every flow: [0] iterations started, [1] ACKs in congestion avoidance, [2] of them
// with F above the intercept (a flow past the start of a learned iteration), [3] sum of F (milli).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} mltcp_stats SEC(".maps");

static inline void count(__u32 key, __u64 n) {
	__u64 *v = bpf_map_lookup_elem(&mltcp_stats, &key);
	if (v)
		__sync_fetch_and_add(v, n);
}

struct mltcp {
	__u64 last_ack_us;     // tcp_mstamp of the last ACK seen
	__u32 iter_start_una;  // snd_una when the flow's current iteration started
	__u32 iter_bytes;      // bytes acknowledged in the flow's last complete iteration (0: none yet)
	__u32 cnt_milli;       // Reno's snd_cwnd_cnt, in thousandths of an ACKed segment
	__u32 iterations;      // iterations seen (for tests and counters)
};

static inline struct tcp_sock *tcp_sk(const struct sock *sk) { return (struct tcp_sock *)sk; }
static inline struct mltcp *ca_of(const struct sock *sk) {
	return (struct mltcp *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __u32 f_milli(const struct tcp_sock *tp, const struct mltcp *ca) {
	__u32 key = 0;
	struct mltcp_cfg *cfg = bpf_map_lookup_elem(&mltcp_cfg, &key);
	__u32 slope = cfg ? cfg->slope_milli : 1000, intercept = cfg ? cfg->intercept_milli : 1000;
	__u64 ratio = 0;  // thousandths
	if (ca->iter_bytes) {
		__u32 done = tp->snd_una - ca->iter_start_una;
		ratio = (__u64)done * 1000 / ca->iter_bytes;
		if (ratio > 1000)
			ratio = 1000;
	}
	return intercept + (__u32)((__u64)slope * ratio / 1000);
}

SEC("struct_ops")
void BPF_PROG(mltcp_init, struct sock *sk) {
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp *ca = ca_of(sk);
	ca->last_ack_us = tp->tcp_mstamp;
	ca->iter_start_una = tp->snd_una;
	ca->iter_bytes = 0;
	ca->cnt_milli = 0;
	ca->iterations = 0;
}

SEC("struct_ops")
void BPF_PROG(mltcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev) {
	if (ev != CA_EVENT_TX_START)
		return;
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp *ca = ca_of(sk);
	__u32 key = 0;
	struct mltcp_cfg *cfg = bpf_map_lookup_elem(&mltcp_cfg, &key);
	__u64 gap = cfg ? cfg->gap_us : 20000;
	if (tp->tcp_mstamp - ca->last_ack_us <= gap)
		return;
	__u32 sent = tp->snd_una - ca->iter_start_una;
	if (sent)
		ca->iter_bytes = sent;
	ca->iter_start_una = tp->snd_una;
	ca->iterations++;
	count(0, 1);
}

SEC("struct_ops")
__u32 BPF_PROG(mltcp_ssthresh, struct sock *sk) {
	const struct tcp_sock *tp = tcp_sk(sk);
	__u32 half = tp->snd_cwnd >> 1;
	return half > 2 ? half : 2;
}

SEC("struct_ops")
void BPF_PROG(mltcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) {
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp *ca = ca_of(sk);
	ca->last_ack_us = tp->tcp_mstamp;
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		__u32 next = tp->snd_cwnd + acked;
		tp->snd_cwnd = next < tp->snd_cwnd_clamp ? next : tp->snd_cwnd_clamp;
		return;
	}
	__u32 f = f_milli(tp, ca);
	__u32 key = 0;
	struct mltcp_cfg *cfg = bpf_map_lookup_elem(&mltcp_cfg, &key);
	count(1, 1);
	if (cfg && f > cfg->intercept_milli)
		count(2, 1);
	count(3, f);
	ca->cnt_milli += acked * f;
	if (ca->cnt_milli >= tp->snd_cwnd * 1000) {
		ca->cnt_milli -= tp->snd_cwnd * 1000;
		if (tp->snd_cwnd < tp->snd_cwnd_clamp)
			tp->snd_cwnd++;
	}
}

SEC("struct_ops")
__u32 BPF_PROG(mltcp_undo_cwnd, struct sock *sk) {
	const struct tcp_sock *tp = tcp_sk(sk);
	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops mltcp_reno = {
	.init = (void *)mltcp_init,
	.cwnd_event = (void *)mltcp_cwnd_event,
	.ssthresh = (void *)mltcp_ssthresh,
	.cong_avoid = (void *)mltcp_cong_avoid,
	.undo_cwnd = (void *)mltcp_undo_cwnd,
	.name = "mltcp_reno",
};
