"""The input side of training with hvd under TensorFlow.

- ``DataLoader``: hvd's own input pipeline (the ``hvd::data`` crate), as under PyTorch:
  images decoded and augmented on a pool of native threads, each rank its share of
  every step, every sample once per epoch. Iterated, it hands over TensorFlow tensors of
  the loader's own reused memory (DLPack, no copy); ``dataset()`` wraps the same
  batches in a ``tf.data.Dataset`` for ``model.fit`` or a ``tf.function`` loop.
- ``instrument(dataset)`` times a ``tf.data.Dataset`` (or the loader) iterated eagerly
  (``for x, y in hvd.data.instrument(dataset)``) step by step and says, at the end of
  each epoch, how much of it the job lost waiting for some rank's data, and which rank
  (``hvd.common.data_stall``). Keras' ``fit`` iterates the dataset inside its own
  graph, out of the wrapper's sight: instrument a custom loop.

    loader = hvd.data.DataLoader("imagenet/train", image_size=224, batch_size=64)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in hvd.data.instrument(loader):
            ...  # forward, tape.gradient, optimizer.apply_gradients
"""

import tensorflow as tf

from hvd.common.data_stall import Instrumented, instrument  # noqa: F401
from hvd.common.loader import NativeLoader


class DataLoader(NativeLoader):
    __doc__ = NativeLoader.__doc__ + """

    Batches come as TensorFlow tensors (``tf.experimental.dlpack.from_dlpack``: the
    loader's buffers start on the 64-byte boundary TensorFlow requires of memory it
    adopts): keep one past its step with ``tf.identity(images)``. TensorFlow's CPU
    convolutions take channels last: ``dataset(channels_last=True)`` transposes, a
    copy in TensorFlow's threads."""

    def __iter__(self):
        from_dlpack = tf.experimental.dlpack.from_dlpack
        for images, labels in self._capsules():
            yield from_dlpack(images), from_dlpack(labels)

    def dataset(self, channels_last=False):
        """A ``tf.data.Dataset`` of this rank's ``(images, labels)``, one epoch each
        time it is iterated (``model.fit`` does once an epoch), from the loader's place:
        call ``set_epoch`` before each, as in a loop over the loader itself; with
        ``fit``, ``keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs:
        loader.set_epoch(epoch))``. Every rank's dataset has the same number of batches
        an epoch (``len(loader)``), which ``fit`` learns after the first.

        The batches are the loader's buffers, not copies (``from_generator`` passes
        the tensors through): add no ``prefetch`` of more batches than the loader's own
        ``prefetch``, or the loader runs short of buffers and times out saying so.
        ``channels_last`` gives images ``[n, image_size, image_size, 3]``."""
        side = self.image_size
        signature = (tf.TensorSpec([None, 3, side, side], tf.float32),
                     tf.TensorSpec([None], tf.int64))
        dataset = tf.data.Dataset.from_generator(self.__iter__, output_signature=signature)
        if channels_last:
            dataset = dataset.map(lambda images, labels:
                                  (tf.transpose(images, [0, 2, 3, 1]), labels))
        return dataset
