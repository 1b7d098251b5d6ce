"""Horovod's DistributedOptimizer for Keras 2 (tf_keras): its optimizers (``Optimizer``
and ``optimizers.legacy``) have no gradient-clipping hook of Keras 3's, so the gradients
are combined where Horovod combines them, in ``compute_gradients`` (which ``minimize``,
and so Keras 2's ``fit``, calls each step), and ``apply_gradients`` applies them.
``backward_passes_per_step=n`` is Horovod's local aggregation: each pass adds its
gradients to variables of the optimizer's, and every n-th pass combines their sum (or
mean) over the ranks and applies it; the other passes only count ``iterations`` on."""

import tensorflow as tf

from hvd.tensorflow.gradients import reducer as tensorflow_reducer

# One distributed class per optimizer class, so that every DistributedOptimizer of a
# class is of the same type.
_CLASSES = {}


def _dense(grad):
    return tf.convert_to_tensor(grad) if isinstance(grad, tf.IndexedSlices) else grad


class _Aggregation:
    """The passes of local aggregation: ``counter`` (passes since the last combination;
    Horovod's name) and one sum per variable, made outside any tf.function."""

    def __init__(self, passes, average):
        self.passes = passes
        self.average = average
        self.counter = None
        self.sums = {}

    def made_for(self, variables):
        with tf.init_scope():
            if self.counter is None:
                self.counter = tf.Variable(0, dtype=tf.int64, trainable=False,
                                           name="hvd_aggregated_passes")
            for v in variables:
                if v.ref() not in self.sums:
                    self.sums[v.ref()] = tf.Variable(tf.zeros(v.shape, v.dtype),
                                                     trainable=False, name="hvd_aggregated")
        return [self.sums[v.ref()] for v in variables]


class _Settings:
    def __init__(self, reducer, aggregation):
        self.reducer = reducer
        self.aggregation = aggregation
        # Set by compute_gradients, whose gradients apply_gradients then takes as they
        # are: whether this pass combines (local aggregation), and that they are combined.
        self.applies = None
        self.combined = False


class _Distributed:
    """Mixed in before the wrapped optimizer's class."""

    @property
    def _agg_helper(self):
        return self._hvd.aggregation

    def register_local_var(self, var):
        """Gradients of ``var`` are not combined over the ranks."""
        self._hvd.reducer.register_local(var)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        """The gradients combined over the ranks (on every n-th pass of local
        aggregation; zeros on the others), as Horovod's."""
        parent = super()
        if hasattr(parent, "_compute_gradients"):
            pairs = parent._compute_gradients(loss, var_list, grad_loss=grad_loss, tape=tape)
        else:
            pairs = parent.compute_gradients(loss, var_list, tape=tape)
        return self._combined_pairs(pairs)

    def compute_gradients(self, loss, var_list, tape=None):
        # Keras 2's new optimizers call it this; the legacy ones _compute_gradients.
        return self._combined_pairs(super().compute_gradients(loss, var_list, tape=tape))

    def _combine(self, grads, variables):
        names = [f"grad.{i}" for i in range(len(grads))]
        return self._hvd.reducer(grads, variables, names)

    def _combined_pairs(self, pairs):
        pairs = [(g, v) for g, v in pairs]
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        self._hvd.combined = True
        aggregation = self._hvd.aggregation
        if aggregation is None:
            return list(zip(self._combine(grads, variables), variables))
        present = [i for i, g in enumerate(grads) if g is not None]
        used = [variables[i] for i in present]
        sums = aggregation.made_for(used)
        for s, i in zip(sums, present):
            s.assign_add(_dense(grads[i]))
        passes = aggregation.counter.assign_add(1)
        self._hvd.applies = tf.equal(passes, aggregation.passes)

        def combine_now():
            values = [s.read_value() for s in sums]
            if aggregation.average:
                values = [v / tf.cast(aggregation.passes, v.dtype) for v in values]
            combined = [tf.identity(c) for c in self._combine(values, used)]
            with tf.control_dependencies(combined):
                cleared = [s.assign(tf.zeros_like(s)) for s in sums]
            with tf.control_dependencies(cleared):
                return [tf.identity(c) for c in combined]

        def not_yet():
            return [tf.zeros_like(s) for s in sums]

        out = tf.cond(self._hvd.applies, combine_now, not_yet) if sums else []
        result = [None] * len(grads)
        for i, g in zip(present, out):
            result[i] = g
        return list(zip(result, variables))

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        """Applies gradients combined by compute_gradients (every n-th pass of local
        aggregation; the others count ``iterations`` on); gradients that did not come
        from it (a custom loop's tape) are combined here first."""
        pairs = [(g, v) for g, v in grads_and_vars]
        if not self._hvd.combined:
            pairs = self._combined_pairs(pairs)
        self._hvd.combined = False
        parent_apply = super().apply_gradients
        aggregation = self._hvd.aggregation
        if aggregation is None:
            return parent_apply(pairs, *args, **kwargs)
        self._make_variables([v for g, v in pairs if g is not None])

        def apply():
            parent_apply(pairs, *args, **kwargs)
            aggregation.counter.assign(0)
            return tf.constant(True)

        def count_only():
            self.iterations.assign_add(1)
            return tf.constant(False)

        return tf.cond(self._hvd.applies, apply, count_only)

    def _make_variables(self, variables):
        """The optimizer's own variables, made now rather than inside the branch that
        applies (variables cannot be made in a branch of a tf.function)."""
        with tf.init_scope():
            if hasattr(self, "_create_all_weights"):
                self._create_all_weights(variables)
            elif not getattr(self, "_built", True):
                self.build(variables)


def _distributed_class(base):
    cls = _CLASSES.get(base)
    if cls is None:
        cls = type(base.__name__, (_Distributed, base), {"__module__": base.__module__})
        _CLASSES[base] = cls
    return cls


def distribute(optimizer, name, compression, sparse_as_dense, op, gradient_predivide_factor,
               backward_passes_per_step, average_aggregated_gradients, groups, process_set,
               scale_local_gradients):
    """Turns ``optimizer`` itself into a distributed one (keeping its state)."""
    reducer = tensorflow_reducer(
        name or f"Distributed{type(optimizer).__name__}", compression, sparse_as_dense, op,
        gradient_predivide_factor, groups, process_set, scale_local_gradients)
    aggregation = (_Aggregation(backward_passes_per_step, average_aggregated_gradients)
                   if backward_passes_per_step > 1 else None)
    optimizer.__class__ = _distributed_class(type(optimizer))
    optimizer._hvd = _Settings(reducer, aggregation)
    return optimizer
