"""Horovod's ``hvd.DistributedOptimizer`` of ``horovod.tensorflow``: a TensorFlow 1
optimizer (``tf.compat.v1.train.Optimizer``) whose ``compute_gradients`` returns the
gradients combined over the ranks, all in one call; a Keras optimizer is handed to
``hvd.keras``'s. ``backward_passes_per_step=n`` accumulates n passes' gradients locally
(in local variables of the graph) and combines and applies them on every n-th, as
Horovod does; the global step still counts every pass."""

import tensorflow as tf

from hvd.common.ops import Average
from hvd.common.process_sets import global_process_set
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.gradients import check_groups, reducer


def _dense(grad):
    return tf.convert_to_tensor(grad) if isinstance(grad, tf.IndexedSlices) else grad


class _DistributedOptimizer(tf.compat.v1.train.Optimizer):
    def __init__(self, optimizer, name, use_locking, compression, sparse_as_dense, op,
                 gradient_predivide_factor, backward_passes_per_step,
                 average_aggregated_gradients, groups, process_set):
        super().__init__(name=name or f"Distributed{type(optimizer).__name__}",
                         use_locking=use_locking)
        if backward_passes_per_step < 1:
            raise ValueError(f"backward_passes_per_step must be at least 1, got "
                             f"{backward_passes_per_step}")
        self._optimizer = optimizer
        self._sparse_as_dense = sparse_as_dense
        self._passes = backward_passes_per_step
        self._average_aggregated = average_aggregated_gradients
        self._reducer = reducer("DistributedOptimizer", compression, sparse_as_dense, op,
                                gradient_predivide_factor, groups, process_set, True)
        self._applies = None

    def _combine(self, grads, variables):
        # Unique names within the graph (or the next of the eager sequence), the same
        # on every rank that builds the same graph.
        if tf.executing_eagerly():
            names = [f"grad.{i}" for i in range(len(grads))]
        else:
            base = tf.compat.v1.get_default_graph().unique_name("grads", mark_as_used=True)
            names = [f"{base}.{i}" for i in range(len(grads))]
        return self._reducer(grads, variables, names)

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's (gradient, variable) pairs, the gradients combined over
        the ranks (on every n-th pass with ``backward_passes_per_step=n``)."""
        pairs = list(self._optimizer.compute_gradients(*args, **kwargs))
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        if self._sparse_as_dense:
            grads = [None if g is None else _dense(g) for g in grads]
        if self._passes == 1:
            return list(zip(self._combine(grads, variables), variables))
        return list(zip(self._aggregate(grads, variables), variables))

    def _aggregate(self, grads, variables):
        if tf.executing_eagerly():
            raise ValueError("backward_passes_per_step > 1 with a TensorFlow 1 optimizer "
                             "needs a graph; in eager code use a Keras optimizer, or "
                             "DistributedGradientTape and accumulate yourself")
        local = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
        counter = tf.compat.v1.Variable(0, dtype=tf.int64, trainable=False,
                                        collections=local, name="hvd_passes")
        present = [i for i, g in enumerate(grads) if g is not None]
        sums = [tf.compat.v1.Variable(tf.zeros_like(_dense(grads[i])), trainable=False,
                                      collections=local, name="hvd_aggregated")
                for i in present]
        passes = counter.assign_add(1)
        with tf.control_dependencies([passes]):
            added = [s.assign_add(_dense(grads[i])) for s, i in zip(sums, present)]
        with tf.control_dependencies(added):
            self._applies = tf.equal(passes % self._passes, 0)

        def combine_now():
            values = [s.read_value() for s in sums]
            if self._average_aggregated:
                values = [v / tf.cast(self._passes, v.dtype) for v in values]
            combined = self._combine(values, [variables[i] for i in present])
            with tf.control_dependencies(combined):
                cleared = [s.assign(tf.zeros_like(s)) for s in sums]
            with tf.control_dependencies(cleared):
                return [tf.identity(c) for c in combined]

        def not_yet():
            return [tf.zeros_like(s) for s in sums]

        out = tf.cond(self._applies, combine_now, not_yet) if sums else []
        result = [None] * len(grads)
        for i, g in zip(present, out):
            result[i] = g
        return result

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The wrapped optimizer's update; with ``backward_passes_per_step=n``, on every
        n-th pass only (the others count ``global_step`` on)."""
        if self._passes == 1:
            return self._optimizer.apply_gradients(grads_and_vars, global_step, name)
        if self._applies is None:
            raise ValueError("apply_gradients() needs compute_gradients() of this "
                             "optimizer first (backward_passes_per_step > 1)")
        grads_and_vars = list(grads_and_vars)

        def apply():
            with tf.control_dependencies([self._optimizer.apply_gradients(
                    grads_and_vars, global_step, name)]):
                return tf.constant(True)

        def count_only():
            counted = [] if global_step is None else [global_step.assign_add(1)]
            with tf.control_dependencies(counted):
                return tf.constant(False)
        return tf.cond(self._applies, apply, count_only).op

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=global_process_set):
    """Wraps ``optimizer`` so that its gradients are combined over the ranks of
    ``process_set`` (``op``: Average by default, Sum, Adasum; ``compression`` on the wire;
    IndexedSlices by allgather unless ``sparse_as_dense``). A TensorFlow 1 optimizer is
    wrapped here; a Keras optimizer by ``hvd.keras.DistributedOptimizer``."""
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        return _DistributedOptimizer(optimizer, name, use_locking, compression,
                                     sparse_as_dense, op, gradient_predivide_factor,
                                     backward_passes_per_step,
                                     average_aggregated_gradients,
                                     check_groups(groups, num_groups), process_set)
    from hvd.keras.optimizer import DistributedOptimizer as KerasDistributedOptimizer
    return KerasDistributedOptimizer(
        optimizer, name=name, compression=compression, sparse_as_dense=sparse_as_dense,
        backward_passes_per_step=backward_passes_per_step, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        average_aggregated_gradients=average_aggregated_gradients, num_groups=num_groups,
        groups=groups, process_set=process_set)
