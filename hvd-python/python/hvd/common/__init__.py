"""The framework-neutral half of hvd's Python fronts, shared by every framework module.

- :mod:`hvd.common.basics`: the job (``init``, ``shutdown``, ``rank``, ``size``, ...), the
  build probes (``mpi_built``, ``gloo_enabled``, ...) and the Timeline;
- :mod:`hvd.common.ops`: the reduce ops (``Average``, ``Sum``, ..., ``Adasum``), the names
  of unnamed operations, and the collectives on tensors described by pointer;
- :mod:`hvd.common.process_sets`: ``ProcessSet``, ``global_process_set``,
  ``add_process_set``, ``remove_process_set``;
- :mod:`hvd.common.objects`: ``broadcast_object``, ``allgather_object``;
- :mod:`hvd.common.compression`: the compressors' shape;
- :mod:`hvd.common.gradients`: which gradients of a step are combined, under which
  names, in which order.

A framework module (``hvd.torch``, ``hvd.tensorflow``, ``hvd.keras``) re-exports the
names below with ``from hvd.common import *`` (``__all__``: the errors, the job, the
build probes, the reduce ops and process sets), then only turns its tensors into
descriptions and back and wires the framework's hooks (autograd, gradient tapes,
optimizers).
"""

import types as _types

from hvd._hvd import (  # noqa: F401
    HorovodInternalError,
    HorovodTimeoutError,
    MismatchError,
    RankLostError,
)
from hvd.common.basics import (  # noqa: F401
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
    transport,
)
from hvd.common.ops import Adasum, Average, Max, Min, Product, ReduceOp, Sum  # noqa: F401
from hvd.common.process_sets import (  # noqa: F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)

# Every public name above, none of the submodules: what each front re-exports.
__all__ = sorted(
    name
    for name, value in globals().items()
    if not name.startswith("_") and not isinstance(value, _types.ModuleType)
)
