"""Horovod's Keras callbacks, on any backend hvd.keras runs on."""

import numpy as np

from hvd.common.basics import rank, size
from hvd.common.process_sets import global_process_set
from hvd.keras import values
from hvd.keras.backend import broadcast_variables, variable_key
from hvd.keras.flavor import keras, optimizer_built, optimizer_variables, to_numpy


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Gives every rank ``root_rank``'s model and optimizer variables when training
    starts (before the first step, once Keras has built them), so every rank starts
    from the same state: after random initialisation, or after restoring a checkpoint
    on the root. Variables given to ``register_local_var`` (or ``local_variables``) are
    left as they are. ``device`` is accepted for Horovod's signature."""

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.broadcast_done = False
        self._optimizer_done = False
        self._local = set()
        for var in local_variables or []:
            self.register_local_var(var)

    def register_local_var(self, var):
        """Leaves ``var`` out of the broadcast."""
        self._local.add(variable_key(var))

    def _shared(self, variables):
        return [v for v in variables if variable_key(v) not in self._local]

    def _broadcast_optimizer(self):
        optimizer = self.model.optimizer
        if optimizer is not None and optimizer_built(optimizer) and not self._optimizer_done:
            broadcast_variables(self._shared(optimizer_variables(optimizer)), self.root_rank,
                                global_process_set)
            self._optimizer_done = True

    def on_train_begin(self, logs=None):
        if self.broadcast_done:
            return
        broadcast_variables(self._shared(self.model.variables), self.root_rank,
                            global_process_set)
        self._broadcast_optimizer()
        self.broadcast_done = True

    def on_train_batch_end(self, batch, logs=None):
        # An optimizer Keras builds only in the first step gets its state here.
        if not self._optimizer_done:
            self._broadcast_optimizer()


class MetricAverageCallback(keras.callbacks.Callback):
    """Replaces every metric of an epoch's logs by its average over the ranks, in one
    allreduce (in the order of their names), for the callbacks after it
    (ReduceLROnPlateau, TensorBoard, checkpoints): put it before them. ``device`` is
    accepted for Horovod's signature."""

    def __init__(self, device=""):
        super().__init__()

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        names = sorted(logs)
        averaged = values.allreduce(np.array([float(logs[n]) for n in names]),
                                    name="MetricAverageCallback")
        for name, value in zip(names, averaged):
            logs[name] = float(value)


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to ``initial_lr * multiplier(epoch)`` from ``start_epoch``
    to ``end_epoch`` (exclusive): at the start of every epoch with ``staircase``, else
    before every batch at the fractional epoch (``steps_per_epoch``, or Keras's
    ``steps``). ``multiplier`` is a function of the epoch, or a number ``m`` for
    ``m ** (epoch - start_epoch)``. With ``momentum_correction``, a change of the rate
    rescales the optimizer's velocity by new/old (Goyal et al.: SGD with momentum
    continues as if the rate had always been the new one)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None, verbose=0):
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.initial_lr = initial_lr
        self.multiplier = multiplier if callable(multiplier) else \
            (lambda epoch: multiplier ** (epoch - start_epoch))
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.current_epoch = None

    def _learning_rate(self):
        return float(to_numpy(self.model.optimizer.learning_rate))

    def _adjust(self, epoch):
        optimizer = self.model.optimizer
        old = self._learning_rate()
        new = self.initial_lr * self.multiplier(epoch)
        optimizer.learning_rate = new
        velocities = getattr(optimizer, "momentums", None)
        if self.momentum_correction and velocities and old != 0 and new != old:
            for velocity in velocities:
                velocity.assign(velocity * (new / old))

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self.params.get("steps")
            if not self.steps_per_epoch:
                raise ValueError(
                    f"Could not autodetect the number of steps per epoch. Please specify "
                    f"the steps_per_epoch parameter to the {type(self).__name__}() (Keras "
                    f"does not know it for a dataset of unknown length)")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        epoch = self.current_epoch
        if epoch < self.start_epoch or (self.end_epoch is not None
                                        and epoch >= self.end_epoch):
            return
        if self.staircase:
            if batch == 0:
                self._adjust(epoch)
        else:
            self._adjust(epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = self._learning_rate()


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Goyal et al.'s gradual warmup: from ``initial_lr / size`` to ``initial_lr`` over
    the first ``warmup_epochs``, batch by batch; with ``verbose``, rank 0 says when it
    is done."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            # Ends each epoch on a round number, as Horovod's does.
            epoch += 1.0 / self.steps_per_epoch
            return 1.0 / size() * (epoch * (size() - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch, verbose=verbose)

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and rank() == 0:
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to "
                  f"{self._learning_rate():g}.")


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Keras's ModelCheckpoint keeping only the best model (``save_best_only``), written
    by rank 0 alone. Keras 3 needs the file path (``.keras``, or ``.weights.h5`` with
    ``save_weights_only``), which Horovod's leaves to be set later: give it as
    ``filepath=``."""

    def __init__(self, monitor="val_loss", verbose=0, save_weights_only=False, mode="auto",
                 save_freq="epoch", filepath=None):
        if filepath is None:
            raise ValueError("BestModelCheckpoint needs filepath= (Keras 3's "
                             "ModelCheckpoint writes to a path it is given up front)")
        super().__init__(filepath, monitor=monitor, verbose=verbose, save_best_only=True,
                         save_weights_only=save_weights_only, mode=mode,
                         save_freq=save_freq)

    def _save_model(self, epoch, batch, logs):
        if rank() == 0:
            super()._save_model(epoch, batch, logs)
