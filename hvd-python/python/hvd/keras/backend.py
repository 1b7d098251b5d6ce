"""The hvd front under Keras's backend: ``hvd.tensorflow`` for TensorFlow, ``hvd.torch``
for torch. JAX has no hvd front, and is refused with what to set instead."""

from hvd.keras.flavor import keras


def on_tensorflow():
    """Whether Keras computes with TensorFlow."""
    return keras.backend.backend() == "tensorflow"


def front():
    """The hvd module whose tensors Keras's backend computes with (on TensorFlow, the part
    of hvd.tensorflow that does not import hvd.keras back)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import hvd.tensorflow.keras_front
        return hvd.tensorflow.keras_front
    if backend == "torch":
        import hvd.torch
        return hvd.torch
    raise NotImplementedError(refusal(backend))


def refusal(backend):
    """Why hvd.keras cannot run on ``backend``."""
    return (f"hvd.keras runs on Keras's tensorflow and torch backends; this Keras runs on "
            f"{backend}, for which hvd has no front. Set KERAS_BACKEND=tensorflow or "
            f"KERAS_BACKEND=torch before Keras is imported.")


def compression():
    """The backend's ``Compression`` (``none``, ``fp16``, ``bf16``)."""
    return front().Compression


def variable_key(variable):
    """What identifies a Keras variable (or the framework's own) on this backend."""
    if on_tensorflow():
        from hvd.tensorflow.gradients import variable_key
        return variable_key(variable)
    return id(getattr(variable, "value", variable))


def gradient_reducer(prefix, compression, sparse_as_dense, op, gradient_predivide_factor,
                     groups, process_set, scale_local_gradients):
    """A GradientReducer of the backend's gradients (hvd.common.gradients)."""
    if on_tensorflow():
        from hvd.tensorflow.gradients import reducer
        return reducer(prefix, compression, sparse_as_dense, op, gradient_predivide_factor,
                       groups, process_set, scale_local_gradients)
    from hvd.common.gradients import GradientReducer
    hvd = front()

    def combine(values, names, op, prescale_factor, postscale_factor):
        handles, contexts = [], []
        for value, name in zip(values, names):
            wire, ctx = compression.compress(value)
            handles.append(hvd.allreduce_async(wire, name=name, op=op,
                                               prescale_factor=prescale_factor,
                                               postscale_factor=postscale_factor,
                                               process_set=process_set))
            contexts.append(ctx)
        return [compression.decompress(hvd.synchronize(h), ctx)
                for h, ctx in zip(handles, contexts)]

    return GradientReducer(prefix, combine, variable_key, lambda g, n: g / n, op,
                           gradient_predivide_factor, groups, process_set,
                           scale_local_gradients)


def broadcast_variables(variables, root_rank, process_set):
    """Overwrites the Keras variables with ``root_rank``'s values, as one call."""
    hvd = front()
    if on_tensorflow():
        hvd.broadcast_variables(variables, root_rank, process_set=process_set)
    else:
        # A Keras variable's value is its torch parameter: broadcast into it.
        hvd.broadcast_parameters([(f"keras.{i}", v.value) for i, v in enumerate(variables)],
                                 root_rank, process_set=process_set)
