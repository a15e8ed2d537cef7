"""The parameter server's per-job counters and its reload of the config on SIGHUP, over loopback UDP.

The PS binds host 150 of this test process's loopback /24 and the workers hosts 151 and up
(conftest.loopback: the whole 127/8 is this machine), so each worker has the job's worker port on
its own address as on its own machine. Packets are crafted as the workers and switches
would send them (:func:`ina.protocol.data_packet`, the bit plan of :class:`ina.aggregator.JobTree`).
"""

from __future__ import annotations

import json
import re
import select
import signal
import socket
import subprocess
import sys

import pytest
from conftest import loopback, wait_until

from ina.aggregator import JobTree
from ina.protocol import INA_UDP_PORT, VALUES_PER_PACKET, Flag, data_packet, decode
from ina.ps import JobsChange, PsJob, PsService

PS_IP = loopback(150)


def _ip(bit: int) -> str:
    return loopback(151 + bit)


def _job(job_id: int, root_workers: int, leaf_workers=()) -> PsJob:
    """A job whose every worker bit has an address of its own."""
    tree = JobTree.two_level(job_id, root_workers, leaf_workers)
    return PsJob(tree, {b: _ip(b) for b in tree.worker_bits})


def _values(x: int) -> list[int]:
    return [x] * VALUES_PER_PACKET


class Workers:
    """A UDP socket per worker machine of a job, on the job's worker port: where results go."""

    def __init__(self, job: PsJob):
        self.socks = []
        for ip, port in job.addresses():
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((ip, port))
            self.socks.append(s)

    def results(self, timeout_s: float = 5.0) -> list[bytes]:
        """One datagram from every worker (all the same), or an assertion naming who got none."""
        got = []
        for s in self.socks:
            s.settimeout(timeout_s)
            try:
                got.append(s.recv(65535))
            except TimeoutError:
                raise AssertionError(f"no result reached {s.getsockname()}") from None
        assert all(g == got[0] for g in got)
        return got

    def close(self) -> None:
        for s in self.socks:
            s.close()


@pytest.fixture
def service():
    """A PsService on an ephemeral port of PS_IP serving job 7 (root worker 0; a leaf, bit 1, of
    workers 2 and 3) and job 8 (two root workers); datagrams are handed to it directly."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((PS_IP, 0))
    jobs = [_job(7, 1, [2]), _job(8, 2)]
    workers = [Workers(j) for j in jobs]
    yield PsService(sock, jobs)
    for w in workers:
        w.close()
    sock.close()


def test_the_ps_socket_holds_every_workers_window_at_once(service):
    """The PS's receive buffer is RCVBUF_BYTES (the kernel reports twice what was set), or as much as
    net.core.rmem_max allows a process that may not exceed it: the default 208 KB drops a burst of 4
    workers' windows on loopback, and each drop costs a worker a resend timeout."""
    from ina.ps import RCVBUF_BYTES

    with open("/proc/sys/net/core/rmem_max") as f:
        rmem_max = int(f.read())
    got = service.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    assert got >= 2 * min(RCVBUF_BYTES, rmem_max)
    assert got >= 2 * RCVBUF_BYTES or rmem_max < RCVBUF_BYTES


def test_a_hosts_packets_outside_the_job_are_dropped_and_counted_not_summed(service):
    """A datagram of job 8 from an address that is none of its machines' is dropped before the PS
    rules: the sum of seq 0 is the two workers' and nobody else's."""
    intruder = loopback(250)
    service.handle(data_packet(8, 0, 1 << 0, _values(100)), src=intruder)  # claims worker 0's bit
    assert service.engine.result(8, 0) is None
    service.handle(data_packet(8, 0, 1 << 0, _values(1)), src=_ip(0))
    service.handle(data_packet(8, 0, 1 << 1, _values(2)), src=_ip(1))
    assert service.engine.result(8, 0).values == (3,) * 32
    stats = service.stats()
    assert stats["foreign"] == 1 and stats["jobs"]["8"]["foreign"] == 1 and stats["jobs"]["8"]["received"] == 2
    assert stats["duplicates"] == 0


