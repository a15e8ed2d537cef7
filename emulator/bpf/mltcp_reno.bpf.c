// MLTCP-Reno: TCP Reno whose additive increase is scaled by how far the flow is through its
// training iteration's bytes (MLTCP, docs/resolutions.md Cassini §6.1, §6.4 3.), as BPF struct_ops.
//
//   cwnd <- cwnd + F(bytes_ratio) * (Reno's per-ACK increase),  F = slope * bytes_ratio + intercept
//
// bytes_ratio, the idle-gap rule, the parameters (map mltcp_cfg) and the counters (map
// mltcp_stats) are every variant's: mltcp_common.h. Slow start, the multiplicative decrease on
// loss or ECN-Echo (halving), and undo are Reno's. Per-flow state lives in the socket's
// congestion-control private area (struct reno_ca, within ICSK_CA_PRIV_SIZE).
#include "mltcp_common.h"

char _license[] SEC("license") = "GPL";

struct reno_ca {
	struct mltcp_flow flow;
	__u32 cnt_milli;  // Reno's snd_cwnd_cnt, in thousandths of an ACKed segment
};

_Static_assert(sizeof(struct reno_ca) <= MLTCP_PRIV_SIZE, "MLTCP-Reno's state exceeds ICSK_CA_PRIV_SIZE");

SEC("struct_ops")
void BPF_PROG(mltcp_init, struct sock *sk) {
	struct reno_ca *ca = ca_priv(sk);
	mltcp_flow_init(&ca->flow, tcp_sk(sk));
	ca->cnt_milli = 0;
}

SEC("struct_ops")
void BPF_PROG(mltcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev) {
	if (ev != CA_EVENT_TX_START)
		return;
	struct reno_ca *ca = ca_priv(sk);
	mltcp_flow_tx_start(&ca->flow, tcp_sk(sk));
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
	struct reno_ca *ca = ca_priv(sk);
	mltcp_flow_ack(&ca->flow, tp);
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		__u32 next = tp->snd_cwnd + acked;
		tp->snd_cwnd = next < tp->snd_cwnd_clamp ? next : tp->snd_cwnd_clamp;
		return;
	}
	ca->cnt_milli += acked * mltcp_factor_milli(&ca->flow, tp);
	if (ca->cnt_milli >= tp->snd_cwnd * 1000) {
		ca->cnt_milli -= tp->snd_cwnd * 1000;
		if (tp->snd_cwnd < tp->snd_cwnd_clamp)
			tp->snd_cwnd++;
	}
}

SEC("struct_ops")
__u32 BPF_PROG(mltcp_undo_cwnd, struct sock *sk) {
	return mltcp_undone_cwnd(tcp_sk(sk));
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
