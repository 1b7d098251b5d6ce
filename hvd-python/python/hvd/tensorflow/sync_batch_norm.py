"""Horovod's SyncBatchNormalization: Keras batch normalisation whose statistics are
those of the whole job's batch."""

import tensorflow as tf

from hvd.common.basics import size
from hvd.common.ops import Sum
from hvd.keras.flavor import LEGACY, keras
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

    def _moments(self, inputs, *args, **kwargs):
        # Keras 3 asks for (inputs, mask), Keras 2 for (inputs, reduction_axes, keep_dims).
        if LEGACY:
            return self._job_moments_keras2(inputs, *args, **kwargs)
        return self._job_moments(inputs, *args, **kwargs)

    def _job_moments(self, inputs, mask):
        if size() == 1:
            return super()._moments(inputs, mask)
        x = tf.cast(inputs, tf.float64)
        mean, variance = _job_statistics(x, _ones(x, mask), self._reduction_axes, False)
        # Keras has already widened 16-bit inputs to float32.
        return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)

    def _job_moments_keras2(self, inputs, reduction_axes, keep_dims, mask=None):
        if size() == 1:
            return super()._moments(inputs, reduction_axes, keep_dims=keep_dims, mask=mask)
        x = tf.cast(inputs, tf.float64)
        mean, variance = _job_statistics(x, _ones(x, mask), reduction_axes, keep_dims)
        return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)


def _ones(x, mask):
    """1 where an element of ``x`` counts, 0 where ``mask`` (over all but the channels)
    leaves it out."""
    if mask is None:
        return tf.ones_like(x)
    return tf.cast(tf.broadcast_to(tf.expand_dims(mask, -1), tf.shape(x)), tf.float64)


def _job_statistics(x, ones, axes, keep_dims):
    """The mean and variance over ``axes`` of every rank's ``x`` together (elements where
    ``ones`` is 0 left out), from one allreduce of the counts, sums and sums of
    squares."""
    counts = tf.reduce_sum(ones, axes, keepdims=keep_dims)
    sums = tf.reduce_sum(x * ones, axes, keepdims=keep_dims)
    squares = tf.reduce_sum(x * x * ones, axes, keepdims=keep_dims)
    total = allreduce(tf.stack([counts, sums, squares]), op=Sum)
    mean = total[1] / total[0]
    return mean, tf.maximum(total[2] / total[0] - mean * mean, 0.0)