def test_per_job_counters_classify_each_datagram_by_its_header(service):
    """received / aggregated (covers two or more workers once the tree expands the bitmap) /
    fallback / resend / results (datagrams sent) / completed_seqs, per job; malformed datagrams and
    unknown jobs are only the engine's counters."""
    feed = [
        data_packet(7, 0, 1 << 0, _values(1)),  # worker 0's own packet
        data_packet(7, 0, 1 << 1, _values(5), flags=Flag.PARTIAL),  # the leaf's partial: workers 2, 3; completes
        data_packet(7, 1, 1 << 2, _values(2), flags=Flag.COLLISION),  # fell back at the leaf
        data_packet(7, 1, 1 << 3, _values(3), flags=Flag.COLLISION),
        data_packet(7, 1, 1 << 0, _values(1), flags=Flag.RESEND),  # completes seq 1
        data_packet(7, 1, 1 << 0, _values(1), flags=Flag.RESEND),  # answered with the stored result
        data_packet(7, 2, 0b11, _values(6), flags=Flag.PARTIAL),  # the root's aggregate; completes
        data_packet(7, 2, 0b11, _values(6), flags=Flag.PARTIAL),  # late duplicate
        data_packet(7, 3, 1 << 0, _values(1), flags=Flag.PARTIAL),  # fan-in 1 "aggregate": one worker
        data_packet(7, 3, 0, _values(0), flags=Flag.RESULT),  # a RESULT reaching the PS: unexpected
        data_packet(8, 0, 1 << 0, _values(1)),
        data_packet(7, 4, 1 << 0, _values(1))[:30],  # truncated: malformed, job 7's id in its bytes
        data_packet(99, 0, 1 << 0, _values(1)),  # a job the PS does not serve
    ]
    for data in feed:
        service.handle(data)
    stats = service.stats()
    assert stats["jobs"]["7"] == {"received": 10, "aggregated": 3, "fallback": 2, "resend": 2,
                                  "results": 4 * 3, "completed_seqs": 3, "foreign": 0}
    assert stats["jobs"]["8"] == {"received": 1, "aggregated": 0, "fallback": 0, "resend": 0, "results": 0,
                                  "completed_seqs": 0, "foreign": 0}
    assert stats["malformed"]["truncated"] == 1 and stats["unknown_job"] == 1
    assert stats["results"] == 3 and stats["resends_answered"] == 1
    assert sum(j["results"] for j in stats["jobs"].values()) == stats["datagrams_sent"]


def test_set_jobs_keeps_listed_jobs_state_and_counters_outlive_removed_jobs(service):
    """set_jobs: an unchanged job keeps its pending seq (it completes afterwards), a changed one is
    installed afresh (its pending seq is gone), a removed one's counters stay in stats()."""
    service.handle(data_packet(7, 0, 1 << 0, _values(1)))
    service.handle(data_packet(8, 0, 1 << 0, _values(1)))
    change = service.set_jobs([_job(7, 1, [2]), _job(8, 3), _job(9, 2)])
    assert change == JobsChange(added=(9,), replaced=(8,), removed=(), kept=(7,))
    assert service.engine.pending() == [(7, 0)]
    service.handle(data_packet(7, 0, 1 << 1, _values(5), flags=Flag.PARTIAL))
    assert service.engine.result(7, 0).values == (6,) * VALUES_PER_PACKET
    assert service.set_jobs([_job(9, 2)]) == JobsChange(removed=(7, 8), kept=(9,))
    assert set(service.stats()["jobs"]) == {"7", "8", "9"}
    assert service.stats()["jobs"]["7"]["completed_seqs"] == 1


