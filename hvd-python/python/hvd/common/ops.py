"""Reduce ops, the names of operations, and the collectives on tensors. A tensor is
described by pointer, ``(data pointer, byte length, dtype code, shape, owner)`` (the
codes are the extension's, ``_hvd.DTYPES``), where
``owner`` is the framework's tensor, kept alive until the operation completes and
worked on in place; or it is a :class:`DlpackTensor`, copied by hvd at once and given
back as a DLPack capsule of hvd's 64-byte-aligned memory. Each function checks what
does not depend on the framework and returns the native handle."""

import ctypes
import itertools
import struct
import warnings
from typing import NamedTuple

from hvd import _hvd
from hvd.common.process_sets import root_in_set, set_id


class ReduceOp:
    """How allreduce and reducescatter combine the ranks' tensors; ``code`` is what the
    extension takes (``_hvd.REDUCE_OPS``)."""

    def __init__(self, name):
        self.name = name
        self.code = _hvd.REDUCE_OPS[name]

    def __repr__(self):
        return self.name.capitalize()


Average = ReduceOp("average")
Sum = ReduceOp("sum")
Min = ReduceOp("min")
Max = ReduceOp("max")
Product = ReduceOp("product")
# Horovod's scale-invariant combination (hvd's hvd_core::adasum), for allreduce and
# DistributedOptimizer: floating-point tensors, a power-of-two number of ranks.
Adasum = ReduceOp("adasum")

_OPS = (Average, Sum, Min, Max, Product, Adasum)


def resolve_op(op, average=None):
    """The op of a call, from ``op`` or Horovod's deprecated ``average`` (default:
    Average)."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one "
                             "of them.")
        if op not in _OPS:
            raise ValueError(f"op must be one of hvd.Average, Sum, Min, Max, Product, "
                             f"Adasum; got {op!r}")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed "
                      "in v1.0", DeprecationWarning)
        return Average if average else Sum
    return Average


_unnamed = itertools.count()


def restart_names():
    """Numbers unnamed operations from 0 again: at the start of every job, so that every
    rank's sequence starts alike."""
    global _unnamed
    _unnamed = itertools.count()
    job_changed()


_jobs = 0


def job_changed():
    """Counts a new job or elastic round: what the fronts looked up about the last one
    (the path CUDA tensors take) is looked up again."""
    global _jobs
    _jobs += 1


def job_number():
    """How many jobs and elastic rounds this process has started."""
    return _jobs


def name_for(name, op):
    """``name``, or for an unnamed operation ``<op>.noname.<n>``: matched across ranks by
    the order of the calls, as in Horovod."""
    return str(name) if name is not None else f"{op}.noname.{next(_unnamed)}"


class DlpackTensor(NamedTuple):
    """A framework's tensor handed over as a DLPack capsule (``dltensor``), with its
    shape for the checks made here. hvd copies it when the operation starts, so the
    framework's buffer is never written, and every result comes back as a capsule."""

    capsule: object
    shape: list


def _shape(tensor):
    return tensor.shape if isinstance(tensor, DlpackTensor) else tensor[3]


def _native(tensor):
    """What the extension takes: the description, or the capsule."""
    return tensor.capsule if isinstance(tensor, DlpackTensor) else tensor


def allreduce_async(name, tensor, op, prescale_factor, postscale_factor, process_set,
                    output=None):
    """Starts an allreduce (or Adasum) of the described tensor: in place, or into the
    described ``output`` (same dtype, shape and device), leaving the tensor as it is."""
    return _hvd.allreduce_async(name_for(name, "allreduce"), _native(tensor), op.code,
                                float(prescale_factor), float(postscale_factor),
                                set_id(process_set), output)


def broadcast_async(name, tensor, root_rank, process_set):
    """Starts an in-place broadcast from ``root_rank`` (a global rank)."""
    root = root_in_set(root_rank, process_set, "broadcast")
    return _hvd.broadcast_async(name_for(name, "broadcast"), _native(tensor), root,
                                set_id(process_set))


