"""Which Keras hvd.keras runs on, chosen as TensorFlow chooses its ``tf.keras``: Keras 2
(the ``tf_keras`` package) when ``TF_USE_LEGACY_KERAS`` is ``1`` or ``true``, else Keras
3 (``keras``). Code written for Keras 2 (``lr=``, ``keras.optimizers.legacy``,
``optimizer.variables()``) runs unchanged under the first, so hvd.keras has to be on the
same Keras as the model it is handed."""

import os

LEGACY = os.environ.get("TF_USE_LEGACY_KERAS", "") in ("1", "true", "True")

if LEGACY:
    try:
        import tf_keras as keras
    except ImportError as e:
        raise ImportError(
            "TF_USE_LEGACY_KERAS is set, so TensorFlow (and hvd.keras) use Keras 2, the "
            "tf_keras package, which is not installed: pip install --no-deps "
            "'tf_keras==<your TensorFlow's major.minor>.*'") from e
else:
    import keras


def to_numpy(value):
    """A Keras variable or tensor (or a number) as a numpy array."""
    if LEGACY:
        import numpy as np
        return np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    return keras.ops.convert_to_numpy(value)


def to_tensor(value):
    """A value as a tensor of Keras's backend."""
    if LEGACY:
        import tensorflow as tf
        return tf.convert_to_tensor(value)
    return keras.ops.convert_to_tensor(value)


def optimizer_variables(optimizer):
    """A Keras optimizer's variables: a property in Keras 3, a method in Keras 2."""
    if optimizer is None:
        return []
    found = optimizer.variables
    return list(found() if callable(found) else found)


def optimizer_built(optimizer):
    """Whether a Keras optimizer has made its variables (Keras 2's legacy optimizers
    make them on their first step, and say so by having them)."""
    built = getattr(optimizer, "built", None)
    if built is None:
        built = getattr(optimizer, "_built", None)
    if built is None:
        return bool(optimizer_variables(optimizer))
    return bool(built)
