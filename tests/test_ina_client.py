"""The INA worker client and the parameter server process, over loopback UDP (no switch: the PS
finishes every seq from the workers' own packets; the switches' part is tests/test_ina_p4.py).

Workers bind host k of this test process's loopback /24 (conftest.loopback: the whole 127/8 is this
machine), the PS host 100, so that each worker has the job's worker port on its own address as on its
own machine. Tests about when the client resends run on a virtual clock (:class:`VirtualLine`), so
that what they assert does not depend on how the machine schedules threads.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import json
import math
import random
import select
import socket
import subprocess
import sys
import threading

import pytest
from conftest import loopback, wait_until

from common.sockets import free_tcp_port
from ina.aggregator import JobTree
from ina.client import MIN_RTO_S, AimdWindow, InaClient, RtoEstimator
from ina.protocol import INA_UDP_PORT, VALUES_PER_PACKET, InaError, worker_port
from ina.ps import PsJob, PsService, load_jobs

PS_IP = loopback(100)
SCALE = 1e4


def _worker_ip(bit: int) -> str:
    return loopback(bit + 1)


class Ps:
    """A PsService on a thread; ``drop(data) -> bool`` decides which datagrams it loses."""

    def __init__(self, jobs, drop=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((PS_IP, INA_UDP_PORT))
        self.service = PsService(self.sock, jobs)
        if drop is not None:
            handle = self.service.handle
            self.service.handle = lambda data, ce=False, src=None: None if drop(data) else handle(data, ce, src)
        self.stop: list = []
        self.thread = threading.Thread(target=self.service.serve, args=(self.stop,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.append(1)
        self.thread.join(5)
        self.sock.close()


def _job(job_id: int, workers: int) -> PsJob:
    tree = JobTree.two_level(job_id, workers)
    return PsJob(tree, {b: _worker_ip(b) for b in range(workers)})


def _run_workers(clients: list[InaClient], work) -> list:
    """``work(bit, client)`` of every client on its own thread; their results, the clients closed after."""
    results: list = [None] * len(clients)
    errors: list = []

    def run(b):
        try:
            results[b] = work(b, clients[b])
        except Exception as e:  # reported below, with the worker
            errors.append((b, e))

    threads = [threading.Thread(target=run, args=(b,)) for b in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for c in clients:
        c.close()
    assert not errors, errors
    return results


def _allreduce_all(job_id: int, inputs: list[list[float]], setup=None) -> tuple[list[list[float]], list]:
    """Every worker's allreduce of its input, on threads; their results and clients."""
    clients = [InaClient(job_id, b, PS_IP, SCALE, bind=_worker_ip(b)) for b in range(len(inputs))]

    def work(b, client):
        if setup:
            setup(b, client)
        return client.allreduce(inputs[b])

    return _run_workers(clients, work), clients


def _inputs(workers: int, n: int, seed: int = 3) -> list[list[float]]:
    rnd = random.Random(seed)
    return [[rnd.uniform(-10, 10) for _ in range(n)] for _ in range(workers)]


def _check_sums(inputs, results):
    workers = len(inputs)
    exact = [sum(col) for col in zip(*inputs, strict=True)]
    bound = workers / (2 * SCALE) + 1e-9
    for r in results:
        assert r == results[0]  # every worker gets the same result
        assert len(r) == len(exact)
        assert max(abs(a - b) for a, b in zip(r, exact, strict=True)) <= bound


def test_four_workers_sum_exactly_up_to_the_quantisation_bound():
    """1,000 floats (32 packets, the last one padded) from 4 workers: every worker gets the float sum
    within 4 / (2 x scale) per lane; the PS completed every seq once. (A worker that starts late
    makes the others time out and resend: the PS answers those from the stored result.)"""
    inputs = _inputs(4, 1000)
    with Ps([_job(1, 4)]) as ps:
        results, clients = _allreduce_all(1, inputs)
    _check_sums(inputs, results)
    st = ps.service.engine.stats
    assert st.results == 32 and st.contributions == 4 * 32  # a resend before completion is a duplicate
    assert ps.service.sent == 4 * (32 + st.resends_answered)
    assert all(c.stats.results == 32 for c in clients)


