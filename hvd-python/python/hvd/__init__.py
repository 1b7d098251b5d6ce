"""hvd: Horovod's API on hvd's Rust runtime. For PyTorch: ``import hvd.torch as hvd``."""

from hvd._hvd import (  # noqa: F401
    HorovodInternalError,
    HorovodTimeoutError,
    MismatchError,
    RankLostError,
)
