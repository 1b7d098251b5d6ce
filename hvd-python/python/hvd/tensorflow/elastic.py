"""Elastic training for TensorFlow 2, as ``horovod.tensorflow.elastic``: ``run`` (see
``hvd.common.elastic``), ``TensorFlowState`` (variables and plain values) and
``TensorFlowKerasState`` (a Keras model and its optimizer, and plain values). States
are kept in eager mode: TensorFlow 2 code commits between steps, outside
``tf.function``."""

import tensorflow as tf

from hvd.common.elastic import HostsUpdatedInterrupt, ObjectState, State, run  # noqa: F401
from hvd.tensorflow.functions import broadcast_object, broadcast_variables


def _eager(what):
    if not tf.executing_eagerly():
        raise RuntimeError(
            f"hvd.elastic.{what} keeps its state in eager mode (TensorFlow 2): create, "
            "commit and restore it outside tf.function and TensorFlow 1 graphs")


def _numpy(variable):
    return variable.numpy()


class _VariablesState(ObjectState):
    """Variables (given by ``variables()``, read when needed, since a Keras optimizer
    makes its own on its first step) and plain values given as keyword arguments."""

    def __init__(self, variables, **kwargs):
        self._variables = variables
        self._saved_values = None
        super().__init__(bcast_object=broadcast_object, **kwargs)
        # Until the first commit, a failure goes back to the values at the start.
        self._saved_values = [_numpy(v) for v in self._variables()]

    def save(self):
        self._saved_values = [_numpy(v) for v in self._variables()]
        super().save()

    def restore(self):
        variables = self._variables()
        if self._saved_values is not None and len(self._saved_values) == len(variables):
            for variable, value in zip(variables, self._saved_values):
                variable.assign(value)
        super().restore()

    def sync(self, root_rank=0):
        variables = self._variables()
        if variables:
            broadcast_variables(variables, root_rank)
        # What the ranks agreed on is what a failure goes back to, as for plain values.
        self._saved_values = [_numpy(v) for v in variables]
        super().sync(root_rank)


class TensorFlowState(_VariablesState):
    """The state of a TensorFlow 2 job: ``variables`` (default: none) and any keyword
    arguments as plain values (``state.epoch``). ``session`` is TensorFlow 1's and is
    refused."""

    def __init__(self, variables=None, session=None, **kwargs):
        _eager("TensorFlowState")
        if session is not None:
            raise ValueError("hvd.elastic.TensorFlowState: TensorFlow 1 sessions are not "
                             "supported; keep the state in eager mode")
        self.variables = list(variables or [])
        super().__init__(lambda: self.variables, **kwargs)


def _optimizer_variables(optimizer):
    """A Keras optimizer's variables: a property in Keras 3, a method in Keras 2."""
    if optimizer is None:
        return []
    found = optimizer.variables
    return list(found() if callable(found) else found)


class TensorFlowKerasState(_VariablesState):
    """The state of a Keras job: ``model``'s variables, ``optimizer``'s (default: the
    model's) once it has made them, and any keyword arguments as plain values.
    ``backend`` is Horovod's (a Keras backend module) and is not needed."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        _eager("TensorFlowKerasState")
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer",
                                                                         None)
        super().__init__(lambda: list(self.model.variables)
                         + _optimizer_variables(self.optimizer), **kwargs)