def allgather_async(name, tensor, process_set):
    """Starts an allgather along the first dimension; the result is new memory."""
    if len(_shape(tensor)) == 0:
        raise ValueError("allgather: the tensor needs at least one dimension")
    return _hvd.allgather_async(name_for(name, "allgather"), _native(tensor),
                                set_id(process_set))


def alltoall_async(name, tensor, splits, process_set):
    """Starts an alltoall: ``splits[r]`` rows of the first dimension go to the set's
    rank ``r`` (even splits when None)."""
    shape = _shape(tensor)
    if len(shape) == 0:
        raise ValueError("alltoall: the tensor needs at least one dimension")
    ranks = len(_hvd.process_set_ranks(set_id(process_set)))
    if splits is None:
        if shape[0] % ranks:
            raise ValueError(f"alltoall of tensor '{name_for(name, 'alltoall')}': the first "
                             f"dimension ({shape[0]}) does not divide evenly between "
                             f"{ranks} ranks; pass splits (the rows for each rank)")
        splits = [shape[0] // ranks] * ranks
    return _hvd.alltoall_async(name_for(name, "alltoall"), _native(tensor), list(splits),
                               set_id(process_set))


def reducescatter_async(name, tensor, op, prescale_factor, postscale_factor, process_set):
    """Starts a reducescatter: this rank's rows of the reduction, as new memory."""
    if len(_shape(tensor)) == 0:
        raise ValueError("reducescatter: the tensor needs at least one dimension")
    return _hvd.reducescatter_async(name_for(name, "reducescatter"), _native(tensor), op.code,
                                    float(prescale_factor), float(postscale_factor),
                                    set_id(process_set))


def barrier(process_set):
    """Returns once every member of the set has reached the barrier."""
    _hvd.barrier(set_id(process_set))


def join(process_set):
    """This rank has no more data; returns the last rank to join."""
    return _hvd.join(set_id(process_set))


def _describe_bytes(buffer, dtype="uint8", shape=None):
    """A description of a bytearray's memory (it owns itself)."""
    address = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer)) \
        if buffer else 0
    return (address, len(buffer), _hvd.DTYPES[dtype], shape or [len(buffer)], buffer)


def allgather_bytes(data, name, process_set=None):
    """Every member's ``data`` (bytes), as a list in rank order: for Python objects,
    without a framework."""
    lengths = bytearray(struct.pack("=q", len(data)))
    counts = _hvd.allgather_async(f"{name}.lengths", _describe_bytes(lengths, "int64", [1]),
                                  set_id(process_set))
    gathered = _hvd.allgather_async(f"{name}.data", _describe_bytes(bytearray(data)),
                                    set_id(process_set))
    raw_counts, _ = counts.wait()
    sizes = struct.unpack(f"={len(raw_counts) // 8}q", bytes(raw_counts))
    raw, _ = gathered.wait()
    out, at = [], 0
    for n in sizes:
        out.append(bytes(raw[at:at + n]))
        at += n
    return out


def broadcast_bytes(data, root_rank, name, process_set=None):
    """``root_rank``'s ``data`` (bytes; ignored elsewhere) on every member, without a
    framework."""
    root = root_in_set(root_rank, process_set, "broadcast")
    mine = _hvd.topology()[0] == int(root_rank)
    length = bytearray(struct.pack("=q", len(data) if mine else 0))
    _hvd.broadcast_async(f"{name}.length", _describe_bytes(length, "int64", [1]), root,
                         set_id(process_set)).wait()
    buffer = bytearray(data) if mine else bytearray(struct.unpack("=q", length)[0])
    _hvd.broadcast_async(f"{name}.data", _describe_bytes(buffer), root,
                         set_id(process_set)).wait()
    return bytes(buffer)
