"""Every collective and dtype on every rank, checked against values computed locally."""
import torch

import hvd.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.bool]
if hasattr(torch, "uint16"):
    DTYPES.append(torch.uint16)


def value(r, dtype, shape=(3, 4)):
    """What rank r contributes: small numbers every dtype holds exactly."""
    base = torch.arange(12).reshape(3, 4)[: shape[0]] % 5 + r + 1
    return (base % 2).to(dtype) if dtype == torch.bool else base.to(dtype)


def close(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
    assert torch.equal(a, b), (a, b)


for dtype in DTYPES:
    name = str(dtype)
    mine = value(rank, dtype)
    everyone = [value(r, dtype) for r in range(size)]
    # References are computed in float64 (exact for these values: torch lacks some
    # kernels for the small unsigned types) and cast back.
    wide = torch.stack([t.double() for t in everyone])
    if dtype != torch.bool:
        close(hvd.allreduce(mine, op=hvd.Sum, name=f"sum.{name}"), wide.sum(0).to(dtype))
        close(hvd.allreduce(mine, op=hvd.Max, name=f"max.{name}"), wide.amax(0).to(dtype))
        close(hvd.allreduce(mine, op=hvd.Min, name=f"min.{name}"), wide.amin(0).to(dtype))
        close(hvd.allreduce(mine, op=hvd.Product, name=f"prod.{name}"),
              wide.prod(0).to(dtype))
    if dtype.is_floating_point:
        close(hvd.allreduce(mine, name=f"avg.{name}"), wide.mean(0).to(dtype))
        inplace = mine.clone()
        hvd.allreduce_(inplace, op=hvd.Sum, prescale_factor=2.0, name=f"scaled.{name}")
        close(inplace, (2 * wide.sum(0)).to(dtype))
        close(hvd.reducescatter(torch.cat([mine] * size), op=hvd.Sum, name=f"rs.{name}"),
              wide.sum(0).to(dtype))
    close(hvd.broadcast(mine, 1 % size, name=f"bcast.{name}"), everyone[1 % size])
    ragged = value(rank, dtype, (rank % 3 + 1, 4))
    close(hvd.allgather(ragged, name=f"gather.{name}"),
          torch.cat([value(r, dtype, (r % 3 + 1, 4)) for r in range(size)]))
    sent = torch.cat([value(rank, dtype, (1, 4))] * size)
    got, splits = hvd.alltoall(sent, splits=[1] * size, name=f"a2a.{name}")
    close(got, torch.cat([value(r, dtype, (1, 4)) for r in range(size)]))
    assert splits.tolist() == [1] * size

# Grouped and asynchronous forms, and the in-place broadcast.
group = [torch.full((5,), float(rank + i)) for i in range(3)]
out = hvd.grouped_allreduce(group, op=hvd.Sum, name="group")
for i, t in enumerate(out):
    close(t, torch.full((5,), float(sum(r + i for r in range(size)))))
# Compressed to bf16 on the wire, f32 back: 1 + 2^-10 is not a bf16 and rounds to 1.
fine = [torch.full((5,), 1.0 + 2.0 ** -10) for _ in range(3)]
for t in hvd.grouped_allreduce(fine, op=hvd.Sum, name="group.bf16",
                               compression=hvd.Compression.bf16):
    close(t, torch.full((5,), float(size)))
for t in hvd.grouped_allreduce(fine, op=hvd.Sum, name="group.exact"):
    close(t, torch.full((5,), size * (1.0 + 2.0 ** -10)))
handle = hvd.allreduce_async(torch.ones(7), op=hvd.Sum, name="async")
close(hvd.synchronize(handle), torch.full((7,), float(size)))
assert hvd.poll(handle)
t = torch.full((4,), float(rank))
hvd.broadcast_(t, 0, name="bcast_inplace")
close(t, torch.zeros(4))
assert hvd.broadcast_object({"from": rank}, 0) == {"from": 0}
assert hvd.allgather_object(rank * 10) == [r * 10 for r in range(size)]
# A process set of rank 0 alone, and the barrier.
solo = hvd.add_process_set([0])
if rank == 0:
    close(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="solo", process_set=solo), torch.ones(2))
hvd.barrier()
hvd.remove_process_set(solo)
print(f"rank {rank}: ops ok", flush=True)
hvd.shutdown()
