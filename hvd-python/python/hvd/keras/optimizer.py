"""Horovod's DistributedOptimizer for Keras 3 (Keras 2's is in ``optimizer_keras2``): any
Keras optimizer, applying gradients combined over the ranks, on Keras's TensorFlow
backend (through ``hvd.tensorflow``, one call per step inside Keras's compiled train
step) or its torch backend (through ``hvd.torch``).

The gradients are combined where Keras applies them: in the optimizer's update step,
just before clipping, so that clipping and weight decay see the combined gradients.
``backward_passes_per_step=n`` is Keras's own gradient accumulation
(``gradient_accumulation_steps=n``): the n passes accumulate locally and the ranks
combine once, on the n-th.
"""

from hvd.common.gradients import check_groups
from hvd.common.ops import Average, Sum
from hvd.common.process_sets import global_process_set
from hvd.keras import backend, flavor, optimizer_keras2

# One distributed class per optimizer class, so that every DistributedOptimizer of a
# class is of the same type.
_CLASSES = {}


class _Settings:
    """What a distributed optimizer adds, in one plain object (an attribute TensorFlow's
    checkpointing does not track)."""

    def __init__(self, reducer, average_aggregated_gradients):
        self.reducer = reducer
        self.average_aggregated_gradients = average_aggregated_gradients
        # The variables of the gradients being applied, in their order.
        self.variables = None


class _Distributed:
    """Mixed in before the wrapped optimizer's class."""

    def register_local_var(self, var):
        """Gradients of ``var`` are not combined over the ranks (divided by the set's size
        when ``scale_local_gradients``)."""
        self._hvd.reducer.register_local(var)

    def _backend_apply_gradients(self, grads, trainable_variables):
        # Keras calls _clip_gradients from here, with the gradients in this order.
        self._hvd.variables = list(trainable_variables)
        try:
            return super()._backend_apply_gradients(grads, trainable_variables)
        finally:
            self._hvd.variables = None

    def _clip_gradients(self, grads):
        variables = self._hvd.variables
        names = [f"grad.{self._get_variable_index(v)}" for v in variables]
        grads = self._hvd.reducer(grads, variables, names)
        steps = self.gradient_accumulation_steps
        if steps and not self._hvd.average_aggregated_gradients:
            # Keras averages the accumulated passes; Horovod's default is their sum.
            grads = [None if g is None else g * steps for g in grads]
        return super()._clip_gradients(grads)


def _distributed_class(base):
    cls = _CLASSES.get(base)
    if cls is None:
        # Named and placed as the wrapped class, so a saved model names the optimizer
        # Keras knows (hvd.keras.load_model wraps it again).
        cls = type(base.__name__, (_Distributed, base), {"__module__": base.__module__})
        _CLASSES[base] = cls
    return cls


def distribute(optimizer, name, compression, sparse_as_dense, op, gradient_predivide_factor,
               average_aggregated_gradients, groups, process_set, scale_local_gradients):
    """Turns ``optimizer`` itself into a distributed one (keeping its state)."""
    reducer = backend.gradient_reducer(
        name or f"Distributed{type(optimizer).__name__}", compression, sparse_as_dense, op,
        gradient_predivide_factor, groups, process_set, scale_local_gradients)
    optimizer.__class__ = _distributed_class(type(optimizer))
    optimizer._hvd = _Settings(reducer, average_aggregated_gradients)
    return optimizer


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=None, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """A new optimizer like ``optimizer`` (a Keras optimizer, from its config) whose
    updates use the gradients combined over ``process_set``'s ranks: averaged (``op=Sum``
    sums), narrowed on the wire by ``compression`` (``hvd.Compression.fp16``, ``bf16``),
    IndexedSlices by allgather unless ``sparse_as_dense``, ``gradient_predivide_factor``
    of the averaging before the sum. ``backward_passes_per_step=n`` accumulates n
    passes locally (Keras's ``gradient_accumulation_steps``) and combines on the n-th;
    the accumulated gradient is their sum, or their mean with
    ``average_aggregated_gradients``. ``groups`` (a number, or lists of variables)
    orders the submission; every gradient of a step goes in one call whatever the
    groups. Variables given to ``register_local_var`` keep their own gradients (divided
    by the set's size when ``scale_local_gradients``). ``device_dense`` and
    ``device_sparse`` are accepted for Horovod's signature."""
    if op is not Average and op is not Sum:
        raise ValueError("op currently only supports Average and Sum")
    hvd = backend.front()
    compression = compression or hvd.Compression.none
    groups = check_groups(groups, num_groups, backend.variable_key)
    if backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be at least 1, not "
                         f"{backward_passes_per_step}")
    if flavor.LEGACY:
        return optimizer_keras2.distribute(
            type(optimizer).from_config(optimizer.get_config()), name, compression,
            sparse_as_dense, op, gradient_predivide_factor, backward_passes_per_step,
            average_aggregated_gradients, groups, process_set, scale_local_gradients)
    config = optimizer.get_config()
    if backward_passes_per_step > 1:
        accumulating = config.get("gradient_accumulation_steps")
        if accumulating and accumulating != backward_passes_per_step:
            raise ValueError(
                f"backward_passes_per_step={backward_passes_per_step} is the optimizer's "
                f"gradient accumulation, which is already {accumulating}: give one of them")
        config["gradient_accumulation_steps"] = backward_passes_per_step
    wrapped = type(optimizer).from_config(config)
    return distribute(wrapped, name, compression, sparse_as_dense, op,
                      gradient_predivide_factor, average_aggregated_gradients, groups,
                      process_set, scale_local_gradients)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=None, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average,
                                backward_passes_per_step=1,
                                average_aggregated_gradients=False, groups=None,
                                process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """A DistributedOptimizer whose ``local_layers`` (Keras layers) keep their own
    gradients (divided by the set's size when ``scale_local_gradients``)."""
    if local_layers is None:
        local_layers = []
    elif hasattr(local_layers, "trainable_weights"):
        local_layers = [local_layers]
    if not all(hasattr(layer, "trainable_weights") for layer in local_layers):
        raise ValueError("All local layers must be Keras layers (with trainable_weights)")
    distributed = DistributedOptimizer(
        optimizer, name=name, compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, groups=groups,
        process_set=process_set, scale_local_gradients=scale_local_gradients)
    for layer in local_layers:
        for var in layer.trainable_weights:
            distributed.register_local_var(var)
    return distributed
