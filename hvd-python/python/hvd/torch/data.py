"""The input side of training with hvd under PyTorch.

- ``DataLoader``: hvd's own input pipeline (the ``hvd::data`` crate): images decoded
  (JPEG, PNG) and augmented (random resized crop, flip, normalise) on a pool of native
  threads, each rank its share of every step, every sample once per epoch, batches
  handed over as torch tensors of the loader's own reused memory (DLPack, no copy).
- ``instrument(loader)``: times a user's own ``DataLoader`` step by step and says, at
  the end of each epoch, how much of it the job lost waiting for some rank's data, and
  which rank (``hvd.common.data_stall``).

    loader = hvd.data.DataLoader("imagenet/train", image_size=224, batch_size=64)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in hvd.data.instrument(loader):
            ...  # forward, backward, optimizer.step()
"""

import torch

from hvd.common.data_stall import Instrumented, instrument  # noqa: F401
from hvd.common.loader import NativeLoader


class DataLoader(NativeLoader):
    __doc__ = NativeLoader.__doc__ + """

    Batches come as torch tensors (``torch.from_dlpack``): keep one past its step with
    ``images.clone()``."""

    def __iter__(self):
        for images, labels in self._capsules():
            yield torch.from_dlpack(images), torch.from_dlpack(labels)
