"""Tensor collectives, as horovod.torch's: each tensor is handed to hvd's runtime by
pointer (``hvd.common.ops``), and the forms that return a new tensor are differentiable
with Horovod's gradients.

CUDA tensors go by device pointer too, with an event recorded on torch's current stream
(NCCL's stream waits for it on the device; the host does not block). With NCCL (found at
``hvd.init()``, unless ``HVD_BACKEND`` names a host transport) they are reduced on the
device; without it hvd's runtime stages them through host memory (and always for Adasum,
which combines on the host). An out-of-place allreduce hands hvd the input and a new
output tensor, so nothing copies the input first. Results whose shape differs come back
on the device as DLPack capsules of hvd's memory, complete when the handle returns. When
hvd cannot reach CUDA memory at all (no driver it can load), a CUDA tensor's collective
is refused with the reason. ``hvd._hvd.device_path()`` says which path the job takes,
and hvd logs it once per job (a warning when it is not NCCL)."""

import torch

from hvd import _hvd
from hvd.common import ops as _ops
from hvd.common.basics import rank as _rank
from hvd.common.ops import Adasum, Average, Max, Min, Product, Sum, resolve_op  # noqa: F401
from hvd.common.process_sets import global_process_set
from hvd.torch.compression import Compression

# torch's dtypes hvd moves, each with the extension's code for it (torch names its dtypes
# as hvd's table does; torch.uint16 is new in torch 2.3).
_DTYPES = {getattr(torch, name): code for name, code in _hvd.DTYPES.items()
           if isinstance(getattr(torch, name, None), torch.dtype)}


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
        raise ValueError(f"{what}: {tensor.layout} tensors are not supported; use "
                         ".to_dense(), or sparse_allreduce_async for sparse gradients")


def _one_device(tensors, what):
    """A group's tensors travel together, so they must share one device (as Horovod
    requires: a RuntimeError)."""
    devices = sorted({str(t.device) for t in tensors if isinstance(t, torch.Tensor)})
    if len(devices) > 1:
        raise RuntimeError(f"{what}: the tensors are on {', '.join(devices)}; a group's "
                           "tensors must all be on one device")


def _check_inplace(tensor, what):
    _check(tensor, what)
    if not tensor.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous, so it cannot be reduced in "
                         "place; call .contiguous() first, or use the out-of-place form")


_path = (None, None, None)


def _on_device(tensor, what):
    """Whether ``tensor`` is a CUDA tensor, which hvd takes by device pointer; a
    ValueError with the reason when the job's hvd cannot reach CUDA memory
    (``_hvd.device_path()``, asked once per job)."""
    global _path
    if tensor.device.type != "cuda":
        return False
    if _path[0] != _ops.job_number():
        _path = (_ops.job_number(), *_hvd.device_path())
    if _path[1] == "unreachable":
        raise ValueError(f"{what}: CUDA tensors cannot be used in this job: {_path[2]}")
    return True


def _describe(tensor, what):
    """The description ``hvd.common.ops`` takes of ``tensor`` (contiguous): for a host
    tensor, (pointer, bytes, dtype, shape, owner); for a CUDA tensor, the same plus the
    device and an event recorded on torch's current stream after the work that writes it
    (the owner keeps both alive)."""
    tensor = tensor.detach()
    if _on_device(tensor, what):
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(tensor.device))
        return (tensor.data_ptr(), tensor.numel() * tensor.element_size(),
                _DTYPES[tensor.dtype], list(tensor.shape), (tensor, ready),
                tensor.device.index, ready.cuda_event)
    return (tensor.data_ptr(), tensor.numel() * tensor.element_size(), _DTYPES[tensor.dtype],
            list(tensor.shape), tensor)


def _broadcast_output(tensor, root_rank):
    """The contiguous tensor an out-of-place broadcast fills: a copy of ``tensor`` on
    the root, new memory on the other ranks, where the broadcast writes every byte."""
    if _rank() == root_rank:
        return tensor.detach().clone(memory_format=torch.contiguous_format)
    return torch.empty_like(tensor, memory_format=torch.contiguous_format)


