"""Ranks disagree on a shape: every rank gets the same MismatchError naming both."""
import torch

import hvd.torch as hvd

hvd.init()
try:
    hvd.allreduce(torch.ones(hvd.rank() + 2), name="grad.w")
except hvd.MismatchError as e:
    assert isinstance(e, hvd.HorovodInternalError)
    print(f"rank {hvd.rank()}: caught: {e}", flush=True)
