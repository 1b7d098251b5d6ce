"""Autograd through every collective on 2 ranks, against Horovod's gradients worked out
by hand: each rank sends back a different gradient, so a gradient that skipped the
collective, or took the wrong one, shows."""
import torch

import hvd.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
assert size == 2, "written for 2 ranks"


def leaf(*shape, value=1.0):
    return torch.full(shape, float(value), dtype=torch.float64, requires_grad=True)


def check(what, got, want):
    assert torch.equal(got, want.to(got.dtype)), (what, got, want)


# allreduce: the gradient is the same allreduce of the incoming gradients (1 and 2).
x = leaf(3)
hvd.allreduce(x, op=hvd.Sum, name="g.sum").backward(torch.full((3,), rank + 1.0))
check("allreduce sum", x.grad, torch.full((3,), 3.0))
x = leaf(3)
hvd.allreduce(x, name="g.avg", prescale_factor=2.0).backward(torch.full((3,), rank + 1.0))
check("allreduce average, prescale 2", x.grad, torch.full((3,), 3.0))

# grouped_allreduce: each tensor's gradient on its own.
a, b = leaf(2), leaf(4)
out = hvd.grouped_allreduce([a, b], op=hvd.Sum, name="g.grouped")
(out[0].sum() * (rank + 1) + out[1].sum() * 10).backward()
check("grouped a", a.grad, torch.full((2,), 3.0))
check("grouped b", b.grad, torch.full((4,), 20.0))

# broadcast from rank 1: the root gets the averaged gradient, the others zeros.
x = leaf(2, value=rank)
hvd.broadcast(x, root_rank=1, name="g.bcast").backward(torch.full((2,), rank + 1.0))
check("broadcast", x.grad, torch.full((2,), 1.5 if rank == 1 else 0.0))

# allgather of 1 and 2 rows: this rank's rows of the averaged incoming gradient.
x = leaf(rank + 1, 2)
gathered = hvd.allgather(x, name="g.gather")
assert gathered.shape == (3, 2)
incoming = torch.arange(6, dtype=torch.float64).reshape(3, 2) * (rank + 1)
gathered.backward(incoming)
average = torch.arange(6, dtype=torch.float64).reshape(3, 2) * 1.5
check("allgather", x.grad, average[:1] if rank == 0 else average[1:])

# grouped_allgather: the same, per tensor.
p, q = leaf(rank + 1, 2), leaf(1, 3)
g1, g2 = hvd.grouped_allgather([p, q], name="g.grouped_gather")
(g1.sum() * (rank + 1) + (g2 * torch.tensor([[1.0], [2.0]], dtype=torch.float64)).sum()).backward()
check("grouped allgather p", p.grad, torch.full((rank + 1, 2), 1.5))
check("grouped allgather q", q.grad, torch.full((1, 3), float(rank + 1)))

# alltoall: rank r sends r+1 rows to each rank; the gradient travels back, so the rows
# sent to rank d come back with rank d's incoming gradient (d + 1).
x = leaf(2 * (rank + 1), 2)
got, received = hvd.alltoall(x, splits=[rank + 1, rank + 1], name="g.a2a")
assert received.tolist() == [1, 2], received
got.backward(torch.full(got.shape, rank + 1.0, dtype=torch.float64))
want = torch.cat([torch.full((rank + 1, 2), 1.0), torch.full((rank + 1, 2), 2.0)])
check("alltoall", x.grad, want)

# reducescatter: the allgather of the incoming gradients, times the set's size for Sum
# and times the scale factors.
x = leaf(4, 2)
hvd.reducescatter(x, op=hvd.Sum, prescale_factor=0.5, name="g.rs").backward(
    torch.full((2, 2), rank + 1.0, dtype=torch.float64))
check("reducescatter", x.grad, torch.cat([torch.full((2, 2), 1.0), torch.full((2, 2), 2.0)]))
a, b = leaf(4), leaf(2)
outs = hvd.grouped_reducescatter([a, b], op=hvd.Average, name="g.grouped_rs")
(outs[0].sum() * (rank + 1) + outs[1].sum()).backward()
check("grouped reducescatter a", a.grad, torch.tensor([1.0, 1.0, 2.0, 2.0]))
check("grouped reducescatter b", b.grad, torch.ones(2))

print(f"rank {rank}: gradients ok", flush=True)
