"""ResNet-50 training speed three ways, the same job each time: torchvision's model (no
weights), a fixed synthetic batch per rank, SGD lr 0.01, warm-up steps, then timed steps
between two `torch.cuda.synchronize()` (and a barrier), the slowest rank's time counted.

    python bench_resnet50.py --mode plain                    # no distribution
    hvdrun -np 2 python bench_resnet50.py --mode hvd         # hvd.torch DistributedOptimizer
    python bench_resnet50.py --mode ddp --world 2            # DistributedDataParallel, NCCL

Each rank uses cuda:<local rank modulo the GPUs>. DDP's ranks on a shared GPU each take a
NCCL_HOSTID of their own (NCCL refuses two ranks of a communicator on one GPU of one
host); hvd does the same itself. Rank 0 prints one JSON line: mode, ranks, images/s per
rank, ms per step, and for hvd the path its CUDA tensors took (`_hvd.device_path()`).
`--device cpu` (Gloo for DDP) runs the same code without a GPU.
"""
import argparse
import json
import os
import socket
import time

import torch
import torch.nn.functional as F
import torchvision


def device_for(local_rank, kind):
    if kind == "cpu":
        return torch.device("cpu")
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(args, device, wrap, barrier, slowest):
    """Times args.steps steps after args.warmup; returns the slowest rank's seconds."""
    torch.manual_seed(0)
    model = torchvision.models.get_model(args.model, weights=None).to(device)
    model, opt = wrap(model, torch.optim.SGD(model.parameters(), lr=0.01))
    data = torch.randn(args.batch, 3, args.image_size, args.image_size, device=device)
    target = torch.randint(0, 1000, (args.batch,), device=device)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(data), target).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    sync(device)
    barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync(device)
    return slowest(time.perf_counter() - start)


def report(args, world, seconds, **extra):
    row = {"bench": "resnet50", "model": args.model, "mode": args.mode, "ranks": world,
           "batch": args.batch, "img_per_s_per_rank": args.batch * args.steps / seconds,
           "ms_per_step": seconds / args.steps * 1e3, **extra}
    print(json.dumps(row), flush=True)


def plain(args):
    device = device_for(0, args.device)
    seconds = train(args, device, lambda m, o: (m, o), lambda: None, lambda s: s)
    report(args, 1, seconds)


def horovod(args):
    import hvd.torch as hvd
    from hvd import _hvd

    hvd.init()
    device = device_for(hvd.local_rank(), args.device)

    def wrap(model, opt):
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        return model, hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())

    def slowest(seconds):
        return hvd.allreduce(torch.tensor([seconds]), op=hvd.Max, name="bench.seconds").item()

    seconds = train(args, device, wrap, hvd.barrier, slowest)
    if hvd.rank() == 0:
        report(args, hvd.size(), seconds, device_path=list(_hvd.device_path()))


def ddp_rank(rank, args, port):
    import torch.distributed as dist

    backend = "gloo" if args.device == "cpu" else "nccl"
    if backend == "nccl" and torch.cuda.device_count() < args.world:
        os.environ["NCCL_HOSTID"] = f"ddp-rank-{rank}"
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    device = device_for(rank, args.device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.world)

    def wrap(model, opt):
        ids = None if device.type == "cpu" else [device]
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        return model, torch.optim.SGD(model.parameters(), lr=0.01)

    def slowest(seconds):
        t = torch.tensor([seconds], device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    seconds = train(args, device, wrap, dist.barrier, slowest)
    if rank == 0:
        report(args, args.world, seconds, backend=backend)
    dist.destroy_process_group()


def ddp(args):
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(ddp_rank, args=(args, port), nprocs=args.world)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["plain", "hvd", "ddp"], required=True)
    p.add_argument("--world", type=int, default=2, help="DDP's ranks")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=64, help="images per rank and step")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = p.parse_args()
    {"plain": plain, "hvd": horovod, "ddp": ddp}[args.mode](args)


if __name__ == "__main__":
    main()
