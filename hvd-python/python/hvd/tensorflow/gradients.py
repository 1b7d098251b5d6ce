"""Gradients of TensorFlow variables combined over the ranks, for DistributedGradientTape
and Keras's DistributedOptimizer: every gradient of a step in one call (one
``tf.py_function`` in a graph), so Tensor Fusion packs them and the call's cost is paid
once per step."""

import tensorflow as tf

from hvd.common import gradients
from hvd.tensorflow.mpi_ops import reduce_many


def variable_key(variable):
    """What identifies a variable, be it a ``tf.Variable``, a Keras variable (whose
    ``value`` is its tf.Variable) or a tensor."""
    value = getattr(variable, "value", None)
    if isinstance(value, tf.Variable):
        variable = value
    return variable.ref() if hasattr(variable, "ref") else id(variable)


def check_groups(groups, num_groups=0):
    return gradients.check_groups(groups, num_groups, variable_key)


def _divide(grad, n):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / n, grad.indices, grad.dense_shape)
    return grad / n


def reducer(prefix, compression, sparse_as_dense, op, gradient_predivide_factor, groups,
            process_set, scale_local_gradients):
    """A GradientReducer of TensorFlow gradients: ``compression`` on the wire,
    IndexedSlices by allgather unless ``sparse_as_dense``."""

    def combine(values, names, op, prescale_factor, postscale_factor):
        if sparse_as_dense:
            values = [tf.convert_to_tensor(v) if isinstance(v, tf.IndexedSlices) else v
                      for v in values]
        return reduce_many(values, names, op, prescale_factor, postscale_factor,
                           compression, process_set)

    return gradients.GradientReducer(prefix, combine, variable_key, _divide, op,
                                     gradient_predivide_factor, groups, process_set,
                                     scale_local_gradients)
