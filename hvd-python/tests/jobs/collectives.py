"""Horovod's operations that hvd.torch gained on 2 ranks: grouped allgather and
reducescatter (and their async forms), reducescatter's scale factors, scaling in the
tensor's own precision, sparse allreduce, and the errors a Horovod program expects
(join, Adasum in reducescatter, float splits)."""
import numpy as np
import torch

import hvd.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
assert size == 2, "written for 2 ranks"


def expect(error, text, call):
    try:
        call()
    except error as e:
        assert str(e) == text, (str(e), text)
        return
    raise AssertionError(f"expected {error.__name__}: {text}")


# Grouped allgather: ranks contribute 1 and 2 rows.
parts = [torch.full((rank + 1, 2), float(rank)), torch.full((1,), rank, dtype=torch.int32)]
gathered = hvd.grouped_allgather(parts, name="grouped.gather")
assert torch.equal(gathered[0], torch.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]))
assert torch.equal(gathered[1], torch.tensor([0, 1], dtype=torch.int32))
later = hvd.grouped_allgather_async(parts, name="grouped.gather.async")
assert [t.shape for t in hvd.synchronize(later)] == [(3, 2), (2,)]

# Grouped reducescatter, with Horovod's scale factors.
tensors = [torch.arange(4, dtype=torch.float32) + rank, torch.ones(2, 3)]
scattered = hvd.grouped_reducescatter(tensors, op=hvd.Sum, prescale_factor=0.5,
                                      postscale_factor=4.0, name="grouped.rs")
whole = (torch.arange(4, dtype=torch.float32) * 2 + 1) * 0.5 * 4.0
assert torch.equal(scattered[0], whole[rank * 2:rank * 2 + 2]), scattered
assert torch.equal(scattered[1], torch.full((1, 3), 4.0)), scattered
handle = hvd.grouped_reducescatter_async(tensors, op=hvd.Average, name="grouped.rs.async")
assert torch.equal(hvd.synchronize(handle)[1], torch.ones(1, 3))

# Scaled in the tensor's own precision, as Horovod does: f32 by the factor rounded to
# f32, exactly (the tests of Horovod compare with rtol=0).
np.random.seed(1234)
factor = np.random.uniform()
torch.manual_seed(1234)
t = torch.FloatTensor(17, 17).random_(-100, 100)
pre = hvd.reducescatter(t, op=hvd.Sum, prescale_factor=factor, name="rs.pre")
scaled = (torch.tensor(factor, dtype=torch.float32) * t) * size
assert torch.equal(pre, scaled[:9] if rank == 0 else scaled[9:]), "reducescatter prescale"
post = hvd.allreduce(t, op=hvd.Sum, postscale_factor=factor, name="ar.post")
assert torch.equal(post, (size * t) * torch.tensor(factor, dtype=torch.float32))
half = hvd.allreduce(t.half(), op=hvd.Sum, prescale_factor=factor, name="ar.half")
assert torch.equal(half, ((torch.tensor(factor, dtype=torch.float32) * t).half().float()
                          * size).half())

# Sparse allreduce: the indices and values of both ranks, averaged.
dense = torch.zeros(5, 3)
dense[rank * 2] = rank + 1.0
dense[4] = 1.0
gathered = hvd.sparse_allreduce_async(dense.to_sparse(), name="sparse", op=hvd.Average)()
assert gathered.is_sparse
assert torch.equal(gathered.to_dense(), hvd.allreduce(dense, name="dense"))

# Errors a Horovod program catches by type.
expect(NotImplementedError,
       "reducescatter does not support Adasum: Adasum combines whole tensors (allreduce, "
       "DistributedOptimizer); use Sum or Average",
       lambda: hvd.reducescatter(torch.ones(4), op=hvd.Adasum))
expect(ValueError,
       "alltoall: splits must hold integers (an int32 tensor or a list), not torch.float32",
       lambda: hvd.alltoall(torch.ones(2), splits=torch.ones(2)))
expect(ValueError, "grouped_reducescatter: every tensor needs at least one dimension",
       lambda: hvd.grouped_reducescatter([torch.zeros(3, 1), torch.tensor(1.0)]))

# While rank 0 has joined, rank 1's allgather and broadcast fail with a RuntimeError
# (HorovodInternalError) naming the joined rank; then rank 1 joins too, and nobody hangs.
if rank == 0:
    last = hvd.join()
else:
    cases = (
        ("allgather", "joined.gather",
         lambda: hvd.allgather(torch.ones(1), name="joined.gather")),
        ("broadcast", "joined.bcast",
         lambda: hvd.broadcast(torch.ones(1), 1, name="joined.bcast")),
    )
    for op, name, call in cases:
        expect(hvd.HorovodInternalError,
               f"rank 1: {op} of tensor '{name}' cannot run while rank 0 has joined: only "
               "allreduce can run while ranks have joined", call)
    last = hvd.join()
assert last == 1, last
assert issubclass(hvd.HorovodInternalError, RuntimeError)

print(f"rank {rank}: collectives ok", flush=True)
