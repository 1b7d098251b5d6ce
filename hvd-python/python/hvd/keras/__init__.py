"""Horovod's Keras API on hvd: ``import hvd.keras as hvd`` (or Horovod's ``import
hvd.tensorflow.keras as hvd``), on Keras 3, or on Keras 2 (tf_keras) when
``TF_USE_LEGACY_KERAS=1`` makes it TensorFlow's Keras (``hvd.keras.flavor``).

On Keras's TensorFlow backend the gradients go through ``hvd.tensorflow``, on its torch
backend through ``hvd.torch``; the JAX backend is refused (hvd has no JAX front).
"""

# The framework-neutral API: errors, the job, build probes, reduce ops, process sets.
from hvd.common import *  # noqa: F401,F403
from hvd.common.objects import allgather_object, broadcast_object  # noqa: F401
from hvd.keras import callbacks, elastic  # noqa: F401
from hvd.keras.optimizer import DistributedOptimizer, PartialDistributedOptimizer  # noqa: F401
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
