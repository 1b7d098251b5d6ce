"""hvd's own input pipeline (the ``hvd::data`` crate) as every framework's loader shares
it: the native loader's settings, its place in the epoch, and its batches as DLPack
capsules of its own reused buffers, which ``hvd.torch.data.DataLoader`` and
``hvd.tensorflow.data.DataLoader`` turn into their framework's tensors without a copy.
"""

import array
import os
import time

from hvd import _hvd
from hvd.common import basics


class NativeLoader:
    """This rank's batches of a folder of class folders (``root``), of WebDataset tar
    shards (``shards``, a list of paths) or of synthetic images (``synthetic`` =
    (samples, width, height, classes)), as ``(images, labels)``: ``images`` float32
    ``[n, 3, image_size, image_size]`` (NCHW), normalised with ImageNet's mean and
    deviation, ``labels`` int64 ``[n]``. ``n`` is ``batch_size`` but in the epoch's
    last step, which shares what is left between the ranks (no sample padded, repeated
    or dropped).

    The tensors are views of the loader's buffers, reused once both tensors of a batch
    are gone: keep a batch past its step only by copying it, or the loader runs short
    of buffers and times out saying so.

    ``train`` draws a random resized crop and flip per sample (from ``seed``, the epoch
    and the sample: the same whatever thread makes it), else a centre crop. The order
    is reshuffled each epoch from ``shuffle_seed`` (None: in order) and ``set_epoch``,
    alike on every rank. ``threads`` decode threads (default: this host's cores shared
    between its ranks), ``prefetch`` batches made ahead; ``skip_bad`` skips (and
    counts) unreadable samples instead of raising an error naming them; ``timeout``
    bounds the wait for one batch, in seconds.

    ``autotune`` (on unless ``threads`` is given) sets the threads and prefetch after
    each epoch run to its end, from the decode rate the loader measured and the step
    time the loop took when its batch was ready (``tuning`` holds the last choice:
    ``threads``, ``prefetch``, ``threads_needed``, ``capacity`` and ``demand`` in
    images a second, ``keeps_up``); a warning says when this host's share of cores
    cannot keep up whatever the loader does.

    ``indices`` holds the sample numbers of the batch last handed over."""

    def __init__(self, root=None, *, shards=None, synthetic=None, image_size=224,
                 batch_size=32, train=True, shuffle_seed=0, seed=0, threads=None,
                 prefetch=2, skip_bad=False, timeout=60.0, autotune=None):
        given = [x is not None for x in (root, shards, synthetic)]
        if sum(given) != 1:
            raise ValueError("DataLoader: give exactly one of root, shards and synthetic")
        if root is not None:
            source, paths = "folder", [os.fspath(root)]
        elif shards is not None:
            source, paths = "shards", [os.fspath(p) for p in shards]
        else:
            source, paths = "synthetic", []
        self._autotune = threads is None if autotune is None else bool(autotune)
        if threads is None:
            threads = max(1, (os.cpu_count() or 1) // basics.local_size())
        self.tuning = None
        self.batch_size = batch_size
        self.image_size = image_size
        self.indices = []
        self._native = _hvd.Loader(
            source, paths, tuple(synthetic) if synthetic is not None else None,
            image_size=image_size, batch_size=batch_size, rank=basics.rank(),
            size=basics.size(), train=train, shuffle_seed=shuffle_seed, seed=seed,
            threads=threads, prefetch=prefetch, skip_bad=skip_bad, timeout=float(timeout))

    def set_epoch(self, epoch):
        """Starts epoch ``epoch`` (its own shuffle) at the next iteration."""
        self._native.set_epoch(epoch)

    def state_dict(self):
        """The loader's place (epoch, samples consumed across the ranks), counting the
        batch last handed over as done: keep it in an elastic state at each commit."""
        epoch, consumed = self._native.state()
        return {"epoch": epoch, "consumed": consumed}

    def load_state_dict(self, state):
        """Goes back to a place ``state_dict`` gave: the next iteration starts at the
        step after it, cut between the ranks the job has now (``hvd.rank()``,
        ``hvd.size()``), so every sample of the epoch is still seen once."""
        self._native.resize(basics.rank(), basics.size())
        self._native.load_state(int(state["epoch"]), int(state["consumed"]))

    def __len__(self):
        return self._native.steps()

    def _capsules(self):
        """The rest of the epoch's batches as (images capsule, labels capsule); tunes
        the loader once the epoch ran to its end."""
        steps, previous = array.array("d"), None
        while True:
            started = time.perf_counter()
            if previous is not None:
                steps.extend((previous[1], 0.0, started - previous[0]))
            got = self._native.next()
            if got is None:
                break
            previous = (started, time.perf_counter() - started)
            images, labels, self.indices = got
            yield images, labels
        if self._autotune:
            self.tuning = self._native.autotune(list(steps), basics.local_size())
