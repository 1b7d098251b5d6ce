"""The input side of training with hvd under PyTorch: ``instrument(loader)`` times a
user's own ``DataLoader`` step by step and says, at the end of each epoch, how much of
it the job lost waiting for some rank's data, and which rank (``hvd.common.data_stall``).

    loader = hvd.data.instrument(torch.utils.data.DataLoader(dataset, sampler=sampler))
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            ...  # forward, backward, optimizer.step()
        print(loader.report["data_bound"])   # rank 0 has logged the epoch's line
"""

from hvd.common.data_stall import Instrumented, instrument  # noqa: F401
