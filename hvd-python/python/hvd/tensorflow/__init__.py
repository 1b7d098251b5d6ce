"""Horovod's TensorFlow 2 API on hvd: ``import hvd.tensorflow as hvd``.

The job, the build probes, the reduce ops and process sets are framework-neutral
(``hvd.common``); this package turns TensorFlow tensors into what the runtime moves (by
DLPack, without linking TensorFlow) and wires TensorFlow's gradients, in eager mode and
inside ``tf.function``. Keras: ``import hvd.tensorflow.keras as hvd`` (or ``hvd.keras``).
"""

import os

# Each collective of a TensorFlow graph holds one of TensorFlow's inter-op threads while
# it waits for the other ranks (it is a Python call, not an asynchronous kernel as
# Horovod's), and the ranks' threads take a graph's independent collectives in their own
# orders: with as few threads as cores, every thread of one rank can wait for a
# collective the other rank has no thread left to start. TensorFlow reads this when it
# makes its thread pools (the first session or eager op), so it applies after an
# earlier `import tensorflow` too. A value the user set is kept.
os.environ.setdefault("TF_NUM_INTEROP_THREADS", str(max(64, os.cpu_count() or 1)))

# The framework-neutral API: errors, the job, build probes, reduce ops, process sets.
from hvd.common import *  # noqa: F401,F403
from hvd.tensorflow.compression import Compression  # noqa: F401
from hvd.tensorflow import data, elastic, util  # noqa: F401
from hvd.tensorflow.util import _executing_eagerly  # noqa: F401
from hvd.tensorflow.functions import (  # noqa: F401
    allgather_object,
    broadcast_global_variables,
    broadcast_object,
    broadcast_object_fn,
    broadcast_variables,
)
from hvd.tensorflow.hooks import BroadcastGlobalVariablesHook  # noqa: F401
from hvd.tensorflow.optimizer import DistributedOptimizer  # noqa: F401
from hvd.tensorflow.gradient_tape import (  # noqa: F401
    DistributedGradientTape,
    PartialDistributedGradientTape,
)
from hvd.tensorflow.mpi_ops import (  # noqa: F401
    allgather,
    allreduce,
    alltoall,
    barrier,
    broadcast,
    broadcast_,
    cross_rank_op,
    cross_size_op,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    join,
    local_rank_op,
    local_size_op,
    process_set_included_op,
    rank_op,
    reducescatter,
    size_op,
)


def __getattr__(name):
    # SyncBatchNormalization is a Keras layer: Keras is imported when it is first used.
    if name == "SyncBatchNormalization":
        from hvd.tensorflow.sync_batch_norm import SyncBatchNormalization
        return SyncBatchNormalization
    raise AttributeError(f"module 'hvd.tensorflow' has no attribute {name!r}")