class Handle:
    """A collective in flight; pass it to ``synchronize`` or ``poll``."""

    def __init__(self, native, finish):
        self._native = native
        self._finish = finish

    def poll(self):
        return self._native.poll()

    def wait(self):
        return self._finish(self._native.wait())


class _Group:
    """The handles of a grouped operation, completed together."""

    def __init__(self, handles):
        self._handles = handles

    def poll(self):
        return all(h.poll() for h in self._handles)

    def wait(self):
        return [h.wait() for h in self._handles]


def _from_bytes(buffer, shape, dtype, device):
    if len(buffer) == 0:
        out = torch.empty(shape, dtype=dtype)
    else:
        out = torch.frombuffer(buffer, dtype=dtype).reshape(shape)
    return out.to(device) if device.type != "cpu" else out


def _new_tensor(out, dtype, device):
    """A result of another shape: a CUDA DLPack capsule of hvd's device memory (taken
    over without a copy), or (bytes, shape) of host memory."""
    if not isinstance(out, tuple):
        return torch.from_dlpack(out)
    return _from_bytes(out[0], out[1], dtype, device)


def _in_place(tensor, native):
    """A handle that returns ``tensor``, which hvd wrote in its own memory."""
    return Handle(native, lambda _: tensor)


def _resized(tensor, native):
    """A handle that returns the new tensor of another shape."""
    return Handle(native, lambda out: _new_tensor(out, tensor.dtype, tensor.device))


def _group_names(name, count, op):
    base = _ops.name_for(name, f"grouped_{op}")
    return [f"{base}.{i}" for i in range(count)]


# Every public form checks its tensors once (what only torch can say: type, dtype,
# device, layout, contiguity) and starts the operation through a `_start` function that
# checks nothing more; the extension and hvd's runtime check the rest once, at their entry.

# Allreduce.

def _allreduce_start(tensor, name, op, prescale_factor, postscale_factor, process_set):
    """Starts an in-place allreduce of ``tensor`` (checked, contiguous) with ``op``
    (resolved)."""
    native = _ops.allreduce_async(name, _describe(tensor, "allreduce"), op, prescale_factor,
                                  postscale_factor, process_set)
    return _in_place(tensor, native)