def test_a_result_not_from_the_ps_is_ignored_and_counted():
    """A forged RESULT for seq 0 (all lanes 999) from another address reaches every worker before
    the allreduce: each ignores it (``foreign``) and gets the PS's sum."""
    from ina.protocol import Flag, data_packet

    inputs = _inputs(2, 100)
    forged = data_packet(2, 0, 0, [999] * VALUES_PER_PACKET, flags=Flag.RESULT)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as intruder:
        intruder.bind((loopback(240), INA_UDP_PORT))  # even from the INA port, a wrong address

        def forge(b, client):
            intruder.sendto(forged, (_worker_ip(b), worker_port(2)))
            wait_until(lambda: select.select([client.sock], [], [], 0)[0], what=f"the forgery queued at worker {b}")

        with Ps([_job(2, 2)]):
            results, clients = _allreduce_all(2, inputs, setup=forge)
    _check_sums(inputs, results)
    assert [c.stats.foreign for c in clients] == [1, 1]


def test_a_lost_packet_is_resent_after_the_timeout_and_the_sum_stays_exact():
    """The PS loses worker 1's first packet of seq 5: the later seqs' results overtake it, worker 1
    resends it with RESEND (fast, after 3 of them, or on its timeout), the seq completes exactly."""
    lost = []

    def drop(data: bytes) -> bool:
        seq, bitmap, flags = int.from_bytes(data[4:8], "big"), int.from_bytes(data[8:12], "big"), data[1]
        if seq == 5 and bitmap == 0b10 and not flags and not lost:
            lost.append(seq)
            return True
        return False

    inputs = _inputs(3, 320)
    with Ps([_job(2, 3)], drop=drop):
        results, clients = _allreduce_all(2, inputs)
    _check_sums(inputs, results)
    st = clients[1].stats
    assert lost == [5] and st.resent >= 1 and st.fast_resends + st.timeouts >= 1
    assert clients[1].window.cwnd < 16  # the loss halved its window


def test_ecn_from_one_worker_reaches_every_result_and_shrinks_every_window():
    """Worker 0 sends with IP ECN = CE: the PS reads the mark, OR-es it into each result, and every
    worker halves its window (at most once per window of packets) instead of growing it."""
    def mark(bit, client):
        if bit == 0:
            client.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 3)

    inputs = _inputs(2, 32 * 40)
    with Ps([_job(3, 2)]):
        results, clients = _allreduce_all(3, inputs, setup=mark)
    _check_sums(inputs, results)
    for c in clients:
        assert c.stats.ecn_results == 40 and c.window.cwnd < 16


def test_a_sum_outside_int32_is_flagged_and_counted_saturated():
    """Two workers at 0.9 x the int32 range: the PS's exact sum does not fit, the result is saturated
    and carries OVERFLOW; every worker counts the lane."""
    big = 0.9 * (2**31) / SCALE
    with Ps([_job(4, 2)]):
        results, clients = _allreduce_all(4, [[big, 1.0], [big, 1.0]])
    assert results[0][0] == pytest.approx((2**31 - 1) / SCALE) and results[0][1] == pytest.approx(2.0)
    assert all(c.stats.overflow_results == 1 and c.stats.saturated_lanes == 1 for c in clients)


def test_window_grows_by_one_per_window_and_halves_once_per_window():
    """AIMD: +1/cwnd per clean result, halved by ECN or a loss at most once per window of seqs, within 1..maximum."""
    w = AimdWindow(initial=4, maximum=8)
    for seq in range(4):
        w.on_result(seq, ecn=False, next_seq=8)
    grown = w.cwnd
    assert 4.9 < grown < 5.0  # +1/cwnd per result: about +1 per window
    w.on_result(4, ecn=True, next_seq=12)
    halved = w.cwnd
    assert halved == pytest.approx(grown / 2)  # halved once ...
    w.on_result(5, ecn=True, next_seq=12)
    w.on_loss(11, next_seq=12)
    assert w.cwnd == halved  # ... not again for seqs sent before the decrease
    w.on_result(12, ecn=True, next_seq=20)
    assert w.cwnd == pytest.approx(halved / 2)
    for seq in range(20, 200):
        w.on_result(seq, ecn=False, next_seq=200)
    assert w.cwnd == 8 and w.size == 8
    for seq in range(200, 220):
        w.on_loss(seq, next_seq=seq + 1)
    assert w.size == 1
    with pytest.raises(InaError):
        AimdWindow(initial=0)


