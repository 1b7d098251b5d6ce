"""Python objects between ranks, for every framework: pickled (with cloudpickle when it
is installed, as Horovod does, so lambdas and local classes travel too) and moved as
bytes."""

import pickle

from hvd.common.basics import rank
from hvd.common.ops import allgather_bytes, broadcast_bytes

try:
    import cloudpickle as _pickler
except ImportError:
    _pickler = pickle


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """``root_rank``'s ``obj`` (any picklable object) on every member of the set; the
    root gets its own object back. Unnamed calls share one name, neither the object's
    type (other ranks' placeholders need not share it) nor a count (a rank joining an
    elastic job has made fewer calls): each call completes before the next starts."""
    name = name or "broadcast_object"
    mine = rank() == int(root_rank)
    data = _pickler.dumps(obj) if mine else b""
    received = broadcast_bytes(data, root_rank, name, process_set)
    return obj if mine else pickle.loads(received)


def allgather_object(obj, name=None, process_set=None):
    """Every member's ``obj`` (any picklable object), as a list in rank order; unnamed
    calls share one name, as broadcast_object's."""
    name = name or "allgather_object"
    parts = allgather_bytes(_pickler.dumps(obj), name, process_set)
    return [pickle.loads(part) for part in parts]

