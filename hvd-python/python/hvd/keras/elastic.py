"""Elastic training for Keras, as ``horovod.tensorflow.keras.elastic``: ``run``,
``KerasState`` (a model, its optimizer and plain values), and the callbacks that keep a
state's ``batch`` and ``epoch`` current and commit it during ``fit``."""

from hvd.common.elastic import HostsUpdatedInterrupt, ObjectState, State, run  # noqa: F401
from hvd.common.objects import broadcast_object
from hvd.common.process_sets import global_process_set
from hvd.common.variables_state import VariablesState
from hvd.keras.backend import broadcast_variables
from hvd.keras.flavor import keras, optimizer_variables, to_numpy


class KerasState(VariablesState):
    """The state of a Keras job, on any backend hvd.keras runs on: ``model``'s variables,
    ``optimizer``'s (default: the model's) once it has made them (a Keras optimizer makes
    them on its first step), and any keyword arguments as plain values (``state.epoch``,
    ``state.batch``). ``backend`` is Horovod's and is not needed."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer",
                                                                         None)
        super().__init__(
            lambda: list(self.model.variables) + optimizer_variables(self.optimizer),
            to_numpy=to_numpy,
            broadcast=lambda variables, root: broadcast_variables(variables, root,
                                                                  global_process_set),
            bcast_object=lambda obj, root: broadcast_object(obj, root),
            **kwargs)


class CommitStateCallback(keras.callbacks.Callback):
    """Commits ``state`` every ``batches_per_commit`` batches, and at the end of every
    epoch."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self._batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1
        if self._batches >= self.batches_per_commit:
            self._batches = 0
            self.state.commit()

    def on_epoch_end(self, epoch, logs=None):
        self._batches = 0
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps ``state.batch`` at the number of batches of this epoch done, and a resumed
    epoch short by the batches its last commit had done."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self._steps = None

    def on_epoch_begin(self, epoch, logs=None):
        steps = self.params.get("steps") if self.params else None
        if self.state.batch and steps:
            self._steps = steps
            self.params["steps"] = steps - self.state.batch

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        if self._steps is not None:
            self.params["steps"] = self._steps
            self._steps = None
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps ``state.epoch`` at the next epoch to run."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1
