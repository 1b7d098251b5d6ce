"""Loading a saved Keras model for distributed training."""

from hvd.common.ops import Average
from hvd.common.process_sets import global_process_set
from hvd.keras import optimizer_keras2
from hvd.keras.backend import front
from hvd.keras.flavor import LEGACY, keras
from hvd.keras.optimizer import distribute


def load_model(filepath, custom_optimizers=None, custom_objects=None, compression=None,
               legacy_opts=False):
    """Loads a saved Keras model (``keras.models.load_model``) and makes its optimizer a
    DistributedOptimizer, keeping the optimizer's state as saved. ``custom_optimizers``
    are optimizer classes the file names (beside ``custom_objects``); ``compression``
    narrows the gradients on the wire. ``legacy_opts`` (Keras 2's legacy optimizers) is
    refused under Keras 3, which has none."""
    if legacy_opts and not LEGACY:
        raise ValueError("legacy_opts: Keras 3 has no legacy optimizers")
    objects = dict(custom_objects or {})
    objects.update({cls.__name__: cls for cls in custom_optimizers or []})
    model = keras.models.load_model(filepath, custom_objects=objects)
    if getattr(model, "optimizer", None) is None:
        return model
    compression = compression or front().Compression.none
    if LEGACY:
        optimizer_keras2.distribute(model.optimizer, None, compression, False, Average, 1.0,
                                    1, False, None, global_process_set, True)
    else:
        distribute(model.optimizer, None, compression, False, Average, 1.0, False, None,
                   global_process_set, True)
    return model
