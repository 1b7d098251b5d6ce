"""Adasum on a power-of-two number of ranks, against the pairwise formula applied
directly: allreduce(op=hvd.Adasum) in f32, f64 and f16, in place, and the Adasum
DistributedOptimizer, whose step applies the Adasum of the ranks' updates."""
import torch

import hvd.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()


def vector(r, n=11):
    """Rank r's vector: a different direction and length on every rank."""
    return torch.tensor([((i * 7 + r * 13) % 11) - 5.0 + r * 0.25 for i in range(n)],
                        dtype=torch.float64)


def pairwise(a, b):
    """(1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b, term by term."""
    dot = torch.dot(a, b)
    return (1 - dot / (2 * torch.dot(a, a))) * a + (1 - dot / (2 * torch.dot(b, b))) * b


def adasum(vectors):
    """Neighbours first, then pairs of pairs: the recursion's order."""
    while len(vectors) > 1:
        vectors = [pairwise(vectors[i], vectors[i + 1]) for i in range(0, len(vectors), 2)]
    return vectors[0]


want = adasum([vector(r) for r in range(size)])
for dtype, tolerance in ((torch.float64, 1e-12), (torch.float32, 1e-5), (torch.float16, 1e-2)):
    got = hvd.allreduce(vector(rank).to(dtype), op=hvd.Adasum, name=f"adasum.{dtype}")
    assert got.dtype == dtype
    assert torch.allclose(got.double(), want, rtol=tolerance, atol=tolerance), (dtype, got, want)
inplace = vector(rank).float()
hvd.allreduce_(inplace, op=hvd.Adasum, name="adasum.inplace")
assert torch.allclose(inplace.double(), want, rtol=1e-5, atol=1e-5)

try:
    hvd.allreduce(torch.ones(2), op=hvd.Adasum, prescale_factor=2.0, name="adasum.scaled")
    raise AssertionError("Adasum with a prescale factor was accepted")
except ValueError as e:
    assert str(e) == ("allreduce of 'adasum.scaled': Adasum takes no prescale or postscale "
                      "factor (got 2 and 1); it is scale-invariant"), str(e)

# The optimizer: every rank steps on its own gradient, then the updates are combined.
torch.manual_seed(0)
model = torch.nn.Linear(11, 1, bias=False)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
start = model.weight.detach().clone()
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                               named_parameters=model.named_parameters(), op=hvd.Adasum)
(model(vector(rank).float().unsqueeze(0)).sum()).backward()
opt.step()
updates = [-0.5 * vector(r).float().double() for r in range(size)]
expected = start.double() + adasum(updates)
assert torch.allclose(model.weight.detach().double(), expected, rtol=1e-5, atol=1e-5), \
    (model.weight, expected)

print(f"rank {rank}: adasum ok", flush=True)
