"""``hvd.tensorflow.keras``, Horovod's name for its Keras front: the very module
``hvd.keras`` (and its ``callbacks`` and ``elastic``), so that classes are the same whichever name
imported them."""

import sys

import hvd.keras
import hvd.keras.callbacks
import hvd.keras.elastic

sys.modules[__name__ + ".callbacks"] = hvd.keras.callbacks
sys.modules[__name__ + ".elastic"] = hvd.keras.elastic
sys.modules[__name__] = hvd.keras
