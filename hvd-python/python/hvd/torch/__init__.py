"""Horovod's PyTorch API on hvd: ``import hvd.torch as hvd``."""

import atexit

from hvd import _hvd
from hvd._hvd import (  # noqa: F401
    HorovodInternalError,
    HorovodTimeoutError,
    MismatchError,
    RankLostError,
)
from hvd.torch.compression import Compression  # noqa: F401
from hvd.torch.functions import (  # noqa: F401
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from hvd.torch.mpi_ops import (  # noqa: F401
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    allgather,
    allgather_async,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall,
    alltoall_async,
    barrier,
    broadcast,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    join,
    poll,
    reducescatter,
    reducescatter_async,
    synchronize,
)
from hvd.torch.optimizer import DistributedOptimizer  # noqa: F401
from hvd.torch.process_sets import (  # noqa: F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)


def init(process_sets=None):
    """Joins the job the launcher started (hvdrun, horovodrun, mpirun, torchrun); without
    one, a job of one rank. ``process_sets`` (ProcessSet objects) are created at start."""
    sets = list(process_sets or [])
    _hvd.init([ps.ranks for ps in sets])
    for i, ps in enumerate(sets):
        ps.process_set_id = i + 1


shutdown = _hvd.shutdown
# Leave the job cleanly at exit, so the other ranks see a shutdown, not a lost rank.
atexit.register(_hvd.shutdown)
is_initialized = _hvd.is_initialized
start_timeline = _hvd.start_timeline
stop_timeline = _hvd.stop_timeline


def rank():
    return _hvd.topology()[0]


def size():
    return _hvd.topology()[1]


def local_rank():
    return _hvd.topology()[2]


def local_size():
    return _hvd.topology()[3]


def cross_rank():
    return _hvd.topology()[4]


def cross_size():
    return _hvd.topology()[5]
