"""What the emulator checks of a config on top of what every back end checks
(:func:`experiment.config.schema.validate`): its ECN thresholds against its queues, AF_XDP frame sizes,
cluster mode, the wall-time limit, and that it runs a jobs list (no trace); and what
``run_testbed.py check`` adds about a config it takes. Pure: no root, nothing on the machine
touched but reading its free memory.
"""

from __future__ import annotations

import math

from common.errors import ConfigError
from congestion import congestion_control
from emulator.variants import ECN_METHODS, SWITCH_PORT_CHOICES, container_engine, ecn_marking
from experiment.config.schema import (
    LOCAL_NAMES,
    ExperimentConfig,
    fail,
    ina_jobs,
    latest_end_s,
    policy_specs,
    wall_time_lower_bound_s,
)
from measure.ports import AFXDP_MAX_MTU
from measure.shaping import frame_bytes


def _slowest_compute(cfg: ExperimentConfig) -> tuple[str, float]:
    """The model with the longest paper-scale compute time per iteration among the jobs, and that time."""
    from jobs.models import job_model

    return max(((j.model, job_model(j.model, j.compute_ms).compute_time_s) for j in cfg.jobs), key=lambda t: t[1],
               default=("", 0.0))


def _format_duration(seconds: float) -> str:
    """``8h 20m``, ``12m 5s`` or ``42.5 s``: a wall time for a human."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        m, s = divmod(round(seconds), 60)
        return f"{m}m {s}s"
    h, m = divmod(minutes, 60)
    return f"{h}h {m}m"



def runs_no_trace(cfg: ExperimentConfig, _g) -> None:
    if cfg.trace.file:
        raise ConfigError("config.trace: traces run on the simulator back end (python3 run_testbed.py --backend sim, "
                          "check --backend sim); the emulator runs a jobs: list")


def afxdp_mtu(cfg: ExperimentConfig) -> None:
    if all(cfg.mtu > kind.max_mtu for kind in SWITCH_PORT_CHOICES[cfg.switch_ports]):
        fail("config.mtu", cfg.mtu, "is above what AF_XDP ports carry (4 kB frames)",
             f"at most {AFXDP_MAX_MTU} with switch_ports: afxdp; use switch_ports: auto or system")





def cluster_mode(cfg: ExperimentConfig, g) -> None:
    """Cluster mode: servers named once, none of them this machine, no more than the racks or pods
    to spread, and none of what runs on one machine only (an ECN marker that must run, AF_XDP
    ports, INA aggregators, Docker workers)."""
    from topo.partition import rack_groups

    c = cfg.cluster
    if not c.servers:
        return
    where = "config.cluster.servers"
    for s in c.servers:
        if s in LOCAL_NAMES:
            fail(where, s, "is this machine, which always takes part", "the other servers only")
    if len(set(c.servers)) != len(c.servers):
        fail(where, list(c.servers), "names a server twice", "each server once")
    units = len(rack_groups(g))
    if len(c.servers) + 1 > units:
        fail(where, list(c.servers), f"is more servers than the topology's {units} racks or pods to spread "
             f"(this machine takes a share too)", f"at most {units - 1} other server(s)")
    blockers = [(ecn_marking(cfg.ecn.marking).required, "ecn.marking: required (the ECN marker runs on one machine; "
                 "set ecn.marking: optional or off)"),
                (all(kind.one_machine_only for kind in SWITCH_PORT_CHOICES[cfg.switch_ports]),
                 "switch_ports: afxdp (set switch_ports: auto or system)"),
                (bool(ina_jobs(cfg)), "INA jobs (their aggregators run on one machine)"),
                (container_engine(cfg.container.engine).one_machine_only, f"container.engine: {cfg.container.engine}")]
    for blocked, what in blockers:
        if blocked:
            raise ConfigError(f"config.cluster: cluster mode runs without {what}")



def time_limit(cfg: ExperimentConfig) -> None:
    """Reject a configuration whose wall-time lower bound exceeds ``time_limit_s``, naming the fix."""
    bound_s = wall_time_lower_bound_s(cfg)
    if bound_s <= cfg.time_limit_s:
        return
    model, compute_s = _slowest_compute(cfg)
    n_policies = len(policy_specs(cfg))
    last = max(cfg.jobs, key=lambda j: j.arrival_s)
    if last.arrival_s > 0 and latest_end_s(cfg) > (cfg.warmup_iterations + cfg.iterations) * compute_s:
        terms = (f"{n_policies} {'policy' if n_policies == 1 else 'policies'} x (job {last.name!r} arriving "
                 f"at {last.arrival_s:g} s + its iterations) x {cfg.dilation:g}")
    else:
        terms = (f"{n_policies} {'policy' if n_policies == 1 else 'policies'} x "
                 f"{cfg.warmup_iterations + cfg.iterations} iterations x {compute_s:g} s compute ({model}) x "
                 f"{cfg.dilation:g}")
    in_s = f" ({bound_s:.0f} s)" if bound_s >= 60 else ""
    takes = f"at least {_format_duration(bound_s)}{in_s} of wall time ({terms})"
    limit = f"above time_limit_s {cfg.time_limit_s:g} s"
    if cfg.dilation > 1:
        raise ConfigError(f"config.dilation: {cfg.dilation:g} makes the experiment take {takes}, {limit}; "
                          f"lower dilation or raise time_limit_s")
    raise ConfigError(f"config.time_limit_s: the experiment takes {takes}, {limit}; raise time_limit_s "
                      f"or run fewer iterations or policies")


def ecn_thresholds(cfg: ExperimentConfig) -> None:
    e = cfg.ecn
    if e.max_threshold_bytes and e.max_threshold_bytes < e.threshold_bytes:
        raise ConfigError(f"config.ecn.max_threshold_bytes: {e.max_threshold_bytes} is below threshold_bytes "
                          f"{e.threshold_bytes}")
    marking = ecn_marking(e.marking)
    if marking.on:
        # A threshold above the FIFO's limit is never reached: nothing would be marked.
        queue_bytes = cfg.queue_packets * frame_bytes(cfg.mtu)
        for key in ("threshold_bytes", "max_threshold_bytes"):
            value = getattr(e, key)
            if value > queue_bytes and not (key == "threshold_bytes" and e.threshold_us > 0):
                fail(f"config.ecn.{key}", value, "is above the queue, so it is never reached",
                     f"an integer in [0, {queue_bytes}]: queue_packets {cfg.queue_packets} x "
                     f"(mtu {cfg.mtu} + {frame_bytes(0)}) bytes")
    if marking.on and not congestion_control(cfg.congestion_control).reacts_to_ecn:
        raise ConfigError(f"config.congestion_control: {cfg.congestion_control!r} ignores ECN marks; use one "
                          f"that reacts to them (cubic, reno, dctcp) or set ecn.marking: off")


def threshold_delay(cfg: ExperimentConfig, g) -> None:
    """K given as a delay (``threshold_us``) is held to the queue as ``threshold_bytes`` is.

    A port holds K as the bytes its rate drains in that delay, so K is fewest bytes at the
    slowest port: a K above the queue there is above it at every port and is never reached.
    """
    from common.units import transfer_time_s, virtual_s, wall_s
    from measure.marking import marking_params
    from measure.shaping import link_rates_mbps

    e = cfg.ecn
    if not ecn_marking(e.marking).on or not e.threshold_us > 0:
        return
    rate_mbps = min(link_rates_mbps(g, cfg.scale, cfg.dilation).values())
    p = marking_params(e.threshold_bytes, wall_s(e.threshold_us, cfg.dilation), e.max_threshold_bytes,
                       e.max_probability, rate_mbps, cfg.queue_packets, cfg.mtu)
    if p.threshold_bytes > p.limit_bytes:
        max_us = round(virtual_s(transfer_time_s(p.limit_bytes, rate_mbps), cfg.dilation) * 1e6, 6)
        fail("config.ecn.threshold_us", e.threshold_us,
             f"is {p.threshold_bytes:.0f} bytes of queue at the slowest port ({rate_mbps:g} Mbit/s), above the "
             f"queue, so it is never reached",
             f"at most {math.floor(max_us)} us: the time that port takes to drain the queue, queue_packets "
             f"{cfg.queue_packets} x (mtu {cfg.mtu} + {frame_bytes(0)}) = {p.limit_bytes:.0f} bytes")


def marking_ramp(cfg: ExperimentConfig, g) -> None:
    """The BPF marker (``method`` bpf, or auto where the kernel lacks RED) holds the K..K_max ramp as a
    time at the port's rate, of at most ``MAX_RAMP_NS``; check it at the slowest port, where it is longest."""
    from common.units import wall_s
    from measure.marking import MAX_RAMP_NS, bytes_to_ns, marking_params
    from measure.shaping import link_rates_mbps

    e = cfg.ecn
    if (not ecn_marking(e.marking).on or not any(m.ramp_as_time for m in ECN_METHODS[e.method])
            or not e.max_threshold_bytes):
        return
    for rate_mbps in sorted(set(link_rates_mbps(g, cfg.scale, cfg.dilation).values())):
        p = marking_params(e.threshold_bytes, wall_s(e.threshold_us, cfg.dilation), e.max_threshold_bytes,
                           e.max_probability, rate_mbps, cfg.queue_packets, cfg.mtu)
        ramp_ns = bytes_to_ns(p.max_threshold_bytes, rate_mbps) - bytes_to_ns(p.threshold_bytes, rate_mbps)
        if ramp_ns > MAX_RAMP_NS:
            fail("config.ecn.max_threshold_bytes", e.max_threshold_bytes,
                 f"makes the marking ramp K..K_max {ramp_ns / 1e9:.1f} s long at {rate_mbps:g} Mbit/s",
                 f"the BPF marker holds at most {MAX_RAMP_NS / 1e9:g} s; lower it or use ecn.method: red")


