"""hvd.torch on the task of DDP's peer benchmark (../shared/peers/ddp_mlp.py): the same
data, model, seeds, SGD lr 0.1 and global batch 64 split between the ranks, one thread per
rank; only the gradient exchange differs. Run under hvdrun:

    hvdrun -np 2 python examples/pytorch/bench_mlp.py --epochs 2 --model mlp

Prints one line per epoch and, on rank 0, a final JSON line like the peer's.
"""
import argparse
import json
import time

import torch
import torch.nn as nn

import hvd.torch as hvd


def build(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(512, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(60000, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (60000,), generator=g)
    torch.manual_seed(1)
    model = build(args.model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    local = args.batch // world
    idx = torch.arange(rank, 60000, world)
    rates, losses = [], []
    for ep in range(args.epochs):
        hvd.barrier()
        t0 = time.perf_counter()
        steps = len(idx) // local
        total = 0.0
        for s in range(steps):
            b = idx[s * local:(s + 1) * local]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[b]), y[b])
            loss.backward()
            opt.step()
            total += loss.item()
        hvd.barrier()
        dt = time.perf_counter() - t0
        mean = hvd.allreduce(torch.tensor([total / steps]), name=f"loss.{ep}")
        rates.append(round(steps * args.batch / dt))
        losses.append(round(mean.item(), 4))
        if rank == 0:
            print(f"epoch {ep + 1}/{args.epochs}  loss {losses[-1]:.4f}  "
                  f"{rates[-1]} examples/s on {world} ranks", flush=True)
    if rank == 0:
        print(json.dumps({"peer": "hvd-torch", "model": args.model, "world": world,
                          "examples_per_s": rates, "loss": losses}))


if __name__ == "__main__":
    main()
