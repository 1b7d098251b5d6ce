"""hvd.init() called by several threads of a rank at once: the first starts the job, the
others find it running (two starts would join the job twice as the same rank), and every
thread's collectives then run in that one job."""
import threading

import torch

import hvd.torch as hvd

THREADS = 4
ready = threading.Barrier(THREADS)
errors = []


def start():
    try:
        ready.wait()
        hvd.init()
    except BaseException as e:  # noqa: BLE001 - any failure is the test's to report
        errors.append(repr(e))


threads = [threading.Thread(target=start) for _ in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join(120)
assert not any(t.is_alive() for t in threads), "an init never returned"
assert not errors, errors
assert hvd.size() == 2, hvd.size()
total = hvd.allreduce(torch.full((3,), float(hvd.rank() + 1)), op=hvd.Sum, name="after")
assert total.tolist() == [3.0, 3.0, 3.0], total
print(f"rank {hvd.rank()}: init from {THREADS} threads ok", flush=True)
