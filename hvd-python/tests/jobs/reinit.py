"""Horovod's init -> shutdown -> init on every rank, as Horovod's own tests do between
each test: every new job meets the others (fresh rendezvous keys), unnamed operations
are numbered from the start again, and the launcher's HOROVOD_* variables match."""
import os

import torch

import hvd.torch as hvd

for round in range(3):
    assert not hvd.is_initialized()
    hvd.init()
    assert hvd.is_initialized()
    rank, size = hvd.rank(), hvd.size()
    assert (rank, size) == (int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"]))
    assert hvd.local_rank() == int(os.environ["HOROVOD_LOCAL_RANK"])
    # Unnamed, so matched by the order of the calls: it meets only if every rank's
    # numbering started again with this job.
    summed = hvd.allreduce(torch.ones(2), op=hvd.Sum)
    assert torch.equal(summed, torch.full((2,), float(size))), summed
    if round == 0 and rank == 0:
        # One unnamed call the others never make: it fails when the job ends.
        stray = hvd.allreduce_async(torch.ones(1), op=hvd.Sum)
    evens = hvd.add_process_set(list(range(0, size, 2)))
    if evens.included():
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=evens,
                             name=f"evens.{round}").item() == len(evens.ranks)
    hvd.barrier()
    hvd.shutdown()
    assert not hvd.is_initialized()
if rank == 0:
    try:
        hvd.synchronize(stray)
        raise AssertionError("an allreduce no other rank made completed")
    except hvd.HorovodInternalError as e:
        assert "shut down" in str(e), str(e)
print(f"rank {rank}: reinit ok", flush=True)
