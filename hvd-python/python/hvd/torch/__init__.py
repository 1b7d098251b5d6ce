"""Horovod's PyTorch API on hvd: ``import hvd.torch as hvd``.

The job, the build probes, the reduce ops and process sets are framework-neutral
(``hvd.common``); this package turns torch tensors into what the runtime moves and wires
torch's autograd and optimizers."""

# The framework-neutral API: errors, the job, build probes, reduce ops, process sets.
from hvd.common import *  # noqa: F401,F403
from hvd.torch.compression import Compression  # noqa: F401
from hvd.torch.functions import (  # noqa: F401
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from hvd.torch.mpi_ops import (  # noqa: F401
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
    grouped_allgather,
    grouped_allgather_async,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter,
    grouped_reducescatter_async,
    join,
    poll,
    reducescatter,
    reducescatter_async,
    sparse_allreduce_async,
    synchronize,
)
from hvd.torch.optimizer import DistributedOptimizer  # noqa: F401
from hvd.torch import data, elastic  # noqa: F401,E402
from hvd.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
