"""DistributedOptimizer on 2 ranks, each with half of a batch, gives the 1-rank result on
the whole batch (averaged gradients); also with backward_passes_per_step and with a
parameter that gets no gradient on some rank."""
import copy

import torch
import torch.nn as nn

import hvd.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
torch.manual_seed(0)
x, y = torch.randn(8 * size, 5), torch.randn(8 * size, 3)
mine = slice(rank * 8, (rank + 1) * 8)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(5, 3)
        self.sometimes = nn.Linear(5, 3)

    def forward(self, x, use_sometimes):
        out = self.used(x)
        return out + self.sometimes(x) if use_sometimes else out


def reference(model, steps, passes):
    """One rank, the whole batch: the mean gradient over every example and pass."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        for p in range(passes):
            loss = sum(nn.functional.mse_loss(model(x[r * 8:(r + 1) * 8], r == 0), y[r * 8:(r + 1) * 8])
                       for r in range(size)) / size / passes
            loss.backward()
        opt.step()
    return model


def distributed(model, steps, passes):
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for _ in range(steps):
        opt.zero_grad()
        for p in range(passes):
            # Only rank 0 uses `sometimes`: rank 1 contributes zeros for it.
            loss = nn.functional.mse_loss(model(x[mine], rank == 0), y[mine]) / passes
            loss.backward()
        opt.step()
    return model


torch.manual_seed(1)
start = Net()
for passes in (1, 3):
    ref = reference(copy.deepcopy(start), 4, passes)
    got = distributed(copy.deepcopy(start), 4, passes)
    for (name, a), (_, b) in zip(ref.named_parameters(), got.named_parameters()):
        assert torch.allclose(a, b, atol=1e-6), (passes, name, a, b)
    print(f"rank {rank}: backward_passes_per_step={passes} matches one rank", flush=True)

# Too many backward passes before step is refused with Horovod's message.
model = copy.deepcopy(start)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                               named_parameters=model.named_parameters())
model(x[mine], True).sum().backward()
try:
    model(x[mine], True).sum().backward()
except AssertionError as e:
    assert "backward_passes_per_step" in str(e), e
    print(f"rank {rank}: extra backward refused", flush=True)
opt.synchronize()

# fp16 compression.
model = copy.deepcopy(start)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                               named_parameters=model.named_parameters(),
                               compression=hvd.Compression.fp16)
nn.functional.mse_loss(model(x[mine], True), y[mine]).backward()
opt.step()

# A fresh optimizer's state is initialised before it is broadcast (Horovod's zero step),
# so every rank has momentum buffers, rank 0's.
model = copy.deepcopy(start)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                               named_parameters=model.named_parameters())
hvd.broadcast_optimizer_state(opt, root_rank=0)
buffers = [opt.state[p]["momentum_buffer"] for p in model.parameters()]
assert len(buffers) == 4 and all(torch.equal(b, torch.zeros_like(b)) for b in buffers)

# SparseAdam's fresh state is initialised with sparse zero gradients (which it needs).
embedding = nn.Embedding(6, 2, sparse=True)
opt = torch.optim.SparseAdam(list(embedding.parameters()), lr=0.1)
hvd.broadcast_optimizer_state(opt, root_rank=0, model=embedding)
assert set(opt.state[embedding.weight]) == {"step", "exp_avg", "exp_avg_sq"}, opt.state

# Sparse gradients, allgathered or allreduced as dense tensors.
for as_dense in (False, True):
    embedding = nn.Embedding(6, 2, sparse=True)
    hvd.broadcast_parameters(embedding.state_dict(), root_rank=0)
    before = embedding.weight.detach().clone()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(embedding.parameters(), lr=1.0),
                                   named_parameters=embedding.named_parameters(),
                                   sparse_as_dense=as_dense)
    embedding(torch.tensor([rank, 5])).sum().backward()
    opt.step()
    step = before - embedding.weight.detach()
    want = torch.zeros(6, 2)
    want[:size] = 1.0 / size
    want[5] = 1.0
    assert torch.allclose(step, want), (as_dense, step)
print(f"rank {rank}: optimizer ok", flush=True)
