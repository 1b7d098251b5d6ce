"""Horovod's DistributedGradientTape: a tf.GradientTape whose ``gradient()`` returns the
gradients combined over the ranks, all of one call in one batch (one ``tf.py_function``
inside ``tf.function``)."""

import tensorflow as tf

from hvd.common.ops import Average
from hvd.common.process_sets import global_process_set
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.gradients import check_groups, reducer


class _DistributedTape:
    """Mixed in before the wrapped tape's class, so its own ``gradient`` computes the
    local gradients."""

    def register_local_source(self, source):
        """Gradients of ``source`` are not combined over the ranks (divided by the set's
        size when ``scale_local_gradients``)."""
        self._hvd_reducer.register_local(source)

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE,
                 use_generic_names=False):
        grads = super().gradient(target, sources, output_gradients, unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads)
        names = [f"grad.{i}" for i in range(len(flat_sources))]
        reduced = self._hvd_reducer(flat_grads, flat_sources, names)
        return tf.nest.pack_sequence_as(grads, reduced)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None,
                                       use_generic_names=False):
        """(local (source, gradient) pairs, combined (source, gradient) pairs)."""
        grads = self.gradient(target, sources, output_gradients)
        local, shared = [], []
        for s, g in zip(sources, grads):
            (local if self._hvd_reducer.is_local(s) else shared).append((s, g))
        return local, shared


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """Wraps ``gradtape`` (after its ``with`` block) so that ``gradient()`` combines the
    gradients over the ranks of ``process_set``: ``op`` (Average by default; Sum, Adasum),
    ``gradient_predivide_factor`` of the averaging before the sum, ``compression`` on the
    wire, IndexedSlices by allgather unless ``sparse_as_dense``. ``groups`` (a number, or
    lists of variables) orders the submission; every gradient of a call goes in one call
    whatever the groups. Sources registered with ``register_local_source`` keep their own
    gradients (divided by the set's size when ``scale_local_gradients``)."""
    combined = reducer("DistributedGradientTape", compression, sparse_as_dense, op,
                       gradient_predivide_factor, check_groups(groups, num_groups),
                       process_set, scale_local_gradients)
    base = type(gradtape)
    cls = type(base.__name__, (_DistributedTape, base), {})
    tape = cls.__new__(cls)
    # The same recording: the wrapped tape's state, shared.
    tape.__dict__.update(gradtape.__dict__)
    tape._hvd_reducer = combined
    return tape


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="",
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """A DistributedGradientTape whose ``local_layers`` (Keras layers) keep their own
    gradients."""
    if local_layers is None:
        local_layers = []
    elif hasattr(local_layers, "trainable_weights"):
        local_layers = [local_layers]
    if not all(hasattr(layer, "trainable_weights") for layer in local_layers):
        raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor,
                                   num_groups, groups, process_set, scale_local_gradients)
    for layer in local_layers:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape
