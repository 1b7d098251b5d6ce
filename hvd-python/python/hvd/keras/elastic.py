"""Elastic training for Keras, as ``horovod.tensorflow.keras.elastic``: ``run``,
``KerasState`` (a model, its optimizer and plain values), and the callbacks that keep a
state's ``batch`` and ``epoch`` current and commit it during ``fit``."""

from hvd.common.elastic import HostsUpdatedInterrupt, ObjectState, State, run  # noqa: F401
from hvd.common.objects import broadcast_object
from hvd.common.process_sets import global_process_set
from hvd.keras.backend import broadcast_variables
from hvd.keras.flavor import keras, optimizer_variables, to_numpy


class KerasState(ObjectState):
    """The state of a Keras job, on any backend hvd.keras runs on: ``model``'s variables,
    ``optimizer``'s (default: the model's) once it has made them (a Keras optimizer makes
    them on its first step), and any keyword arguments as plain values (``state.epoch``,
    ``state.batch``). ``backend`` is Horovod's and is not needed."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer",
                                                                         None)
        self._saved_values = None
        super().__init__(bcast_object=lambda obj, root: broadcast_object(obj, root),
                         **kwargs)
        # Until the first commit, a failure goes back to the values at the start.
        self._saved_values = [to_numpy(v) for v in self._variables()]

    def _variables(self):
        return list(self.model.variables) + optimizer_variables(self.optimizer)

    def save(self):
        self._saved_values = [to_numpy(v) for v in self._variables()]
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
            broadcast_variables(variables, root_rank, global_process_set)
        # What the ranks agreed on is what a failure goes back to, as for plain values.
        self._saved_values = [to_numpy(v) for v in variables]
        super().sync(root_rank)


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
