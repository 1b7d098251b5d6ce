"""Horovod's Keras API on hvd, for Keras 3: ``import hvd.keras as hvd`` (or Horovod's
``import hvd.tensorflow.keras as hvd``).

On Keras's TensorFlow backend the gradients go through ``hvd.tensorflow``, on its torch
backend through ``hvd.torch``; the JAX backend is refused (hvd has no JAX front).
"""

from hvd.common import (  # noqa: F401
    Average,
    HorovodInternalError,
    HorovodTimeoutError,
    MismatchError,
    ProcessSet,
    RankLostError,
    Sum,
    add_process_set,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    global_process_set,
    gloo_built,
    gloo_enabled,
    init,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    remove_process_set,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from hvd.common.objects import allgather_object, broadcast_object  # noqa: F401
from hvd.keras import callbacks  # noqa: F401
from hvd.keras.optimizer import DistributedOptimizer  # noqa: F401
from hvd.keras.saving import load_model  # noqa: F401
from hvd.keras.values import allgather, allreduce, broadcast, reducescatter  # noqa: F401


def broadcast_global_variables(root_rank):
    """Horovod's TF1 call, refused: TensorFlow 2 and Keras 3 have no global variables."""
    raise NotImplementedError(
        "broadcast_global_variables() needs TF1's global variables, which TensorFlow 2 "
        "and Keras 3 do not have; use hvd.callbacks.BroadcastGlobalVariablesCallback("
        "root_rank), or broadcast_variables(model.variables, root_rank) of "
        "hvd.tensorflow")


def __getattr__(name):
    # The backend's Compression, resolved when first used (JAX is refused then).
    if name == "Compression":
        from hvd.keras.backend import compression
        return compression()
    raise AttributeError(f"module 'hvd.keras' has no attribute {name!r}")
