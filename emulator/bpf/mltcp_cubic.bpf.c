// MLTCP-CUBIC: TCP CUBIC (RFC 9438) whose window growth is scaled by how far the flow is through
// its training iteration's bytes (MLTCP, docs/resolutions.md Cassini §6.1, §6.4 3.), as BPF struct_ops.
// bytes_ratio, F = slope * bytes_ratio + intercept, the idle-gap rule, the parameters (map
// mltcp_cfg) and the counters (map mltcp_stats) are every variant's: mltcp_common.h.
//
// [R] Where F applies (spec §6.4 3. "multiply the window-growth increment"; §9 #21: the thesis's
// per-variant code is missing). In congestion avoidance CUBIC grows cwnd by one segment every
// `cnt` ACKed segments, cnt = cwnd / (target - cwnd) with target the larger of W_cubic(t + RTT)
// and the Reno-friendly estimate W_est (RFC 9438 §4.2-4.3). MLTCP-CUBIC weighs every ACKed
// segment by F in both places:
//   - cwnd: +F/cnt segments per ACKed segment (the per-ACK increment times F, i.e. cnt divided by
//     F), so cwnd approaches its target F times faster. CUBIC's bound cnt >= 2 (at most 1.5x per
//     RTT) applies before F, as Reno's increase is scaled with no bound in MLTCP-Reno;
//   - W_est: grows F times Reno-friendly's alpha (3(1 - beta)/(1 + beta) segments per RTT), so in
//     the Reno-friendly region, where the emulator's small windows mostly are, the flow grows
//     as MLTCP-Reno with CUBIC's beta.
// Unchanged from CUBIC: the curve (C = 0.4, K from W_max), the multiplicative decrease to
// beta = 0.7 on loss or ECN-Echo with fast convergence, the epoch shifted over idle time, the
// reset after a retransmission timeout, undo, and slow start (F applies to neither decrease nor
// slow start, as in MLTCP-Reno). HyStart is off: slow start ends at ssthresh or the first loss
// or ECN-Echo, as MLTCP-Reno's does (the kernel's `cubic` has HyStart on).
//
// Differences from the kernel's tcp_cubic.c that do not change the curve: time in microseconds
// from tcp_mstamp (not jiffies); the RTT added to t is the socket's minimum RTT (tcp_min_rtt);
// the idle time the epoch is shifted by runs from the flow's last ACK (the kernel's from its last
// send, up to an RTT earlier); the cube root is exact (bit by bit, no table).
#include "mltcp_common.h"

char _license[] SEC("license") = "GPL";

#define BETA_SCALE 1024
#define BETA 717                                   // beta = 717/1024 = 0.7 (RFC 9438 §4.6)
#define FRIENDLY_ACKS_X8 (8 * (BETA_SCALE + BETA) / 3 / (BETA_SCALE - BETA))  // 8/alpha: ACKs per W_est + 1, x8
#define CUBIC_HZ 10                                // curve time in 1/1024 s
#define C_SCALED 410                               // C = 0.4 as 410/1024 (bic_scale 41 x 10)
#define CUBE_FACTOR ((1ULL << (10 + 3 * CUBIC_HZ)) / C_SCALED)  // K^3 = CUBE_FACTOR x (W_max - cwnd)
#define MAX_OFFSET (1ULL << 17)                    // |t - K| bound (128 s): C x offset^3 fits in 64 bits
#define RECOMPUTE_US 31250                         // recompute cnt at least every 1/32 s at a constant cwnd
#define USEC_PER_SEC 1000000ULL

struct cubic {
	__u32 cnt;             // ACKed segments per +1 segment of cwnd, before F
	__u32 last_max_cwnd;   // W_max (0: no decrease yet)
	__u32 last_cwnd;       // cwnd when cnt was last computed
	__u32 last_time_us;    // when cnt was last computed
	__u32 origin;          // the curve's plateau, segments
	__u32 k;               // from the epoch's start to the plateau, 1/1024 s
	__u32 epoch_start_us;  // 0: no epoch (after a decrease, or at the start)
	__u32 tcp_cwnd;        // W_est, segments
	__u64 ack_milli;       // F-weighted ACKed segments toward W_est's next segment, thousandths
	__u64 credit_milli;    // F-weighted ACKed segments toward cwnd's next segment, thousandths
};

struct cubic_ca {
	struct mltcp_flow flow;
	struct cubic c;
};

_Static_assert(sizeof(struct cubic_ca) <= MLTCP_PRIV_SIZE, "MLTCP-CUBIC's state exceeds ICSK_CA_PRIV_SIZE");