class PsProcess:
    """``python -m ina.ps`` on PS_IP with --config, --stats and --ack in a directory."""

    def __init__(self, tmp_path, jobs):
        self.config, self.stats, self.ack = tmp_path / "ps.json", tmp_path / "stats.json", tmp_path / "ack.json"
        self.write(jobs)
        self.proc = subprocess.Popen([sys.executable, "-m", "ina.ps", "--config", str(self.config), "--stats",
                                      str(self.stats), "--bind", PS_IP, "--ack", str(self.ack)],
                                     stderr=subprocess.PIPE, text=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((_ip(0), 0))  # a machine of every job here: the PS drops other sources

    def write(self, jobs) -> None:
        self.config.write_text(json.dumps({"jobs": [j.to_dict() for j in jobs]}) if isinstance(jobs, list)
                               else jobs)

    def acked(self, generation: int, timeout_s: float = 10.0) -> dict:
        """The ack file once it reaches ``generation``."""
        def reached():
            assert self.proc.poll() is None, self.proc.stderr.read()
            try:
                ack = json.loads(self.ack.read_text())
            except FileNotFoundError:
                return None
            return ack if ack["generation"] >= generation else None

        return wait_until(reached, timeout_s, f"the PS's ack of generation {generation}", poll_s=0.02)

    def reload(self, jobs) -> None:
        self.write(jobs)
        self.proc.send_signal(signal.SIGHUP)

    def stderr_line(self, timeout_s: float = 10.0) -> str:
        ready = select.select([self.proc.stderr], [], [], timeout_s)[0]
        assert ready, "the PS logged nothing"
        return self.proc.stderr.readline()

    def send(self, data: bytes) -> None:
        self.sock.sendto(data, (PS_IP, INA_UDP_PORT))

    def stop(self) -> dict:
        """SIGTERM; its counters."""
        self.sock.close()
        self.proc.terminate()
        assert self.proc.wait(10) == 0, self.proc.stderr.read()
        return json.loads(self.stats.read_text())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.sock.close()


def test_sighup_adds_and_removes_jobs_and_a_kept_jobs_pending_seq_completes(tmp_path):
    """SIGHUP with a config of jobs 7 and 9 (was 7 and 8): ack generation 2 lists [7, 9]; job 7's seq
    half summed before the reload completes after it; job 9 is served; job 8's packets are unknown."""
    job7, job8, job9 = _job(7, 2), _job(8, 2), _job(9, 2)
    ps = PsProcess(tmp_path, [job7, job8])
    workers = [Workers(job7), Workers(job9)]
    try:
        assert ps.acked(1) == {"generation": 1, "jobs": [7, 8]}
        ps.send(data_packet(7, 0, 1 << 0, _values(3)))
        ps.reload([job7, job9])
        assert ps.acked(2) == {"generation": 2, "jobs": [7, 9]}
        assert "reload 2" in ps.stderr_line()
        ps.send(data_packet(7, 0, 1 << 1, _values(4)))
        header, values = decode(workers[0].results()[0])
        assert (header.job_id, header.seq, header.flags) == (7, 0, Flag.RESULT) and values == (7,) * 32
        ps.send(data_packet(9, 5, 1 << 0, _values(1)))
        ps.send(data_packet(9, 5, 1 << 1, _values(1)))
        assert decode(workers[1].results()[0])[1] == (2,) * 32
        ps.send(data_packet(8, 0, 1 << 0, _values(1)))
        # the PS reads its one socket in order: once job 9's next result is back, job 8's packet was handled
        ps.send(data_packet(9, 6, 1 << 0, _values(1)))
        ps.send(data_packet(9, 6, 1 << 1, _values(1)))
        assert decode(workers[1].results()[0])[0].seq == 6
        stats = ps.stop()
    finally:
        ps.kill()
        for w in workers:
            w.close()
    assert stats["unknown_job"] == 1
    assert stats["jobs"]["7"]["received"] == 2 and stats["jobs"]["7"]["completed_seqs"] == 1
    assert stats["jobs"]["9"]["completed_seqs"] == 2 and stats["jobs"]["8"]["received"] == 0


@pytest.mark.parametrize("config, why", [
    ("{not json", "PS config"),
    (json.dumps({"jobs": [_job(7, 2).to_dict(), _job(7, 2).to_dict()]}), r"job ids \[7\] listed more than once"),
    (json.dumps({"jobs": [{**_job(9, 2).to_dict(), "workers": {"0": _ip(0)}}]}), r"worker bits \[1\] have no address"),
], ids=["broken_json", "duplicate_id", "missing_address"])
def test_a_config_it_cannot_use_keeps_the_old_jobs_and_the_ps_serves_on(tmp_path, config, why):
    """A reload of a bad config logs one line saying why and keeps jobs [7] unacknowledged
    (generation stays 1); job 7 still completes; a good config afterwards is generation 2."""
    job7 = _job(7, 2)
    ps = PsProcess(tmp_path, [job7])
    workers = Workers(job7)
    try:
        assert ps.acked(1) == {"generation": 1, "jobs": [7]}
        ps.reload(config)
        line = ps.stderr_line()
        assert "reload refused, still serving jobs [7]" in line
        assert re.search(why, line), line
        assert json.loads(ps.ack.read_text()) == {"generation": 1, "jobs": [7]}
        ps.send(data_packet(7, 0, 1 << 0, _values(1)))
        ps.send(data_packet(7, 0, 1 << 1, _values(2)))
        assert decode(workers.results()[0])[1] == (3,) * 32
        ps.reload([job7, _job(9, 2)])
        assert ps.acked(2) == {"generation": 2, "jobs": [7, 9]}
        assert ps.stop()["jobs"]["7"]["completed_seqs"] == 1
    finally:
        ps.kill()
        workers.close()