def describe(cfg: ExperimentConfig, g) -> str:
    """The dilation, the least wall time and, in cluster mode, how the network is spread."""
    spread = ""
    if cfg.cluster.servers:
        from topo import partition

        servers = ["localhost", *cfg.cluster.servers]
        how = partition.spread(g, servers)
        spread = (f"; spread over {len(servers)} servers ("
                  + ", ".join(f"{s}: {len(how['nodes'][s])} nodes" for s in servers)
                  + f"; {len(how['tunnels'])} links as SSH tunnels)")
    return (f"dilation {cfg.dilation:g}: at least {wall_time_lower_bound_s(cfg):.0f} s of wall time (limit "
            f"{cfg.time_limit_s:g} s){spread}{_describe_memory(cfg, g)}")


def _describe_memory(cfg: ExperimentConfig, g) -> str:
    """The network's predicted memory on this machine (:mod:`measure.footprint`), per port kind the
    config allows; on one machine only."""
    from measure.footprint import footprint, mem_available_bytes

    if cfg.cluster.servers:
        return ""
    try:
        available = mem_available_bytes()
    except (OSError, KeyError, ValueError):
        return ""
    prints = [footprint(g, kind.name, available) for kind in SWITCH_PORT_CHOICES[cfg.switch_ports]]
    parts = [f"{fp.predicted_bytes / 1e9:.1f} GB with {fp.port_kind} ports" + ("" if fp.fits else " (does not fit)")
             for fp in prints]
    return (f"; network memory about {' or '.join(parts)} ({prints[0].switch_ports} switch ports), of "
            f"{available / 1e9:.1f} GB available")