static __always_inline __u32 now_us(const struct tcp_sock *tp) { return (__u32)tp->tcp_mstamp; }

static __always_inline __u32 min_rtt_us(const struct tcp_sock *tp) {
	__u32 rtt = tp->rtt_min.s[0].v;  // tcp_min_rtt(); ~0 before the first sample
	return rtt == ~0U ? 0 : rtt;
}

static __always_inline void cubic_reset(struct cubic *c) { __builtin_memset(c, 0, sizeof(*c)); }

// floor(cbrt(a)), three bits of a per step (Hacker's Delight, icbrt64).
static __always_inline __u32 cube_root(__u64 a) {
	__u64 y = 0, y2 = 0;
	for (int s = 63; s >= 0; s -= 3) {
		y2 <<= 2;
		y <<= 1;
		__u64 b = 3 * (y2 + y) + 1;
		if ((a >> s) >= b) {
			a -= b << s;
			y2 += 2 * y + 1;
			y++;
		}
	}
	return (__u32)y;
}

// Whether the window limits sending (the kernel's tcp_is_cwnd_limited): an application-limited
// flow does not grow it (RFC 9438, application-limited flows).
static __always_inline bool cwnd_limited(const struct tcp_sock *tp) {
	if (tp->is_cwnd_limited)
		return true;
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return false;
}

// Slow start up to ssthresh; the ACKed segments left over for congestion avoidance (tcp_slow_start).
static __always_inline __u32 slow_start(struct tcp_sock *tp, __u32 acked) {
	__u32 cwnd = tp->snd_cwnd + acked;
	if (cwnd > tp->snd_ssthresh)
		cwnd = tp->snd_ssthresh;
	acked -= cwnd - tp->snd_cwnd;
	tp->snd_cwnd = cwnd < tp->snd_cwnd_clamp ? cwnd : tp->snd_cwnd_clamp;
	return acked;
}

// cnt toward the target (RFC 9438 §4.2, §4.3), W_est advanced by F-weighted ACKs.
static __always_inline void cubic_update(struct cubic *c, const struct tcp_sock *tp, __u32 acked, __u32 f) {
	__u32 cwnd = tp->snd_cwnd, now = now_us(tp);
	c->ack_milli += (__u64)acked * f;
	if (c->last_cwnd == cwnd && (__s32)(now - c->last_time_us) <= RECOMPUTE_US)
		return;
	c->last_cwnd = cwnd;
	c->last_time_us = now;
	if (c->epoch_start_us == 0) {
		c->epoch_start_us = now ? now : 1;
		c->ack_milli = (__u64)acked * f;
		c->tcp_cwnd = cwnd;
		if (c->last_max_cwnd <= cwnd) {
			c->k = 0;
			c->origin = cwnd;
		} else {
			c->k = cube_root(CUBE_FACTOR * (c->last_max_cwnd - cwnd));
			c->origin = c->last_max_cwnd;
		}
	}
	// W_cubic one RTT ahead: t = time in the epoch + min RTT, in 1/1024 s.
	__u64 t = (((__u64)(__u32)(now - c->epoch_start_us) + min_rtt_us(tp)) << CUBIC_HZ) / USEC_PER_SEC;
	__u64 offset = t < c->k ? c->k - t : t - c->k;
	if (offset > MAX_OFFSET)
		offset = MAX_OFFSET;
	__u64 delta = (C_SCALED * offset * offset * offset) >> (10 + 3 * CUBIC_HZ);
	__u64 target = t < c->k ? (delta < c->origin ? c->origin - delta : 0) : c->origin + delta;
	c->cnt = target > cwnd ? cwnd / (__u32)(target - cwnd) : 100 * cwnd;
	if (c->last_max_cwnd == 0 && c->cnt > 20)
		c->cnt = 20;  // no W_max yet: at least 5% per RTT
	// W_est: +1 segment per 1/alpha windows of F-weighted ACKs.
	__u64 per_segment = (__u64)((cwnd * FRIENDLY_ACKS_X8) >> 3) * 1000;
	if (per_segment && c->ack_milli > per_segment) {
		__u64 n = c->ack_milli / per_segment;
		c->ack_milli -= n * per_segment;
		c->tcp_cwnd += (__u32)n;
	}
	if (c->tcp_cwnd > cwnd) {
		__u32 max_cnt = cwnd / (c->tcp_cwnd - cwnd);
		if (c->cnt > max_cnt)
			c->cnt = max_cnt;
	}
	if (c->cnt < 2)
		c->cnt = 2;
}

