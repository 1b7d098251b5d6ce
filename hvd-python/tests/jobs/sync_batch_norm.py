"""SyncBatchNorm on 2 ranks, each with its share of a batch, against torch's BatchNorm on
the whole batch in one process: outputs, running statistics, input gradients, and the
weight and bias gradients once summed over the ranks."""
import torch

import hvd.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
torch.manual_seed(0)


def compare(shape, rows, momentum):
    """``rows[r]`` examples on rank r, of shape (N, C, ...) with C = shape[1]."""
    total = sum(rows)
    batch = torch.randn(total, *shape[1:], dtype=torch.float64) * 3 + 1
    weights = torch.randn(total, *shape[1:], dtype=torch.float64)
    start = sum(rows[:rank])
    mine = slice(start, start + rows[rank])

    reference = torch.nn.BatchNorm1d(shape[1], momentum=momentum).double() if \
        len(shape) <= 3 else torch.nn.BatchNorm2d(shape[1], momentum=momentum).double()
    with torch.no_grad():
        reference.weight.uniform_(0.5, 1.5)
        reference.bias.uniform_(-1, 1)
    sync = hvd.SyncBatchNorm(shape[1], momentum=momentum).double()
    sync.load_state_dict(reference.state_dict())

    whole = batch.clone().requires_grad_()
    out = reference(whole)
    (out * weights).sum().backward()
    part = batch[mine].clone().requires_grad_()
    got = sync(part)
    (got * weights[mine]).sum().backward()

    close = dict(rtol=1e-9, atol=1e-9)
    assert torch.allclose(got, out[mine], **close), "output"
    assert torch.allclose(sync.running_mean, reference.running_mean, **close), "running mean"
    assert torch.allclose(sync.running_var, reference.running_var, **close), "running var"
    assert torch.allclose(part.grad, whole.grad[mine], **close), "input gradient"
    for name in ("weight", "bias"):
        summed = hvd.allreduce(getattr(sync, name).grad, op=hvd.Sum, name=f"bn.{name}")
        assert torch.allclose(summed, getattr(reference, name).grad, **close), name
    # In evaluation, each rank normalises with the running statistics alone.
    sync.eval()
    reference.eval()
    assert torch.allclose(sync(batch[mine]), reference(batch)[mine], **close), "eval"


compare((0, 4), [3, 5][:size] if size == 2 else [2] * size, 0.1)
compare((0, 3, 5), [2] * size, None)
compare((0, 2, 3, 3), [1] * size, 0.3)
print(f"rank {rank}: sync batch norm ok", flush=True)
