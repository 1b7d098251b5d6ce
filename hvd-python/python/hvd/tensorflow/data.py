"""The input side of training with hvd under TensorFlow: ``instrument(dataset)`` times
a ``tf.data.Dataset`` iterated eagerly (``for x, y in hvd.data.instrument(dataset)``)
step by step and says, at the end of each epoch, how much of it the job lost waiting
for some rank's data, and which rank (``hvd.common.data_stall``). Keras' ``fit`` iterates
the dataset inside its own graph, out of the wrapper's sight: instrument a custom loop.
"""

from hvd.common.data_stall import Instrumented, instrument  # noqa: F401