def test_after_an_idle_time_the_window_restarts_and_grows_by_one_per_result_to_three_quarters():
    """RFC 5681 4.1's restart after idle: a window grown to 40 restarts at 4 and slow-starts (+1 per result)
    to 30, then grows additively; a window below the initial one stays."""
    w = AimdWindow(initial=4, maximum=64)
    w.cwnd = 40.0
    w.restart()
    assert w.cwnd == 4 and w.ssthresh == 30
    for seq in range(26):
        w.on_result(seq, ecn=False, next_seq=100)
    assert w.cwnd == 30
    w.on_result(26, ecn=False, next_seq=100)
    assert w.cwnd == pytest.approx(30 + 1 / 30)
    w.cwnd = 2.0
    w.restart()
    assert w.cwnd == 2.0 and w.ssthresh == 30


class VirtualLine:
    """One :class:`InaClient` and a :class:`PsService` joined by a line on a virtual clock: the client's
    ``time.monotonic`` and ``select`` are the line's (``monkeypatch``), every datagram takes ``delay_s``
    each way, the PS's side sends one datagram per ``period_s`` in order (a slow port's queue: what
    it is given waits), and ``drop(data) -> bool`` loses datagrams on their way to the PS. Time moves
    only while the client waits in ``select``, so when the client resends, and why, follows from the
    protocol alone, never from how the machine schedules the test."""

    def __init__(self, monkeypatch, job: PsJob, delay_s: float = 0.001, period_s: float = 0.0, drop=None):
        import ina.client

        self.now, self.delay_s, self.period_s, self.drop = 0.0, delay_s, period_s, drop
        self.events: list = []  # (arrival time, order, to the PS?, datagram)
        self.order = itertools.count()
        self.inbox: collections.deque = collections.deque()  # arrived at the client, not yet read
        self.port_free = 0.0  # when the PS's port is done sending what it was given
        self.job_id, self.client_ip = job.tree.job_id, job.workers[0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # PsService sets its options
            self.service = PsService(sock, [job])
        self.service.sock = _End(self._from_ps)
        monkeypatch.setattr(ina.client, "time", self)
        monkeypatch.setattr(ina.client, "select", self)

    def client(self, **kw) -> InaClient:
        """The job's worker 0, its socket this line's end."""
        client = InaClient(self.job_id, 0, PS_IP, SCALE, bind=self.client_ip, **kw)
        client.sock.close()
        client.sock = _End(self._from_client, self.inbox, client.ps)
        return client

    def monotonic(self) -> float:
        return self.now

    def select(self, rlist, wlist, xlist, timeout):
        """Ready when a datagram has reached the client, moving the clock to its arrival; else
        ``timeout`` later, nothing ready."""
        deadline = self.now + timeout
        while not self.inbox:
            if not self.events or self.events[0][0] > deadline:
                assert deadline < math.inf, "the client waits for ever and nothing is on the line"
                self.now = max(self.now, deadline)
                return [], [], []
            self.now, _, to_ps, data = heapq.heappop(self.events)
            if not to_ps:
                self.inbox.append(data)
            elif self.drop is None or not self.drop(data):
                self.service.handle(data, False, self.client_ip)
        return rlist, [], []

    def _from_client(self, data: bytes, addr) -> None:
        assert addr == (PS_IP, INA_UDP_PORT)
        heapq.heappush(self.events, (self.now + self.delay_s, next(self.order), True, data))

    def _from_ps(self, data: bytes, addr) -> None:
        assert addr == (self.client_ip, worker_port(int.from_bytes(data[2:4], "big")))
        start = max(self.now, self.port_free)  # after what the port was given before
        self.port_free = start + self.period_s
        heapq.heappush(self.events, (start + self.delay_s, next(self.order), False, data))


class _End:
    """A :class:`VirtualLine` end as the socket calls of the client and the PS see it."""

    def __init__(self, send, inbox=None, peer=None):
        self.send, self.inbox, self.peer = send, inbox, peer

    def sendto(self, data: bytes, addr) -> None:
        self.send(data, addr)

    def recvmsg(self, bufsize, ancbufsize=0, flags=0):
        if not self.inbox:
            raise BlockingIOError
        return self.inbox.popleft(), [], 0, self.peer

    def close(self) -> None:
        pass


def test_a_client_idle_longer_than_its_timeout_restarts_its_window_and_one_called_at_once_does_not(
        monkeypatch):
    """RFC 5681 4.1 on the virtual line: a window of 50 restarts at 4 with a threshold of 37.5 and grows by
    one per result (10 seqs: 14); called again at once it goes on growing (24); after an idle second,
    longer than its timeout, it restarts at 4 again (14)."""
    line = VirtualLine(monkeypatch, _job(9, 1))
    inputs = _inputs(1, 32 * 10)
    client = line.client(window=AimdWindow(initial=4, maximum=64))
    client.window.cwnd = 50.0
    after = []
    for idle_s in (0.0, 0.0, 1.0):
        line.now += idle_s
        _check_sums(inputs, [client.allreduce(inputs[0])])
        after.append((client.window.cwnd, client.window.ssthresh))
    assert after == [(14.0, 37.5), (24.0, 37.5), (14.0, 37.5)]
    assert client.rto.rto < 1.0 and (client.stats.timeouts, client.stats.resent) == (0, 0)


def test_a_hole_is_resent_after_later_results_without_waiting_for_the_timeout(monkeypatch):
    """One data packet of seq 2 lost on the virtual line (1 ms each way), the first timeout 1 s away: the
    worker resends seq 2 once a seq sent after it has its result and a round trip has passed (RACK), a
    few milliseconds on, long before its timeout; the sum is exact."""
    lost = []

    def drop(data: bytes) -> bool:
        if int.from_bytes(data[4:8], "big") == 2 and not data[1] and not lost:
            lost.append(line.now)
            return True
        return False

    line = VirtualLine(monkeypatch, _job(12, 1), drop=drop)
    resent = []
    client = line.client()
    resend = client._resend
    client._resend = lambda st, seq: (resent.append((seq, line.now)), resend(st, seq))
    client.rto.rto = 1.0
    inputs = _inputs(1, 32 * 40)
    _check_sums(inputs, [client.allreduce(inputs[0])])
    assert len(lost) == 1 and [seq for seq, _ in resent] == [2]
    assert resent[0][1] - lost[0] < 0.01  # found by its successors' results, not by the 1 s timer
    assert (client.stats.fast_resends, client.stats.timeouts, client.stats.spurious_fast_resends) == (1, 0, 0)


def test_results_queued_longer_than_the_timeout_are_not_resent_while_results_flow(monkeypatch):
    """The PS's port sends 200 results a second and the worker keeps 64 seqs in flight: each result
    waits behind most of a window, up to 0.3 s, longer than the 0.2 s floor of the timeout. The timer
    restarts with every result (RFC 6298 5.3), so no seq times out and none is resent."""
    line = VirtualLine(monkeypatch, _job(14, 1), delay_s=0.0001, period_s=0.005)
    client = line.client(window=AimdWindow(64, 64))
    inputs = _inputs(1, 32 * 300)
    _check_sums(inputs, [client.allreduce(inputs[0])])
    st = client.stats
    assert st.rtt_max_s > MIN_RTO_S, "results were queued longer than the timeout's floor"
    assert (st.timeouts, st.fast_resends, st.resent) == (0, 0, 0)
    assert line.now == pytest.approx(300 * 0.005, abs=0.01)  # the port sent one result per 5 ms throughout


def test_several_holes_are_resent_as_later_results_come_without_a_timeout(monkeypatch):
    """RACK on the virtual line: seqs 5 and 9 lost on the way to the PS; each hole is resent once a seq
    sent after it has its result and a round trip has passed: two resends while results flow, no
    timeout, and nothing resent that was not lost."""
    lost = []

    def drop(data: bytes) -> bool:
        seq = int.from_bytes(data[4:8], "big")
        if seq in (5, 9) and seq not in lost:
            lost.append(seq)
            return True
        return False

    line = VirtualLine(monkeypatch, _job(15, 1), drop=drop)
    client = line.client(window=AimdWindow(16, 16))
    inputs = _inputs(1, 32 * 200)
    _check_sums(inputs, [client.allreduce(inputs[0])])
    assert lost == [5, 9]
    assert (client.stats.fast_resends, client.stats.timeouts, client.stats.resent) == (2, 0, 2)


def test_rto_follows_rfc6298():
    """The retransmission timeout follows RFC 6298 (SRTT, RTTVAR, backoff), clamped to MIN_RTO_S; any
    result ends a backoff."""
    r = RtoEstimator()
    assert r.rto == 1.0  # before any sample (RFC 6298 2.1)
    r.sample(0.1)
    assert (r.srtt, r.rttvar, r.rto) == (0.1, 0.05, pytest.approx(0.3))
    r.sample(0.2)
    assert r.srtt == pytest.approx(0.1125) and r.rttvar == pytest.approx(0.0625)
    r.backoff()
    assert r.rto == pytest.approx(2 * (0.1125 + 4 * 0.0625))
    r.backoff()
    r.progress()  # a result: back to the estimate
    assert r.rto == pytest.approx(0.1125 + 4 * 0.0625)
    fast = RtoEstimator()
    fast.sample(0.0001)
    assert fast.rto == MIN_RTO_S


def test_ps_config_round_trips_and_bad_ones_say_why(tmp_path):
    """A PS config round-trips; a worker bit without an address or broken JSON is one InaError naming why."""
    job = PsJob(JobTree.two_level(9, 2, [2]), {0: "10.0.0.1", 1: "10.0.0.2", 3: "10.0.0.3", 4: "10.0.0.4"})
    path = tmp_path / "ps.json"
    path.write_text(json.dumps({"jobs": [job.to_dict()]}))
    assert load_jobs(str(path)) == [job]
    assert job.addresses()[0] == ("10.0.0.1", worker_port(9))
    bad = job.to_dict()
    del bad["workers"]["3"]
    path.write_text(json.dumps({"jobs": [bad]}))
    with pytest.raises(InaError, match=r"worker bits \[3\] have no address"):
        load_jobs(str(path))
    path.write_text("{not json")
    with pytest.raises(InaError, match="PS config"):
        load_jobs(str(path))


def _bound(proc: subprocess.Popen, ip: str, port: int) -> bool:
    """Whether a UDP socket is bound to ``ip:port`` (ours cannot be), ``proc`` still running."""
    assert proc.poll() is None, proc.stderr.read()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((ip, port))
        except OSError:
            return True
    return False


def test_ps_process_serves_and_writes_its_counters_on_sigterm(tmp_path):
    """``python -m ina.ps`` with a config: two workers' allreduce completes; SIGTERM -> counters, exit 0."""
    cfg, stats = tmp_path / "ps.json", tmp_path / "stats.json"
    cfg.write_text(json.dumps({"jobs": [_job(5, 2).to_dict()]}))
    proc = subprocess.Popen([sys.executable, "-m", "ina.ps", "--config", str(cfg), "--stats", str(stats),
                             "--bind", PS_IP], stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _bound(proc, PS_IP, INA_UDP_PORT), what=f"the PS bound to {PS_IP}:{INA_UDP_PORT}")
        inputs = _inputs(2, 64)
        results, _ = _allreduce_all(5, inputs)
        _check_sums(inputs, results)
    finally:
        proc.terminate()
        assert proc.wait(10) == 0, proc.stderr.read()
    counters = json.loads(stats.read_text())
    assert counters["results"] == 2 and counters["datagrams_sent"] == 4


def _train(mode: str, job_id: int) -> list[dict]:
    import os

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ina_ddp_worker.py")
    port = free_tcp_port()
    procs = [subprocess.Popen([sys.executable, script, str(r), "2", str(port), mode, PS_IP, str(job_id),
                               _worker_ip(r)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def test_ddp_training_over_ina_matches_the_gloo_allreduce():
    """A two-layer model, two DDP ranks, 8 SGD steps: with the INA hook (scale 1e6) every step's loss
    of each rank (each on its own batch) is the gloo allreduce's within 1e-4."""
    gloo = _train("gloo", 0)
    with Ps([_job(6, 2)]):
        ina = _train("ina", 6)
    for rank in range(2):
        assert ina[rank]["results"] > 0
        assert ina[rank]["losses"] == pytest.approx(gloo[rank]["losses"], abs=1e-4)
        assert ina[rank]["losses"][-1] < ina[rank]["losses"][0]  # it trains


def test_a_hole_never_outruns_the_ps_memory_under_loss(monkeypatch):
    """5% of the PS's datagrams lost each way, the PS keeping only 64 results (forgetting every 8):
    with windows of at most 32 seqs, a worker never runs more than a window past a seq it still
    needs, so every seq completes and every worker gets the exact sums; nothing is late."""
    import ina.ps

    monkeypatch.setattr(ina.ps, "KEEP_SEQS", 64)
    monkeypatch.setattr(ina.ps, "FORGET_EVERY", 8)
    rnd = random.Random(7)
    inputs = _inputs(3, 32 * 400)
    with Ps([_job(8, 3)], drop=lambda _: rnd.random() < 0.05) as ps:
        real = ps.service.sock

        class Lossy:
            """The PS's socket, losing 5% of what it sends."""

            def sendto(self, data, addr):
                if rnd.random() >= 0.05:
                    real.sendto(data, addr)

            def __getattr__(self, name):
                return getattr(real, name)

        ps.service.sock = Lossy()
        results, clients = _allreduce_all(8, inputs, setup=lambda b, c: setattr(c, "window", AimdWindow(8, 32)))
    _check_sums(inputs, results)
    st = ps.service.engine.stats
    assert st.results == 400 and st.late == 0 and st.resends_answered > 0
    assert all(c.stats.fast_resends > 0 for c in clients)


def test_a_stream_of_vectors_takes_consecutive_seqs_and_sums_each_exactly():
    """Three workers stream three vectors of 70, 1 and 300 ints (3, 1 and 10 packets of 32 lanes, each
    vector's last one padded) as one: each vector's sums are exact, the seqs run on from one vector to
    the next (14 in all, each completed once by the PS), and each vector's last result comes no later
    than the next one's."""
    sizes = [70, 1, 300]
    workers = 3
    rnd = random.Random(5)
    inputs = [[[rnd.randint(-1000, 1000) for _ in range(n)] for n in sizes] for _ in range(workers)]
    clients = [InaClient(7, b, PS_IP, SCALE, bind=_worker_ip(b), values_per_packet=32) for b in range(workers)]
    with Ps([_job(7, workers)]) as ps:
        got = _run_workers(clients, lambda b, client: client.allreduce_stream(inputs[b]))
    for b in range(workers):
        sums = [out for out, _ in got[b]]
        assert sums == [[sum(inputs[w][i][j] for w in range(workers)) for j in range(n)] for i, n in enumerate(sizes)]
        times = [t for _, t in got[b]]
        assert times == sorted(times)
        assert clients[b].next_seq == 14 and clients[b].stats.results == 14
    assert ps.service.engine.stats.results == 14


def test_a_stream_of_values_int32_cannot_carry_is_refused_before_anything_is_sent():
    """Floats, or an integer beyond int32, refuse the whole stream in one InaError, no seq taken."""
    with InaClient(7, 0, PS_IP, SCALE, bind=_worker_ip(0), values_per_packet=32) as client:
        with pytest.raises(InaError, match="must be integers, not float64"):
            client.allreduce_stream([[1, 2], [0.5]])
        with pytest.raises(InaError, match="lane 40"):
            client.allreduce_stream([[0] * 40 + [1 << 31]])
        assert client.next_seq == 0 and client.stats.sent == 0


def test_a_worker_sends_ect_and_a_result_marked_on_its_way_back_shrinks_its_window():
    """Every datagram a client sends is ECN-capable (ECT(0)), so a marking queue marks it instead of
    letting it queue; a result that arrives CE-marked (its flag clear: marked after the PS) counts as ECN."""
    from ina.protocol import ECT0, TOS_SPACE, Flag, data_packet

    ps = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ps.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    ps.bind((PS_IP, INA_UDP_PORT))
    client = InaClient(4, 0, PS_IP, SCALE, bind=_worker_ip(0), values_per_packet=32)
    got: list = []
    t = threading.Thread(target=lambda: got.append(client.allreduce_ints([5] * 32)))
    t.start()
    try:
        ps.settimeout(10)
        data, ancdata, _, addr = ps.recvmsg(65535, TOS_SPACE)
        tos = next(c[2][0] for c in ancdata if c[1] == socket.IP_TOS)
        assert tos & 3 == ECT0
        ps.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 3)  # CE, as a queue on the way back marks it
        ps.sendto(data_packet(4, 0, 1, [5] * 32, flags=Flag.RESULT), addr)
        t.join(10)
    finally:
        ps.close()
        client.close()
    assert got == [[5] * 32]
    assert client.stats.ecn_results == 1 and client.window.cwnd == 8.0
