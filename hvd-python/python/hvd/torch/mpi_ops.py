"""Tensor collectives, as horovod.torch's: each moves a tensor's memory by pointer through
hvd's runtime. CUDA tensors are staged through host memory (hvd's Python front has no
NCCL path yet): the current stream is synchronised, the data copied to the host, and the
result copied back when the handle is synchronised."""

import itertools

import torch

from hvd import _hvd
from hvd.torch.process_sets import global_process_set


class ReduceOp:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name.capitalize()


Average = ReduceOp("average")
Sum = ReduceOp("sum")
Min = ReduceOp("min")
Max = ReduceOp("max")
Product = ReduceOp("product")
Adasum = ReduceOp("adasum")

_DTYPES = {
    torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16", torch.int32: "int32",
    torch.int64: "int64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.float32: "float32", torch.float64: "float64", torch.bool: "bool",
}
if hasattr(torch, "uint16"):
    _DTYPES[torch.uint16] = "uint16"

_unnamed = itertools.count()


def _name(name, op):
    # Unnamed tensors are matched across ranks by call order, as in Horovod.
    return name if name is not None else f"{op}.noname.{next(_unnamed)}"


def _op_name(op, average=None):
    if op is None:
        op = Average if average is None or average else Sum
    elif average is not None:
        raise ValueError("pass op= or the deprecated average=, not both")
    if op is Adasum:
        raise ValueError("Adasum is not supported by hvd; use Average or Sum")
    if not isinstance(op, ReduceOp):
        raise ValueError(f"op must be one of hvd.Average, Sum, Min, Max, Product; got {op!r}")
    return op.name


def _check(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype not in _DTYPES:
        supported = ", ".join(str(d) for d in _DTYPES)
        raise TypeError(f"{what}: hvd does not support dtype {tensor.dtype}; "
                        f"supported: {supported}")
    if tensor.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{what}: tensors on device {tensor.device} are not supported; "
                         "use a CPU or CUDA tensor")
    if tensor.layout != torch.strided:
        raise ValueError(f"{what}: {tensor.layout} tensors are not supported; use .to_dense()")


def _check_inplace(tensor, what):
    _check(tensor, what)
    if not tensor.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous, so it cannot be reduced in "
                         "place; call .contiguous() first, or use the out-of-place form")


def _host(tensor):
    """The host tensor hvd works on: the tensor itself, or a staged copy of a CUDA one."""
    if tensor.device.type == "cuda":
        # The kernels that produced the tensor may still be running on its stream.
        torch.cuda.current_stream(tensor.device).synchronize()
        return tensor.detach().to("cpu", copy=True)
    return tensor.detach()


def _describe(host):
    shape = list(host.shape)
    return (host.data_ptr(), host.numel() * host.element_size(), _DTYPES[host.dtype],
            shape, host)


def _process_set_id(process_set):
    if process_set is None:
        return 0
    return process_set._id()


class Handle:
    """A collective in flight; pass it to ``synchronize`` or ``poll``."""

    def __init__(self, native, finish):
        self._native = native
        self._finish = finish

    def poll(self):
        return self._native.poll()

    def wait(self):
        return self._finish(self._native.wait())


def _from_bytes(buffer, shape, dtype, device):
    if len(buffer) == 0:
        out = torch.empty(shape, dtype=dtype)
    else:
        out = torch.frombuffer(buffer, dtype=dtype).reshape(shape)
    return out.to(device) if device.type != "cpu" else out


def _inplace(tensor, host, native):
    """A handle that copies a staged result back into a CUDA tensor."""
    def finish(_):
        if host.data_ptr() != tensor.data_ptr():
            with torch.no_grad():
                tensor.copy_(host)
        return tensor
    return Handle(native, finish)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce of ``tensor``; returns a handle."""
    _check_inplace(tensor, "allreduce")
    op = _op_name(op, average)
    host = _host(tensor)
    native = _hvd.allreduce_async(_name(name, "allreduce"), _describe(host), op,
                                  float(prescale_factor), float(postscale_factor),
                                  _process_set_id(process_set))
    return _inplace(tensor, host, native)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce into a new tensor; ``tensor`` is left as it is."""
    _check(tensor, "allreduce")
    return allreduce_async_(tensor.detach().clone(memory_format=torch.contiguous_format),
                            average, name, op, prescale_factor, postscale_factor,
                            process_set)


