"""Rank 1 dies mid-job; rank 0's pending collective fails naming it."""
import os
import time

import torch

import hvd.torch as hvd

hvd.init()
hvd.allreduce(torch.ones(4), name="warmup")
if hvd.rank() == 1:
    os._exit(0)
time.sleep(0.5)
try:
    hvd.allreduce(torch.ones(4), name="after.death")
except hvd.HorovodInternalError as e:
    print(f"rank {hvd.rank()}: caught {type(e).__name__}: {e}", flush=True)