// cwnd + F/cnt per ACKed segment (tcp_cong_avoid_ai with F-weighted credits).
static __always_inline void cubic_grow(struct cubic *c, struct tcp_sock *tp, __u32 acked, __u32 f) {
	__u64 per_segment = (__u64)c->cnt * 1000;
	if (c->credit_milli >= per_segment) {  // credits from a larger cnt: one segment, gently
		c->credit_milli = 0;
		tp->snd_cwnd++;
	}
	c->credit_milli += (__u64)acked * f;
	if (c->credit_milli >= per_segment) {
		__u64 n = c->credit_milli / per_segment;
		c->credit_milli -= n * per_segment;
		tp->snd_cwnd += (__u32)n;
	}
	if (tp->snd_cwnd > tp->snd_cwnd_clamp)
		tp->snd_cwnd = tp->snd_cwnd_clamp;
}

SEC("struct_ops")
void BPF_PROG(mcubic_init, struct sock *sk) {
	struct cubic_ca *ca = ca_priv(sk);
	mltcp_flow_init(&ca->flow, tcp_sk(sk));
	cubic_reset(&ca->c);
}

SEC("struct_ops")
void BPF_PROG(mcubic_cwnd_event, struct sock *sk, enum tcp_ca_event ev) {
	if (ev != CA_EVENT_TX_START)
		return;
	struct tcp_sock *tp = tcp_sk(sk);
	struct cubic_ca *ca = ca_priv(sk);
	__u64 idle_us = tp->tcp_mstamp - ca->flow.last_ack_us;
	mltcp_flow_tx_start(&ca->flow, tp);
	// Application-limited (idle) for a while: shift the epoch so that cwnd stays on the curve.
	__u32 now = now_us(tp), in_epoch = now - ca->c.epoch_start_us;
	if (ca->c.epoch_start_us && (__s64)idle_us > 0)
		ca->c.epoch_start_us = idle_us >= in_epoch ? now : ca->c.epoch_start_us + (__u32)idle_us;
}

SEC("struct_ops")
__u32 BPF_PROG(mcubic_ssthresh, struct sock *sk) {
	const struct tcp_sock *tp = tcp_sk(sk);
	struct cubic_ca *ca = ca_priv(sk);
	__u32 cwnd = tp->snd_cwnd;
	ca->c.epoch_start_us = 0;
	ca->c.credit_milli = 0;  // the kernel's snd_cwnd_cnt is zeroed at a reduction too
	if (cwnd < ca->c.last_max_cwnd)  // fast convergence (RFC 9438 §4.7)
		ca->c.last_max_cwnd = cwnd * (BETA_SCALE + BETA) / (2 * BETA_SCALE);
	else
		ca->c.last_max_cwnd = cwnd;
	__u32 reduced = cwnd * BETA / BETA_SCALE;
	return reduced > 2 ? reduced : 2;
}

SEC("struct_ops")
void BPF_PROG(mcubic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) {
	struct tcp_sock *tp = tcp_sk(sk);
	struct cubic_ca *ca = ca_priv(sk);
	mltcp_flow_ack(&ca->flow, tp);
	if (!cwnd_limited(tp))
		return;
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		acked = slow_start(tp, acked);
		if (!acked)
			return;
	}
	__u32 f = mltcp_factor_milli(&ca->flow, tp);
	cubic_update(&ca->c, tp, acked, f);
	cubic_grow(&ca->c, tp, acked, f);
}

SEC("struct_ops")
void BPF_PROG(mcubic_set_state, struct sock *sk, __u8 new_state) {
	if (new_state == TCP_CA_Loss) {  // a retransmission timeout: the curve starts over
		struct cubic_ca *ca = ca_priv(sk);
		cubic_reset(&ca->c);
	}
}

SEC("struct_ops")
__u32 BPF_PROG(mcubic_undo_cwnd, struct sock *sk) {
	return mltcp_undone_cwnd(tcp_sk(sk));
}

SEC(".struct_ops")
struct tcp_congestion_ops mltcp_cubic = {
	.init = (void *)mcubic_init,
	.cwnd_event = (void *)mcubic_cwnd_event,
	.ssthresh = (void *)mcubic_ssthresh,
	.cong_avoid = (void *)mcubic_cong_avoid,
	.set_state = (void *)mcubic_set_state,
	.undo_cwnd = (void *)mcubic_undo_cwnd,
	.name = "mltcp_cubic",
};
