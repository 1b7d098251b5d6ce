"""hvd.torch.data.instrument over a user's own DataLoader: rank 2's samples are slow to
load, and every rank's report charges rank 2 with the job's wait; each rank's four parts
add up to its wall time, and the Timeline holds each rank's DATA_WAIT spans."""
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import hvd.torch as hvd

SLOW_RANK, STEPS, BATCH = 2, 6, 2


class Slow(Dataset):
    def __init__(self, delay):
        self.delay = delay

    def __len__(self):
        return STEPS * BATCH

    def __getitem__(self, i):
        time.sleep(self.delay)
        return torch.full((4,), float(i)), i % 3


hvd.init()
rank = hvd.rank()
path = os.path.join(sys.argv[1], "timeline.json")
hvd.start_timeline(path)
delay = 0.03 if rank == SLOW_RANK else 0.0
loader = hvd.data.instrument(DataLoader(Slow(delay), batch_size=BATCH))
assert len(loader) == STEPS and loader.batch_size == BATCH and loader.report is None
hvd.barrier()
for epoch in range(2):
    for images, labels in loader:
        time.sleep(0.005)  # compute
        hvd.allreduce(images.sum(0), name="grads")
    report = loader.report
    assert report["steps"] == STEPS, report
    assert report["culprit"] == SLOW_RANK, report
    assert f"rank {SLOW_RANK} waited for data" in report["line"], report
    for r, parts in enumerate(report["ranks"]):
        total = parts["data"] + parts["compute"] + parts["own_comm"] + parts["waiting"]
        assert abs(total - parts["wall"]) <= 0.01 * parts["wall"], (r, parts)
        if r != SLOW_RANK:
            assert parts["waiting"] > report["ranks"][SLOW_RANK]["waiting"], report
    print(f"rank {rank}: epoch {epoch}: {report['line']}", flush=True)
hvd.barrier()
hvd.stop_timeline()
hvd.shutdown()
if rank == 0:
    with open(path) as f:
        events = json.load(f)
    for r in range(3):
        waits = [e for e in events
                 if e.get("pid") == r and e.get("name") == "DATA_WAIT" and e["ph"] == "B"]
        # Each epoch: one wait per batch and the one that finds the loader exhausted.
        assert len(waits) == 2 * (STEPS + 1), (r, len(waits))
print(f"rank {rank}: data_stall ok", flush=True)
