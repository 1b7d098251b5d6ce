"""Horovod's SyncBatchNormalization: Keras batch normalisation whose statistics are
those of the whole job's batch."""

import keras
import tensorflow as tf

from hvd.common.basics import size
from hvd.common.ops import Sum
from hvd.tensorflow.mpi_ops import allreduce


class SyncBatchNormalization(keras.layers.BatchNormalization):
    """Normalises over the batches of every rank together.

    In training, the mean and variance of each channel are those of the job's whole
    batch: every rank's count, sum and sum of squares per channel (accumulated in f64,
    masked elements left out) are summed with one allreduce, so each rank's output,
    moving statistics and input gradients are what one process would compute on the
    concatenated batch. The gamma and beta gradients are this rank's, which
    DistributedOptimizer or DistributedGradientTape then averages. In inference, each
    rank normalises with its moving statistics alone.

    Arguments are Keras's ``BatchNormalization``'s (TensorFlow backend), but
    ``synchronized`` (tf.distribute's own) and ``fused`` (refused, as in Horovod).
    """

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True.")
        if kwargs.get("synchronized"):
            raise ValueError("SyncBatchNormalization synchronises through hvd; leave "
                             "synchronized (tf.distribute's) unset")
        if keras.backend.backend() != "tensorflow":
            raise ValueError(f"hvd.tensorflow.SyncBatchNormalization needs Keras's "
                             f"tensorflow backend, not {keras.backend.backend()}")
        super().__init__(**kwargs)

    def _moments(self, inputs, mask):
        if size() == 1:
            return super()._moments(inputs, mask)
        x = tf.cast(inputs, tf.float64)
        ones = tf.ones_like(x) if mask is None else tf.cast(
            tf.broadcast_to(tf.expand_dims(mask, -1), tf.shape(x)), tf.float64)
        counts = tf.reduce_sum(ones, self._reduction_axes)
        sums = tf.reduce_sum(x * ones, self._reduction_axes)
        squares = tf.reduce_sum(x * x * ones, self._reduction_axes)
        total = allreduce(tf.stack([counts, sums, squares]), op=Sum)
        mean = total[1] / total[0]
        variance = tf.maximum(total[2] / total[0] - mean * mean, 0.0)
        # Keras has already widened 16-bit inputs to float32.
        return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)
