"""hvd's errors as TensorFlow's error classes, with hvd's messages: ranks that disagree
about a tensor raise ``tf.errors.FailedPreconditionError`` and an invalid argument
``tf.errors.InvalidArgumentError``, as Horovod's TensorFlow ops do, so code that catches
TensorFlow's classes catches them. Each is also still hvd's class (``MismatchError``,
``ValueError``), for code that catches those."""

import tensorflow as tf

from hvd import _hvd


class MismatchError(tf.errors.FailedPreconditionError, _hvd.MismatchError):
    """Ranks disagreed about a tensor (dtype, shape, op, root) or a control call."""

    def __init__(self, message):
        tf.errors.FailedPreconditionError.__init__(self, None, None, message)

    def __reduce__(self):
        return type(self), (self.message,)


class InvalidArgumentError(tf.errors.InvalidArgumentError, ValueError):
    """A call hvd refuses before it starts (a shape, splits, a root that cannot be)."""

    def __init__(self, message):
        tf.errors.InvalidArgumentError.__init__(self, None, None, message)

    def __reduce__(self):
        return type(self), (self.message,)


def as_tensorflow(error):
    """``error`` as the TensorFlow class it stands for, or ``error`` itself."""
    if isinstance(error, (MismatchError, InvalidArgumentError)):
        return error
    if isinstance(error, _hvd.MismatchError):
        converted = MismatchError(str(error))
    elif type(error) is ValueError:
        converted = InvalidArgumentError(str(error))
    else:
        return error
    converted.recoverable = getattr(error, "recoverable", False)
    return converted
