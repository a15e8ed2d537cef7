"""Run the OpenFlow controller (``controller.serve``) as a child process of the testbed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from common.errors import EmulationError
from common.jsonfile import write_json_atomic
from common.paths import PROJECT_ROOT
from common.sockets import free_tcp_port
from controller.app import CONF_ENV
from emulator.procs import stop_process, wait_for


class ControllerProcess:
    """The controller process for one network: start, wait until listening or ready, stop.

    Files in ``run_dir``: ``controller.json`` (its configuration), ``controller.log``,
    ``controller_status.json`` (ready switches, errors) and ``port_stats.jsonl``.
    """

    def __init__(self, run_dir: str, topology_path: str, mode: str = "ecmp", stats_interval_s: float = 0.5,
                 ina_ports: dict[str, int] | None = None):
        self.run_dir = run_dir
        self.port = free_tcp_port()
        self.log_path = os.path.join(run_dir, "controller.log")
        self.status_path = os.path.join(run_dir, "controller_status.json")
        self.stats_path = os.path.join(run_dir, "port_stats.jsonl")
        self.conf_path = os.path.join(run_dir, "controller.json")
        self.conf = {
            "topology": topology_path, "mode": mode, "stats_interval_s": stats_interval_s,
            "stats_path": self.stats_path, "status_path": self.status_path, "ina_ports": dict(ina_ports or {}),
        }
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 30.0, on_spawn=None) -> None:
        """Start the controller and wait until it accepts connections on 127.0.0.1.

        Args:
            timeout_s: how long to wait for it to listen.
            on_spawn: called with the controller's PID as soon as it exists (to record it).
        """
        write_json_atomic(self.conf_path, self.conf)
        env = dict(os.environ, PYTHONPATH=PROJECT_ROOT, **{CONF_ENV: self.conf_path})
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "controller.serve", "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=PROJECT_ROOT, start_new_session=True)
        if on_spawn is not None:
            on_spawn(self.proc.pid)

        def listening():
            self.check_alive()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                return False

        try:
            wait_for(listening, timeout_s, 0.1, f"the controller to listen on 127.0.0.1:{self.port}")
        except TimeoutError as e:
            raise EmulationError(f"{e}; see {self.log_path}") from None

    def status(self) -> dict:
        """The controller's status file (empty dict before it exists)."""
        try:
            with open(self.status_path) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def check_alive(self) -> None:
        """Raise :class:`EmulationError` if the controller died or recorded an error."""
        st = self.status()
        if st.get("errors"):
            raise EmulationError(f"controller error: {st['errors'][0].splitlines()[0]} ... see {self.log_path}")
        if self.proc is not None and self.proc.poll() is not None:
            rc = self.proc.returncode
            how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
            raise EmulationError(f"the controller (pid {self.proc.pid}) {how}: routes and port statistics are gone, "
                                 f"so the run stops; see {self.log_path}")

    def wait_ready(self, timeout_s: float = 60.0) -> dict:
        """Wait until every switch of the topology has its rules installed."""

        def ready():
            self.check_alive()
            st = self.status()
            return st if st and set(st["ready_dpids"]) >= set(st["expected_dpids"]) else None

        try:
            return wait_for(ready, timeout_s, 0.1, "every switch to be programmed")
        except TimeoutError as e:
            st = self.status()
            missing = sorted(set(st.get("expected_dpids", ())) - set(st.get("ready_dpids", ())))
            raise EmulationError(f"{e}; switches not programmed: {missing}; see {self.log_path}") from None

    def logged_exception(self) -> str | None:
        """The first line of any traceback or error in the controller log, else None."""
        try:
            with open(self.log_path, errors="replace") as f:
                for line in f:
                    if "Traceback" in line or " ERROR " in line or "Exception" in line:
                        return line.strip()
        except FileNotFoundError:
            pass
        return None

    def stop(self) -> None:
        """Stop the controller process (by PID)."""
        if self.proc is not None:
            stop_process(self.proc)
