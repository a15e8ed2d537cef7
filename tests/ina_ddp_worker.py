"""A two-layer model trained with DDP for a few steps, its gradients summed by the gloo allreduce
or over INA (``ina.client.ddp_hook``): ``python tests/ina_ddp_worker.py RANK WORLD MASTER_PORT
gloo|ina PS_IP JOB_ID BIND_IP`` (BIND_IP: this rank's machine address, where its INA results come).
Prints the loss of every step as one JSON list (used by
tests/test_ina_client.py)."""

from __future__ import annotations

import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from ina.client import InaClient, ddp_hook  # noqa: E402

STEPS = 8


def main() -> int:
    rank, world, port, mode, ps_ip, job_id, bind_ip = sys.argv[1:8]
    rank, world = int(rank), int(world)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    ddp = DistributedDataParallel(model)
    client = None
    if mode == "ina":
        client = InaClient(int(job_id), rank, ps_ip, scale=1e6, bind=bind_ip)
        ddp.register_comm_hook(None, ddp_hook(client, world))
    gen = torch.Generator().manual_seed(100 + rank)
    x, y = torch.randn(16, 32, generator=gen), torch.randint(0, 4, (16,), generator=gen)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    dist.barrier()
    print(json.dumps({"losses": losses, "results": client.stats.results if client else None}), flush=True)
    # Both ranks are past the barrier and the result is out: leave without gloo's teardown, whose
    # threads abort the process at exit now and then ("terminate called without an active exception").
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
