"""HOROVOD_TIMELINE=DYNAMIC (as Horovod's tests set it) writes no file at start; the
program starts and stops the Timeline, marking cycles when asked."""
import json
import os
import sys

import torch

import hvd.torch as hvd

assert os.environ["HOROVOD_TIMELINE"] == "DYNAMIC"
hvd.init()
rank = hvd.rank()
assert not os.path.exists("DYNAMIC"), "a file named after the DYNAMIC setting was written"
path = os.path.join(sys.argv[1], "timeline.json")
hvd.start_timeline(path, mark_cycles=True)
hvd.allreduce(torch.ones(3), name="traced")
hvd.barrier()
hvd.stop_timeline()
hvd.shutdown()
if rank == 0:
    with open(path) as f:
        text = f.read()
    json.loads(text)
    assert "traced" in text and "NEGOTIATE_ALLREDUCE" in text and "CYCLE_START" in text, text
print(f"rank {rank}: timeline ok", flush=True)
