"""Broadcasting model state and Python objects, as horovod.torch's functions. Roots are
global ranks (``hvd.rank()``), also within a process set."""

import torch

from hvd.common import objects
from hvd.common.process_sets import global_process_set
from hvd.torch.marks import is_distributed
from hvd.torch.mpi_ops import broadcast_async_, synchronize


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every tensor of ``params`` (a state_dict, (name, tensor) pairs such as
    ``model.named_parameters()``, or tensors) with ``root_rank``'s, all submitted before
    any wait."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list) or hasattr(params, "__iter__"):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError(f"invalid params of type {type(params).__name__}")
    handles = []
    for i, (name, p) in enumerate(params):
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"broadcast_parameters: {name or i} is not a tensor")
        label = name if name is not None else f"param.{i}"
        handles.append(broadcast_async_(p.data, root_rank, name=f"broadcast.{label}",
                                        process_set=process_set))
    for handle in handles:
        synchronize(handle)


def _sparse_parameters(model):
    """The parameters of ``model`` whose gradients are sparse (sparse embeddings)."""
    if model is None:
        return set()
    return {id(p) for m in model.modules()
            if isinstance(m, torch.nn.Embedding) and m.sparse for p in m.parameters()}


def _initialise_state(optimizer, model):
    """Gives a fresh optimizer its state, as Horovod does: zero gradients and one step of
    the wrapped optimizer, without an allreduce (every rank does the same)."""
    sparse = _sparse_parameters(model)
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
                if isinstance(optimizer, torch.optim.SparseAdam) or id(p) in sparse:
                    p.grad = p.grad.to_sparse()
    if is_distributed(optimizer):
        super(optimizer.__class__, optimizer).step()
    else:
        optimizer.step()


def broadcast_optimizer_state(optimizer, root_rank, model=None,
                              process_set=global_process_set):
    """Gives every rank ``root_rank``'s optimizer state: hyperparameters (with their
    types) and buffers. A fresh optimizer's state is first initialised (zero gradients,
    one step), so that every rank has the buffers to receive; ``model`` names the sparse
    embeddings whose gradients that step needs sparse."""
    if not optimizer.state_dict()["state"]:
        _initialise_state(optimizer, model)
    state = broadcast_object(optimizer.state_dict(), root_rank,
                             name="broadcast_optimizer_state", process_set=process_set)
    optimizer.load_state_dict(state)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """``root_rank``'s ``obj`` (any picklable object), on every member of the set."""
    return objects.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every member's ``obj`` (any picklable object), as a list in rank order."""
    return objects.allgather_object(obj, name, process_set)
