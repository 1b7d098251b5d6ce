"""What hvd.keras computes with when Keras runs on TensorFlow: the collectives,
``Compression`` and ``broadcast_variables``, and nothing that imports hvd.keras back.

``hvd.tensorflow.DistributedOptimizer`` hands a Keras optimizer to hvd.keras, so hvd.keras
takes these from here rather than from the ``hvd.tensorflow`` package, whose optimizer
module would close a circle."""

from hvd.tensorflow.compression import Compression  # noqa: F401
from hvd.tensorflow.functions import broadcast_variables  # noqa: F401
from hvd.tensorflow.mpi_ops import allgather, allreduce, broadcast, reducescatter  # noqa: F401
