"""Collectives on values (numbers, arrays, the backend's tensors), as horovod.keras's:
each returns a numpy array."""

from hvd.common.ops import Average
from hvd.keras.backend import compression as _compression
from hvd.keras.backend import front
from hvd.keras.flavor import to_numpy, to_tensor


def _tensor(value):
    return to_tensor(value)


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=None):
    """The reduction of ``value`` over the ranks (their average by default)."""
    compression = compression or _compression().none
    out = front().allreduce(_tensor(value), name=name, average=average, op=op,
                            prescale_factor=prescale_factor,
                            postscale_factor=postscale_factor, compression=compression)
    return to_numpy(out)


def allgather(value, name=None):
    """The ranks' values concatenated along the first dimension."""
    return to_numpy(front().allgather(_tensor(value), name=name))


def broadcast(value, root_rank, name=None):
    """``root_rank``'s value on every rank."""
    return to_numpy(front().broadcast(_tensor(value), root_rank,
                                                        name=name))


def reducescatter(value, name=None, op=Average):
    """This rank's rows of the reduction over the ranks."""
    return to_numpy(front().reducescatter(_tensor(value), name=name,
                                                            op=op))
