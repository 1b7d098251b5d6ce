"""hvd: Horovod's API on hvd's Rust runtime. For PyTorch: ``import hvd.torch as hvd``;
``hvd.run(fn, np=N)`` runs a function on N ranks and returns their results."""

from hvd._hvd import (  # noqa: F401
    HorovodInternalError,
    HorovodTimeoutError,
    MismatchError,
    RankLostError,
    __version__,
)
from hvd.runner import run  # noqa: F401
