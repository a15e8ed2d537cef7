"""Run a command on a server of an emulation cluster for exactly as long as its SSH session lasts.

``ssh server python remote_run.py --cwd DIR -- ARGV...`` starts ARGV (in its own process
group) and exits with its exit code. When the SSH session ends for any reason (the run stopped
the local ``ssh`` client, the runner was killed, the connection broke), standard input reaches
end of file here and ARGV's whole process group is killed: nothing outlives the session on the
remote server. A plain ``ssh`` without a terminal would leave ARGV running.

Standard library only: it runs by path, before anything of the project is importable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--cwd" or argv[2] != "--":
        print("usage: remote_run.py --cwd DIR -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    cwd, cmd = argv[1], argv[3:]
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        print(f"remote_run: cannot start {cmd[0]}: {e}", file=sys.stderr)
        return 127

    def hang_up() -> None:
        while os.read(0, 65536):  # b"" at end of file: the session is gone (unbuffered: no lock at exit)
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    threading.Thread(target=hang_up, daemon=True).start()
    code = proc.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # not sys.exit: the reader thread may still be blocked on standard input
