"""hvd.keras on Keras 3 (its TensorFlow backend, or torch with KERAS_BACKEND=torch): a
2-rank fit whose weights are the same on every rank after every epoch and whose loss is
one process's on the combined batch; the callbacks; load_model."""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvd.keras as hvd  # noqa: E402

tf.get_logger().setLevel("ERROR")
hvd.init()
rank, size = hvd.rank(), hvd.size()
STEPS, BATCH, EPOCHS = 4, 8, 3


def say(what):
    print(f"rank {rank}: {what}", flush=True)


def model_of(seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="tanh"),
                              keras.layers.Dense(1)])
    return model


# Every step's global batch is rank 0's rows then rank 1's: [steps, rank, batch, ...].
data = np.random.default_rng(3)
x = data.normal(size=(STEPS, size, BATCH, 6)).astype(np.float32)
y = data.normal(size=(STEPS, size, BATCH, 1)).astype(np.float32)
mine_x, mine_y = x[:, rank].reshape(-1, 6), y[:, rank].reshape(-1, 1)
all_x, all_y = x.reshape(-1, 6), y.reshape(-1, 1)

# Each rank starts from different weights: the broadcast callback makes them rank 0's.
model = model_of(seed=rank)
rank0_start = hvd.broadcast_object([w.numpy() for w in model.weights]
                                   if rank == 0 else None, root_rank=0)
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.5)),
              loss="mse")

# One process on the combined batch, from rank 0's weights.
reference = model_of(seed=0)
reference.set_weights(rank0_start)
reference.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.5), loss="mse")
expected = reference.fit(all_x, all_y, batch_size=size * BATCH, epochs=EPOCHS,
                         shuffle=False, verbose=0).history["loss"]


class SameEverywhere(keras.callbacks.Callback):
    """After every epoch: the weights of every rank equal rank 0's and the reference's
    trajectory is followed (checked at the end)."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        weights = [w.numpy() for w in self.model.weights]
        for other in hvd.allgather_object(weights):
            for a, b in zip(weights, other):
                np.testing.assert_array_equal(a, b)
        self.losses.append(logs["loss"])


same = SameEverywhere()
model.fit(mine_x, mine_y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                     hvd.callbacks.MetricAverageCallback(), same])
np.testing.assert_allclose(same.losses, expected, rtol=1e-4)
for got, want in zip(model.get_weights(), reference.get_weights()):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
say(f"on Keras's {keras.backend.backend()} backend")
say("fit: weights identical on every rank after every epoch")
say(f"fit: loss equals one process's on the combined batch: {np.round(same.losses, 5).tolist()}")

# MetricAverageCallback: each rank logs its own number; after it, every rank has the mean.
averaging = hvd.callbacks.MetricAverageCallback()
logs = {"loss": float(rank + 1), "acc": 10.0 * rank}
averaging.on_epoch_end(0, logs)
assert logs == {"loss": 1.5, "acc": 5.0}, logs
say("MetricAverageCallback ok")

# The collectives on values, which give numpy arrays back.
np.testing.assert_array_equal(hvd.allgather(np.full([1, 2], rank, np.float32)),
                              [[0.0, 0.0], [1.0, 1.0]])
np.testing.assert_array_equal(hvd.broadcast(np.full([2], rank, np.float32), root_rank=1),
                              [1.0, 1.0])
np.testing.assert_array_equal(hvd.reducescatter(np.ones([2, 2], np.float32), op=hvd.Sum),
                              [[2.0, 2.0]])
np.testing.assert_array_equal(hvd.allreduce(np.float32(rank + 1), op=hvd.Sum), 3.0)
say("collectives on values ok")

# LearningRateWarmupCallback: from lr / size to lr over the warmup, batch by batch.
rates = []


class Record(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))


warm = model_of(seed=0)
warm.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.4)), loss="mse")
warm.fit(mine_x, mine_y, batch_size=BATCH, epochs=3, shuffle=False, verbose=0,
         callbacks=[hvd.callbacks.LearningRateWarmupCallback(0.4, warmup_epochs=2),
                    Record()])
# Horovod's formula: at fractional epoch e (counted from the end of the batch),
# lr / size * (e * (size - 1) / warmup + 1); after the warmup the rate stays as set.
want = [0.4 / size * ((e + b / STEPS + 1 / STEPS) * (size - 1) / 2 + 1)
        for e in range(2) for b in range(STEPS)] + [0.4] * STEPS
np.testing.assert_allclose(rates, want, rtol=1e-6)
say("LearningRateWarmupCallback ok")

# LearningRateScheduleCallback: from start_epoch, lr * multiplier ** (epoch - start), at
# the start of every epoch.
rates.clear()
sched = model_of(seed=0)
sched.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.4)), loss="mse")
sched.fit(mine_x, mine_y, batch_size=BATCH, epochs=3, shuffle=False, verbose=0,
          callbacks=[hvd.callbacks.LearningRateScheduleCallback(0.4, 0.5, start_epoch=1),
                     Record()])
np.testing.assert_allclose(rates, [0.4] * STEPS + [0.4] * STEPS + [0.2] * STEPS, rtol=1e-6)
say("LearningRateScheduleCallback ok")

# BestModelCheckpoint: rank 0 alone writes, only when the monitored loss improves.
best = os.path.join(sys.argv[1], f"best.{rank}.keras")
checkpointing = hvd.callbacks.BestModelCheckpoint(monitor="loss", filepath=best)
checkpointing.set_model(sched)
checkpointing.on_epoch_end(0, {"loss": 2.0})
assert os.path.exists(best) == (rank == 0)
if rank == 0:
    written = os.path.getmtime(best)
    os.utime(best, (written - 100, written - 100))
    checkpointing.on_epoch_end(1, {"loss": 3.0})
    assert os.path.getmtime(best) == written - 100, "a worse model was saved"
say("BestModelCheckpoint ok")

# backward_passes_per_step: Keras's gradient accumulation, combined on the n-th pass.
accumulating = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2)
assert accumulating.gradient_accumulation_steps == 2

# load_model: the saved model's optimizer comes back distributed, its state kept.
path = os.path.join(sys.argv[1], f"model.{rank}.keras")
model.save(path)
loaded = hvd.load_model(path)
assert type(loaded.optimizer).__mro__[1].__module__ == "hvd.keras.optimizer", \
    type(loaded.optimizer).__mro__
for a, b in zip(loaded.optimizer.variables, model.optimizer.variables):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
loaded.fit(mine_x, mine_y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
           callbacks=[same])
say("load_model ok")

# Keras's XLA is refused when the step is traced, with what to set.
if keras.backend.backend() == "tensorflow":
    xla = model_of(seed=0)
    xla.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse",
                jit_compile=True)
    try:
        xla.fit(mine_x, mine_y, batch_size=BATCH, epochs=1, verbose=0)
        raise AssertionError("jit_compile=True was not refused")
    except ValueError as e:
        assert "cannot run inside an XLA-compiled function" in str(e), e
        assert "model.compile(..., jit_compile=False)" in str(e), e
    say("Keras's XLA refused")

# Other backends are refused with what to set.
from hvd.keras import backend  # noqa: E402

assert backend.refusal("jax") == (
    "hvd.keras runs on Keras's tensorflow and torch backends; this Keras runs on jax, for "
    "which hvd has no front. Set KERAS_BACKEND=tensorflow or KERAS_BACKEND=torch before "
    "Keras is imported."), backend.refusal("jax")
say("keras ok")
