"""Process sets on 3 ranks with the set {1, 2}: roots are global ranks (rank 2 is the
set's rank 1), a rank outside the set is told so, and a DistributedOptimizer over the
set leaves rank 0 training on its own."""
import torch

import hvd.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
assert size == 3, "written for 3 ranks"
pair = hvd.add_process_set([2, 1])
assert pair.ranks == [1, 2] and pair.included() == (rank != 0)


def expect(error, text, call):
    try:
        call()
    except error as e:
        assert str(e) == text, (str(e), text)
        return
    raise AssertionError(f"expected {error.__name__}: {text}")


if rank == 0:
    expect(ValueError, "rank 0 is not a member of process set 1 (ranks [1, 2])", pair.rank)
else:
    assert pair.rank() == rank - 1 and pair.size() == 2
    got = hvd.broadcast(torch.full((2,), float(rank)), root_rank=2, process_set=pair,
                        name="from.global.2")
    assert torch.equal(got, torch.full((2,), 2.0)), got
    assert hvd.broadcast_object({"from": rank}, root_rank=2, process_set=pair) == {"from": 2}
    expect(ValueError,
           "broadcast: root rank 0 is not a member of process set 1 (ranks [1, 2]); roots "
           "are global ranks",
           lambda: hvd.broadcast(torch.ones(1), root_rank=0, process_set=pair))

# The optimizer over {1, 2}: its members average their gradients, rank 0 steps on its own
# (it takes part in no collective, so it cannot wait for the others).
torch.manual_seed(0)
model = torch.nn.Linear(3, 1, bias=False)
x = torch.full((1, 3), float(rank + 1))
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                               named_parameters=model.named_parameters(), process_set=pair)
before = model.weight.detach().clone()
model(x).sum().backward()
opt.step()
step = before - model.weight.detach()
assert torch.equal(step, x if rank == 0 else torch.full((1, 3), 2.5)), step

# Adasum needs a power-of-two number of ranks.
expect(ValueError,
       f"rank {rank}: invalid adasum of tensor 'odd': Adasum needs a power-of-two number of "
       f"ranks; this group has 3",
       lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum, name="odd"))

hvd.barrier()
assert hvd.remove_process_set(pair) and not hvd.remove_process_set(hvd.global_process_set)
print(f"rank {rank}: process sets ok", flush=True)