def _allreduce_into_start(tensor, name, op, prescale_factor, postscale_factor, process_set):
    """Starts an allreduce of ``tensor`` (checked) into a new tensor, leaving ``tensor`` as
    it is: hvd reads one and writes the other (a CUDA tensor is not copied first)."""
    tensor = tensor.detach().contiguous()
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    native = _ops.allreduce_async(name, _describe(tensor, "allreduce"), op, prescale_factor,
                                  postscale_factor, process_set,
                                  output=_describe(output, "allreduce"))
    # The input stays alive until the operation is done with it (its owner is held).
    return _in_place(output, native)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce of ``tensor`` (Average by default; ``op=hvd.Adasum``
    for Adasum); returns a handle."""
    _check_inplace(tensor, "allreduce")
    return _allreduce_start(tensor, name, resolve_op(op, average), prescale_factor,
                            postscale_factor, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Allreduces ``tensor`` in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce into a new tensor; ``tensor`` is left as it is."""
    _check(tensor, "allreduce")
    return _allreduce_into_start(tensor, name, resolve_op(op, average), prescale_factor,
                                 postscale_factor, process_set)


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce whose gradient is the same allreduce of the incoming gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return synchronize(_allreduce_into_start(tensor, name, op, prescale_factor,
                                                 postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grad = allreduce(grad_output, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, process_set=process_set)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """The reduction of ``tensor`` over the ranks (by default their average), as a new,
    differentiable tensor; ``compression`` narrows it on the wire."""
    _check(tensor, "allreduce")
    op = resolve_op(op, average)
    wire, ctx = compression.compress(tensor)
    out = HorovodAllreduce.apply(wire, name, op, prescale_factor, postscale_factor,
                                 process_set)
    return compression.decompress(out, ctx)


def _check_group(tensors, what, check=_check):
    """Checks a group's tensors, all before any is submitted: a group that fails part way
    would leave the other ranks waiting for the rest."""
    _one_device(tensors, what)
    for t in tensors:
        check(t, what)


def _check_rows(tensors, what):
    for t in tensors:
        if t.dim() == 0:
            raise ValueError(f"{what}: every tensor needs at least one dimension")


def _grouped_allreduce_start(tensors, name, op, prescale_factor, postscale_factor,
                             process_set, start=_allreduce_start):
    """Starts every tensor's allreduce, in place (``start``) or out of place."""
    names = _group_names(name, len(tensors), "allreduce")
    return _Group([start(t, n, op, prescale_factor, postscale_factor, process_set)
                   for t, n in zip(tensors, names)])


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Starts in-place allreduces of every tensor, submitted together so they fuse."""
    _check_group(tensors, "grouped_allreduce", _check_inplace)
    return _grouped_allreduce_start(tensors, name, resolve_op(op, average), prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    _check_group(tensors, "grouped_allreduce")
    return _grouped_allreduce_start(tensors, name, resolve_op(op, average), prescale_factor,
                                    postscale_factor, process_set, _allreduce_into_start)


class HorovodGroupedAllreduce(torch.autograd.Function):
    """Grouped allreduce whose gradients are the grouped allreduce of the incoming ones."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(_grouped_allreduce_start(
            tensors, name, op, prescale_factor, postscale_factor, process_set,
            _allreduce_into_start)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grads = grouped_allreduce(list(grad_outputs), op=op, prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor, process_set=process_set)
        return (None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Allreduces every tensor of the list (submitted together so they fuse); new,
    differentiable tensors."""
    if not tensors:
        return []
    _check_group(tensors, "grouped_allreduce")
    op = resolve_op(op, average)
    wires, ctxs = zip(*(compression.compress(t) for t in tensors))
    outs = HorovodGroupedAllreduce.apply(name, op, prescale_factor, postscale_factor,
                                         process_set, *wires)
    return [compression.decompress(out, ctx) for out, ctx in zip(outs, ctxs)]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts the reduction of a sparse tensor as Horovod does: the ranks' indices and
    values are allgathered (Average divides the values by the set's size). Returns a
    callable that waits and gives the sparse result."""
    if not tensor.is_sparse:
        raise ValueError(f"sparse_allreduce_async: expected a sparse tensor, got a "
                         f"{tensor.layout} one (use allreduce_async for dense tensors)")
    op = resolve_op(op)
    if op not in (Average, Sum):
        raise ValueError(f"sparse_allreduce_async combines with Average or Sum, not {op!r}")
    sparse = tensor.coalesce()
    indices = allgather_async(sparse.indices().transpose(0, 1).contiguous(),
                              name=f"{name}.indices", process_set=process_set)
    values = allgather_async(sparse.values(), name=f"{name}.values",
                             process_set=process_set)

    def wait():
        gathered_values = synchronize(values)
        gathered_indices = synchronize(indices)
        if op is Average:
            gathered_values = gathered_values / process_set.size()
        return torch.sparse_coo_tensor(gathered_indices.transpose(0, 1), gathered_values,
                                       tensor.size())
    return wait


# Allgather.

def _allgather_start(tensor, name, process_set):
    """Starts an allgather of ``tensor`` (checked); ``hvd.common.ops`` refuses a scalar."""
    described = _describe(tensor.contiguous(), "allgather")
    return _resized(tensor, _ops.allgather_async(name, described, process_set))


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather: the ranks' tensors concatenated along the first dimension
    (which may differ between ranks); ``tensor`` is left as it is."""
    _check(tensor, "allgather")
    return _allgather_start(tensor, name, process_set)


def _offset(rows, process_set):
    """Where this rank's rows start in a tensor gathered from rows of every rank."""
    counts = allgather(torch.tensor([rows], dtype=torch.int64), process_set=process_set)
    return int(counts[:process_set.rank()].sum())


class HorovodAllgather(torch.autograd.Function):
    """Allgather whose gradient is this rank's rows of the averaged incoming gradient."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows, ctx.process_set = tensor.shape[0], process_set
        return synchronize(_allgather_start(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        offset = _offset(ctx.rows, ctx.process_set)
        return reduced.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """The ranks' tensors concatenated along the first dimension, as a new,
    differentiable tensor."""
    _check(tensor, "allgather")
    if tensor.dim() == 0:
        # Before autograd, which reads the first dimension.
        raise ValueError("allgather: the tensor needs at least one dimension")
    return HorovodAllgather.apply(tensor, name, process_set)


def _grouped_allgather_start(tensors, name, process_set):
    names = _group_names(name, len(tensors), "allgather")
    return _Group([_allgather_start(t, n, process_set) for t, n in zip(tensors, names)])


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts allgathers of every tensor of the list, submitted together."""
    _check_group(tensors, "grouped_allgather")
    _check_rows(tensors, "grouped_allgather")
    return _grouped_allgather_start(tensors, name, process_set)


class HorovodGroupedAllgather(torch.autograd.Function):
    """Grouped allgather whose gradients are each rank's rows of the averaged ones."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows, ctx.process_set = [t.shape[0] for t in tensors], process_set
        return tuple(synchronize(_grouped_allgather_start(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        reduced = grouped_allreduce(list(grad_outputs), op=Average,
                                    process_set=ctx.process_set)
        counts = grouped_allgather([torch.tensor([r], dtype=torch.int64) for r in ctx.rows],
                                   process_set=ctx.process_set)
        me = ctx.process_set.rank()
        grads = [g.narrow(0, int(c[:me].sum()), rows)
                 for g, c, rows in zip(reduced, counts, ctx.rows)]
        return (None, None, *grads)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers every tensor of the list; new, differentiable tensors."""
    if not tensors:
        return []
    _check_group(tensors, "grouped_allgather")
    _check_rows(tensors, "grouped_allgather")
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# Broadcast.

def _broadcast_start(tensor, root_rank, name, process_set):
    """Starts an in-place broadcast into ``tensor`` (checked, contiguous)."""
    native = _ops.broadcast_async(name, _describe(tensor, "broadcast"), root_rank,
                                  process_set)
    return _in_place(tensor, native)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast of ``root_rank``'s tensor (a global rank, a member of
    the set); returns a handle."""
    _check_inplace(tensor, "broadcast")
    return _broadcast_start(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites ``tensor`` with ``root_rank``'s and returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    _check(tensor, "broadcast")
    return _broadcast_start(_broadcast_output(tensor, root_rank), root_rank, name,
                            process_set)


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast whose gradient is the averaged incoming gradient on the root, zeros
    elsewhere."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(_broadcast_start(_broadcast_output(tensor, root_rank), root_rank,
                                            name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if _rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s tensor on every rank, as a new, differentiable tensor."""
    _check(tensor, "broadcast")
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


# Alltoall.

def _splits(splits):
    """``splits`` as a list of ints: a list, or an integer tensor (on any device)."""
    if splits is None:
        return None
    if isinstance(splits, torch.Tensor):
        if splits.dtype.is_floating_point or splits.dtype.is_complex or \
                splits.dtype == torch.bool:
            raise ValueError(f"alltoall: splits must hold integers (an int32 tensor or a "
                             f"list), not {splits.dtype}")
        return [int(s) for s in splits.cpu().tolist()]
    return [int(s) for s in splits]


def _alltoall_start(tensor, splits, name, process_set):
    """Starts an alltoall of ``tensor`` (checked)."""
    described = _describe(tensor.contiguous(), "alltoall")
    native = _ops.alltoall_async(name, described, _splits(splits), process_set)
    device = splits.device if isinstance(splits, torch.Tensor) else torch.device("cpu")

    def finish(out):
        # (bytes, shape, rows) from host memory; (capsule, rows) from a device.
        data, rows = (out[:2], out[2]) if len(out) == 3 else (out[0], out[1])
        received = torch.tensor(rows, dtype=torch.int32, device=device)
        return _new_tensor(data, tensor.dtype, tensor.device), received
    return Handle(native, finish)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall: ``splits[r]`` rows of the first dimension go to the set's rank
    ``r`` (even splits by default). The handle gives the received tensor and the rows
    received from each rank."""
    _check(tensor, "alltoall")
    return _alltoall_start(tensor, splits, name, process_set)


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall whose gradient travels back the way the data came."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(_alltoall_start(tensor, splits, name, process_set))
        ctx.received, ctx.process_set = received, process_set
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *_):
        grad, _ = alltoall(grad_output, splits=ctx.received, process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """The rows every rank sent here, as a new, differentiable tensor; with ``splits``,
    also the rows received from each rank (an int32 tensor)."""
    _check(tensor, "alltoall")
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


# Reducescatter. Adasum is refused by the extension, which has no Adasum reducescatter.

def _reducescatter_start(tensor, name, op, process_set, prescale_factor, postscale_factor):
    """Starts a reducescatter of ``tensor`` (checked) with ``op`` (resolved)."""
    described = _describe(tensor.contiguous(), "reducescatter")
    return _resized(tensor, _ops.reducescatter_async(name, described, op, prescale_factor,
                                                     postscale_factor, process_set))


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter: this rank's rows of the reduction over the ranks (the
    first ranks take one more row when they do not divide evenly)."""
    _check(tensor, "reducescatter")
    return _reducescatter_start(tensor, name, resolve_op(op), process_set, prescale_factor,
                                postscale_factor)


def _scattered_grad(grad, op, process_set, prescale_factor, postscale_factor):
    """Horovod's reducescatter gradient before the allgather: scaled by the set's size for
    Sum, and by the scale factors."""
    if op is Sum:
        grad = grad * process_set.size()
    if prescale_factor != 1.0:
        grad = grad * prescale_factor
    if postscale_factor != 1.0:
        grad = grad * postscale_factor
    return grad


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter whose gradient is the allgather of the incoming gradients."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.args = (op, process_set, prescale_factor, postscale_factor)
        return synchronize(_reducescatter_start(tensor, name, op, process_set,
                                                prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        op, process_set, prescale_factor, postscale_factor = ctx.args
        grad = _scattered_grad(grad_output, op, process_set, prescale_factor,
                               postscale_factor)
        return allgather(grad, process_set=process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's rows of the reduction over the ranks, as a new, differentiable
    tensor."""
    _check(tensor, "reducescatter")
    op = resolve_op(op)
    wire, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(wire, name, op, process_set, prescale_factor,
                                     postscale_factor)
    return compression.decompress(out, ctx)


def _grouped_reducescatter_start(tensors, name, op, process_set, prescale_factor,
                                 postscale_factor):
    names = _group_names(name, len(tensors), "reducescatter")
    return _Group([_reducescatter_start(t, n, op, process_set, prescale_factor,
                                        postscale_factor) for t, n in zip(tensors, names)])


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set, prescale_factor=1.0,
                                postscale_factor=1.0):
    """Starts reducescatters of every tensor of the list, submitted together."""
    _check_group(tensors, "grouped_reducescatter")
    _check_rows(tensors, "grouped_reducescatter")
    return _grouped_reducescatter_start(tensors, name, resolve_op(op), process_set,
                                        prescale_factor, postscale_factor)


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter whose gradients are the grouped allgather of the incoming
    ones."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.args = (op, process_set, prescale_factor, postscale_factor)
        return tuple(synchronize(_grouped_reducescatter_start(
            list(tensors), name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        op, process_set, prescale_factor, postscale_factor = ctx.args
        grads = [_scattered_grad(g, op, process_set, prescale_factor, postscale_factor)
                 for g in grad_outputs]
        return (None, None, None, None, None,
                *grouped_allgather(grads, process_set=process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatters every tensor of the list; new, differentiable tensors."""
    if not tensors:
        return []
    _check_group(tensors, "grouped_reducescatter")
    _check_rows(tensors, "grouped_reducescatter")
    op = resolve_op(op)
    wires, ctxs = zip(*(compression.compress(t) for t in tensors))
    outs = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                             postscale_factor, *wires)
    return [compression.decompress(out, ctx) for out, ctx in zip(outs, ctxs)]


# Completion, barrier and join.

def poll(handle):
    """Whether the operation behind ``handle`` has completed."""
    return handle.poll()


def synchronize(handle):
    """Waits for ``handle`` and returns its result."""
    return handle.wait()


def barrier(process_set=global_process_set):
    """Returns once every member of the set has reached the barrier."""
    _ops.barrier(process_set)


def join(device=-1, process_set=global_process_set):
    """This rank has no more data: until every rank has joined, it contributes zeros to
    the others' allreduces. Returns the last rank to join. ``device`` is accepted for
    Horovod's signature (zeros are made on the host)."""
    return _ops.join(process_set)
