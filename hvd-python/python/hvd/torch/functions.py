"""Broadcasting model state and Python objects, as horovod.torch's functions."""

import io
import pickle

import torch

from hvd.torch.mpi_ops import allgather, broadcast_, broadcast_async_, synchronize
from hvd.torch.process_sets import global_process_set


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every tensor of ``params`` (a state_dict, or (name, tensor) pairs such as
    ``model.named_parameters()``) with ``root_rank``'s, all submitted before any wait."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list) or hasattr(params, "__iter__"):
        params = list(params)
    else:
        raise ValueError(f"invalid params of type {type(params).__name__}")
    handles = []
    for name, p in params:
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"broadcast_parameters: {name} is not a tensor")
        handles.append(broadcast_async_(p.data, root_rank, name=f"broadcast.{name}",
                                        process_set=process_set))
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Gives every rank ``root_rank``'s optimizer state (hyperparameters and buffers)."""
    state = broadcast_object(optimizer.state_dict(), root_rank,
                             name="broadcast_optimizer_state", process_set=process_set)
    optimizer.load_state_dict(state)


def _to_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _from_bytes(data):
    return torch.load(io.BytesIO(data.numpy().tobytes()), weights_only=False)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """``root_rank``'s ``obj`` (any picklable object), on every rank."""
    name = name or type(obj).__name__
    me = _rank_in(process_set)
    data = _to_bytes(obj) if me == root_rank else torch.empty(0, dtype=torch.uint8)
    length = torch.tensor([data.numel()], dtype=torch.int64)
    broadcast_(length, root_rank, name=f"{name}.length", process_set=process_set)
    if me != root_rank:
        data = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(data, root_rank, name=f"{name}.data", process_set=process_set)
    return _from_bytes(data)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's ``obj`` (any picklable object), as a list in rank order."""
    name = name or type(obj).__name__
    data = _to_bytes(obj)
    lengths = allgather(torch.tensor([data.numel()], dtype=torch.int64),
                        name=f"{name}.lengths", process_set=process_set)
    gathered = allgather(data, name=f"{name}.data", process_set=process_set)
    return [_from_bytes(part) for part in torch.split(gathered, lengths.tolist())]


def _rank_in(process_set):
    from hvd import _hvd
    if process_set is None or process_set.process_set_id == 0:
        return _hvd.topology()[0]
    return process_set.rank()
