"""Broadcasting variables and Python objects, as horovod.tensorflow's functions. Roots
are global ranks (``hvd.rank()``), also within a process set."""

import tensorflow as tf

from hvd.common import objects
from hvd.common.process_sets import global_process_set
from hvd.tensorflow.mpi_ops import broadcast_


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Overwrites every variable of the list (``tf.Variable`` or Keras variables) with
    ``root_rank``'s value, as one call: after building a model, or after restoring a
    checkpoint on the root. Works in eager mode and inside ``tf.function``.
    ``inplace`` is accepted for Horovod's signature (variables are assigned either way).
    """
    assigned = broadcast_(variables, root_rank, process_set=process_set)
    if tf.executing_eagerly() or tf.compat.v1.get_default_graph().building_function:
        return None
    # A TensorFlow 1 graph: the op that assigns the root's values, run by the caller.
    return tf.group(*assigned)


def broadcast_global_variables(root_rank):
    """TensorFlow 1 graphs: the op that overwrites every global variable with
    ``root_rank``'s value. Eager code has no global variables: it broadcasts its model's
    and optimizer's variables with :func:`broadcast_variables`."""
    if tf.executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution: there are "
            "no global variables. Use hvd.broadcast_variables(<model and optimizer "
            "variables>) instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """``root_rank``'s ``obj`` (any picklable object) on every member of the set
    (eager: called from Python, not inside ``tf.function``). ``session`` is TF1's and is
    ignored."""
    return objects.broadcast_object(obj, root_rank, name, process_set)


def broadcast_object_fn(root_rank=0, session=None, name=None,
                        process_set=global_process_set):
    """A function that broadcasts its argument from ``root_rank``, as Horovod's."""
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every member's ``obj`` (any picklable object), as a list in rank order."""
    return objects.allgather_object(obj, name, process_set)
