"""Python objects between ranks, for every framework: pickled (with cloudpickle when it
is installed, as Horovod does, so lambdas and local classes travel too) and moved as
bytes."""

import pickle

from hvd.common.basics import rank
from hvd.common.ops import allgather_bytes, broadcast_bytes, name_for

try:
    import cloudpickle as _pickler
except ImportError:
    _pickler = pickle


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """``root_rank``'s ``obj`` (any picklable object) on every member of the set; the
    root gets its own object back. Unnamed calls are matched by their order (not by the
    object's type, which the other ranks' placeholders need not share)."""
    name = name_for(name, "broadcast_object")
    mine = rank() == int(root_rank)
    data = _pickler.dumps(obj) if mine else b""
    received = broadcast_bytes(data, root_rank, name, process_set)
    return obj if mine else pickle.loads(received)


def allgather_object(obj, name=None, process_set=None):
    """Every member's ``obj`` (any picklable object), as a list in rank order; unnamed
    calls are matched by their order."""
    name = name_for(name, "allgather_object")
    parts = allgather_bytes(_pickler.dumps(obj), name, process_set)
    return [pickle.loads(part) for part in parts]

