"""HOROVOD_TIMELINE=DYNAMIC (as Horovod's tests set it) writes no file at start; the
program starts and stops the Timeline, marking cycles when asked, and the file holds
what was recorded as soon as stop_timeline returns, as after Horovod's."""
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
if rank == 0:
    with open(path) as f:
        text = f.read()
    json.loads(text)
    assert "traced" in text and "NEGOTIATE_ALLREDUCE" in text and "CYCLE_START" in text, text
hvd.barrier()
hvd.shutdown()
print(f"rank {rank}: timeline ok", flush=True)
