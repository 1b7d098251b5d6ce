"""hvd's own input pipeline (the ``hvd::data`` crate) as every framework's loader shares
it: the native loader's settings, its place in the epoch, and its batches as DLPack
capsules of its own reused buffers, which ``hvd.torch.data.DataLoader`` and
``hvd.tensorflow.data.DataLoader`` turn into their framework's tensors without a copy.
"""

import array
import operator
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

    ``arrays=(images, labels)`` takes a dataset held in memory instead, already the
    model's size (MNIST, CIFAR): ``images`` uint8 or float32 ``[samples, side, side]``
    or ``[samples, side, side, channels]`` (1 or 3 channels), ``labels`` one integer a
    sample, as NumPy arrays, torch tensors or anything with the buffer protocol. Each
    image is taken as it is: neither cropped nor flipped, bytes scaled to ``v / 255``
    (torchvision's ``ToTensor``), then normalised with ``mean`` and ``std`` (one value,
    or one a channel; none by default), giving ``[n, channels, side, side]``.

    The tensors are views of the loader's buffers, reused once both tensors of a batch
    are gone: keep a batch past its step only by copying it, or the loader runs short
    of buffers and times out saying so.

    ``train`` draws a random resized crop and flip per sample (from ``seed``, the epoch
    and the sample: the same whatever thread makes it), else a centre crop. The order
    is reshuffled each epoch from ``shuffle_seed`` (None: in order) and ``set_epoch``,
    alike on every rank. ``threads`` decode threads (default: this host's cores shared
    between its ranks), ``prefetch`` batches made ahead; ``skip_bad`` skips (and
    counts) unreadable samples instead of raising an error naming them; ``timeout``
    bounds the wait for one batch, in seconds. ``priority`` puts the decode
    threads below the training loop, so on a busy host the loop's own threads (its
    allreduce, the launch of the GPU's work) get a core at once and the decoders take
    what they leave: ``"idle"`` (Linux's ``SCHED_IDLE``), a number of Linux ``nice``
    steps (0 to 19, default 10; 0 keeps them equal), or ``"auto"`` for a job whose
    compute runs on a GPU (idle until ``autotune``, as an iteration starts, finds the
    loader cannot keep up, then 10 steps down, decoding being what the job waits for,
    until it finds 20 % to spare; without ``autotune`` it stays idle). Idle decoders get
    nothing while other threads keep every core busy (another job, or compute on the
    CPU), hence not the default.

    ``autotune`` (on unless ``threads`` is given) sets the threads and prefetch as each
    iteration over the loader starts, from the decode rate the loader measured and the
    step time the loop took when its batch was ready during the previous one. The
    ranks exchange what each needs (one small allgather as each iteration starts, so
    every rank iterates the loader alike, as it must anyway to take its share of every
    step) and split each host's cores between its ranks in proportion to their needs. ``tuning`` holds
    the last choice: ``threads``, ``share`` (the cores this rank was given),
    ``prefetch``, ``threads_needed``, ``capacity`` and ``demand`` in images a second,
    ``keeps_up``, and ``priority``, what the decode threads run at from then on
    (``"idle"``, or nice steps such as ``"10"``); a warning says when this rank's share cannot keep up whatever the
    loader does.

    ``indices`` holds the sample numbers of the batch last handed over."""

    def __init__(self, root=None, *, shards=None, synthetic=None, arrays=None,
                 image_size=None, batch_size=32, train=True, mean=None, std=None,
                 shuffle_seed=0, seed=0, threads=None, prefetch=2, skip_bad=False,
                 timeout=60.0, autotune=None, priority=10):
        given = [x is not None for x in (root, shards, synthetic, arrays)]
        if sum(given) != 1:
            raise ValueError(
                "DataLoader: give exactly one of root, shards, synthetic and arrays")
        if arrays is None and (mean is not None or std is not None):
            raise ValueError("DataLoader: mean and std are for arrays; images of files "
                             "are normalised with ImageNet's")
        held = None
        if arrays is not None:
            source, paths = "arrays", []
            held = _arrays(arrays)
            if image_size is None:
                image_size = held[1][1]
            mean, std = _per_channel(mean, "mean"), _per_channel(std, "std")
        elif root is not None:
            source, paths = "folder", [os.fspath(root)]
        elif shards is not None:
            source, paths = "shards", [os.fspath(p) for p in shards]
        else:
            source, paths = "synthetic", []
        if image_size is None:
            image_size = 224
        self._autotune = threads is None if autotune is None else bool(autotune)
        self.tuning = None
        self._steps = array.array("d")
        self.batch_size = batch_size
        self.image_size = image_size
        self.indices = []
        self._native = _hvd.Loader(
            source, paths, tuple(synthetic) if synthetic is not None else None,
            arrays=held, mean=mean, std=std, image_size=image_size, batch_size=batch_size, rank=basics.rank(),
            size=basics.size(), train=train, shuffle_seed=shuffle_seed, seed=seed,
            threads=threads, prefetch=prefetch, skip_bad=skip_bad, timeout=float(timeout),
            priority=_priority(priority))

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
        """The rest of the epoch's batches as (images capsule, labels capsule). Tunes
        the loader first, from the steps the previous iteration timed: at the start of
        an iteration, which every rank makes (a ``for`` loop, or tf.data iterating the
        dataset each epoch), where the end of one may never come on some rank (Keras
        stops taking batches once it knows how many an epoch has)."""
        if self._autotune:
            tuned = self._native.autotune(list(self._steps))
            self.tuning = tuned if tuned is not None else self.tuning
        self._steps = steps = array.array("d")
        previous = None
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


def _priority(value):
    """``value`` as the extension reads it ("auto", "idle" or nice steps), which checks
    it and names what is wrong."""
    if isinstance(value, str):
        return value
    try:
        steps = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        steps = None
    if steps is None:
        raise ValueError(f"DataLoader: priority {value!r}: expected \"auto\", \"idle\", or "
                         "the nice steps below the training loop (0 to 19)")
    return str(steps)


def _buffer(values, what):
    """``values`` as a C-contiguous memoryview: NumPy arrays and other buffers as they
    are, torch tensors through ``.numpy()`` (on the host)."""
    try:
        view = memoryview(values)
    except TypeError:
        to_numpy = getattr(values, "numpy", None)
        if to_numpy is None:
            raise TypeError(f"DataLoader: arrays' {what} are a {type(values).__name__}: "
                            "give a NumPy array, a torch tensor or a buffer") from None
        if getattr(values, "device", None) is not None and str(values.device) != "cpu":
            values = values.cpu()
        view = memoryview(to_numpy())
    if not view.c_contiguous:
        view = memoryview(view.tobytes()).cast(view.format, view.shape)
    return view


def _arrays(arrays):
    """``(images, labels)`` as the native loader takes them: the images' bytes,
    ``(samples, height, width, channels)``, whether they are float32, the labels."""
    try:
        images, labels = arrays
    except (TypeError, ValueError):
        raise ValueError("DataLoader: arrays is (images, labels)") from None
    images = _buffer(images, "images")
    kinds = {"B": False, "f": True}
    if images.format not in kinds:
        raise ValueError(f"DataLoader: arrays' images have format {images.format!r}: "
                         "give uint8 or float32")
    if images.ndim == 3:
        shape = (*images.shape, 1)
    elif images.ndim == 4:
        shape = images.shape
    else:
        raise ValueError(f"DataLoader: arrays' images have shape {tuple(images.shape)}: "
                         "give [samples, side, side] or [samples, side, side, channels]")
    if isinstance(labels, (list, tuple)):
        # torchvision's CIFAR keeps its labels in a list.
        labels = [_label(v) for v in labels]
    else:
        labels = _buffer(labels, "labels")
        if labels.ndim != 1 or labels.format not in "bBhHiIlLqQ":
            raise ValueError(f"DataLoader: arrays' labels have shape {tuple(labels.shape)} "
                             f"and format {labels.format!r}: give one integer a sample")
        labels = labels.tolist()
    return images.cast("B").tobytes(), tuple(shape), kinds[images.format], labels


def _label(value):
    """One label of a list, as an int (Python's or NumPy's integers)."""
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"DataLoader: arrays' label {value!r}: give one integer a "
                         "sample") from None


def _per_channel(values, name):
    """A mean or deviation as a list of floats (one, or one a channel), or None."""
    if values is None:
        return None
    if isinstance(values, (int, float)):
        return [float(values)]
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"DataLoader: {name} {values!r}: a number or one a channel") \
            from None