def allreduce(tensor, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """The reduction of ``tensor`` over the ranks (by default their average)."""
    _check(tensor, "allreduce")
    if compression is not None:
        wire, ctx = compression.compress(tensor)
    else:
        wire, ctx = tensor, None
    out = synchronize(allreduce_async(wire, average, name, op, prescale_factor,
                                      postscale_factor, process_set))
    return compression.decompress(out, ctx) if compression is not None else out


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Starts in-place allreduces of every tensor, submitted together so they fuse."""
    base = _name(name, "grouped_allreduce")
    handles = [allreduce_async_(t, average, f"{base}.{i}", op, prescale_factor,
                                postscale_factor, process_set)
               for i, t in enumerate(tensors)]
    return _Group(handles)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    for t in tensors:
        _check(t, "grouped_allreduce")
    copies = [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors]
    return grouped_allreduce_async_(copies, average, name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """The reductions of every tensor, fused; each travels as ``compression`` says."""
    for t in tensors:
        _check(t, "grouped_allreduce")
    if compression is None:
        return synchronize(grouped_allreduce_async(tensors, average, name, op,
                                                   prescale_factor, postscale_factor,
                                                   process_set))
    wires, ctxs = zip(*(compression.compress(t) for t in tensors)) if tensors else ((), ())
    outs = synchronize(grouped_allreduce_async(list(wires), average, name, op,
                                               prescale_factor, postscale_factor, process_set))
    return [compression.decompress(out, ctx) for out, ctx in zip(outs, ctxs)]


class _Group:
    def __init__(self, handles):
        self._handles = handles

    def poll(self):
        return all(h.poll() for h in self._handles)

    def wait(self):
        return [h.wait() for h in self._handles]


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast of ``root_rank``'s tensor; returns a handle."""
    _check_inplace(tensor, "broadcast")
    host = _host(tensor)
    native = _hvd.broadcast_async(_name(name, "broadcast"), _describe(host), int(root_rank),
                                  _process_set_id(process_set))
    return _inplace(tensor, host, native)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    _check(tensor, "broadcast")
    return broadcast_async_(tensor.detach().clone(memory_format=torch.contiguous_format),
                            root_rank, name, process_set)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s tensor, on every rank; ``tensor`` is left as it is."""
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def _contiguous_host(tensor, what):
    _check(tensor, what)
    return _host(tensor).contiguous()


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather: the ranks' tensors concatenated along the first dim."""
    host = _contiguous_host(tensor, "allgather")
    if host.dim() == 0:
        raise ValueError("allgather: the tensor needs at least one dimension")
    native = _hvd.allgather_async(_name(name, "allgather"), _describe(host),
                                  _process_set_id(process_set))
    return Handle(native, lambda out: _from_bytes(out[0], out[1], tensor.dtype, tensor.device))


def allgather(tensor, name=None, process_set=global_process_set):
    return synchronize(allgather_async(tensor, name, process_set))


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall: ``splits[r]`` rows of the first dim go to rank ``r`` (even
    splits by default)."""
    host = _contiguous_host(tensor, "alltoall")
    if host.dim() == 0:
        raise ValueError("alltoall: the tensor needs at least one dimension")
    ranks = len(process_set.ranks) if process_set is not None else size()
    if splits is None:
        if host.shape[0] % ranks:
            raise ValueError(f"alltoall: the first dim ({host.shape[0]}) does not divide "
                             f"evenly between {ranks} ranks; pass splits=")
        splits = [host.shape[0] // ranks] * ranks
    splits = [int(s) for s in (splits.tolist() if isinstance(splits, torch.Tensor) else splits)]
    native = _hvd.alltoall_async(_name(name, "alltoall"), _describe(host), splits,
                                 _process_set_id(process_set))

    def finish(out):
        return (_from_bytes(out[0], out[1], tensor.dtype, tensor.device),
                torch.tensor(out[2], dtype=torch.int32))
    return Handle(native, finish)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """The rows every rank sent here; with ``splits``, also the rows received from each."""
    output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set):
    """Starts a reducescatter: this rank's rows of the reduction over the ranks."""
    host = _contiguous_host(tensor, "reducescatter")
    if host.dim() == 0:
        raise ValueError("reducescatter: the tensor needs at least one dimension")
    native = _hvd.reducescatter_async(_name(name, "reducescatter"), _describe(host),
                                      _op_name(op), _process_set_id(process_set))
    return Handle(native, lambda out: _from_bytes(out[0], out[1], tensor.dtype, tensor.device))


def reducescatter(tensor, name=None, op=Average, process_set=global_process_set):
    return synchronize(reducescatter_async(tensor, name, op, process_set))


def poll(handle):
    """Whether the operation behind ``handle`` has completed."""
    return handle.poll()


def synchronize(handle):
    """Waits for ``handle`` and returns its result."""
    return handle.wait()


def barrier(process_set=global_process_set):
    _hvd.barrier(_process_set_id(process_set))


def join(device=-1, process_set=global_process_set):
    """This rank has no more data; returns the last rank to join."""
    return _hvd.join(_process_set_id(process_set))


def size():
    return _hvd.topology()[1]
