"""Start the controller application as its own process (os-ken 4 has no manager script).

Usage::

    TESTBED_CONTROLLER_CONF=conf.json python -m controller.serve --port 6653

It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv=None) -> int:
    """Parse arguments, start os-ken with the testbed app, run until killed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True, help="OpenFlow TCP port on 127.0.0.1")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from os_ken import cfg
    from os_ken.base import app_manager
    from os_ken.lib import hub

    cfg.CONF(args=["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", str(args.port)],
             project="os_ken")
    mgr = app_manager.AppManager.get_instance()
    mgr.load_apps(["controller.app"])
    contexts = mgr.create_contexts()
    services = mgr.instantiate_apps(**contexts)
    hub.joinall(services)
    return 0


if __name__ == "__main__":
    sys.exit(main())
