"""Elastic training for TensorFlow 2, as ``horovod.tensorflow.elastic``: ``run`` (see
``hvd.common.elastic``), ``TensorFlowState`` (variables and plain values) and
``TensorFlowKerasState`` (a Keras model and its optimizer, and plain values). States
are kept in eager mode: TensorFlow 2 code commits between steps, outside
``tf.function``."""

import tensorflow as tf

from hvd.common.elastic import HostsUpdatedInterrupt, ObjectState, State, run  # noqa: F401
from hvd.common.variables_state import VariablesState
from hvd.tensorflow.functions import broadcast_object, broadcast_variables


def _eager(what):
    if not tf.executing_eagerly():
        raise RuntimeError(
            f"hvd.elastic.{what} keeps its state in eager mode (TensorFlow 2): create, "
            "commit and restore it outside tf.function and TensorFlow 1 graphs")


def _variables_state(variables, **kwargs):
    return dict(variables=variables, to_numpy=lambda v: v.numpy(),
                broadcast=broadcast_variables, bcast_object=broadcast_object, **kwargs)


class TensorFlowState(VariablesState):
    """The state of a TensorFlow 2 job: ``variables`` (default: none) and any keyword
    arguments as plain values (``state.epoch``). ``session`` is TensorFlow 1's and is
    refused."""

    def __init__(self, variables=None, session=None, **kwargs):
        _eager("TensorFlowState")
        if session is not None:
            raise ValueError("hvd.elastic.TensorFlowState: TensorFlow 1 sessions are not "
                             "supported; keep the state in eager mode")
        self.variables = list(variables or [])
        super().__init__(**_variables_state(lambda: self.variables, **kwargs))


def _optimizer_variables(optimizer):
    """A Keras optimizer's variables: a property in Keras 3, a method in Keras 2."""
    if optimizer is None:
        return []
    found = optimizer.variables
    return list(found() if callable(found) else found)


class TensorFlowKerasState(VariablesState):
    """The state of a Keras job: ``model``'s variables, ``optimizer``'s (default: the
    model's) once it has made them, and any keyword arguments as plain values.
    ``backend`` is Horovod's (a Keras backend module) and is not needed."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        _eager("TensorFlowKerasState")
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer",
                                                                         None)
        super().__init__(**_variables_state(
            lambda: list(self.model.variables) + _optimizer_variables(self.optimizer),
            **kwargs))
