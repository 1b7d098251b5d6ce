"""hvd.keras on Keras 2 (tf_keras), chosen by TF_USE_LEGACY_KERAS=1 as TensorFlow chooses
tf.keras: Keras 2 code (a legacy optimizer with lr=, compile(experimental_run_tf_function=
False), optimizer.variables()) trains with DistributedOptimizer and Horovod's callbacks
to the same weights on every rank; local aggregation applies every n-th pass; elastic
state and SyncBatchNormalization work on Keras 2's classes."""
import numpy as np
import tensorflow as tf

from hvd.keras import flavor
import hvd.tensorflow.keras as hvd

hvd.init()
rank = hvd.rank()
keras = tf.keras
assert flavor.LEGACY and keras.__name__.startswith("tf_keras"), keras.__name__


def say(line):
    print(f"rank {rank}: {line}", flush=True)


def same_on_every_rank(weights):
    for w in weights:
        gathered = hvd.allgather(w[np.newaxis])
        assert np.allclose(gathered[0], gathered[1]), gathered


rng = np.random.default_rng(rank)
x = rng.normal(size=(32, 4)).astype(np.float32)
y = x @ np.arange(4, dtype=np.float32).reshape(4, 1)
model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,),
                                             kernel_initializer=keras.initializers.Constant(rank))])
optimizer = hvd.DistributedOptimizer(keras.optimizers.legacy.SGD(lr=0.05))
model.compile(loss=keras.losses.mean_squared_error, optimizer=optimizer,
              experimental_run_tf_function=False)
history = model.fit(x, y, batch_size=8, epochs=2, verbose=0,
                    callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()])
same_on_every_rank(model.get_weights() + [v.numpy() for v in optimizer.variables()])
losses = hvd.allgather(np.array(history.history["loss"])[np.newaxis])
assert np.allclose(losses[0], losses[1]), losses
say("Keras 2 fit: weights and averaged loss identical on every rank")

# Every second pass applies the mean of the two passes' gradients combined over the
# ranks (rank + 1 each, so 1.5), and iterations counts every pass.
weight = tf.Variable([0.0])
aggregating = hvd.DistributedOptimizer(keras.optimizers.SGD(learning_rate=1.0),
                                       backward_passes_per_step=2,
                                       average_aggregated_gradients=True)


@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(weight * float(rank + 1))
    aggregating.minimize(loss, [weight], tape=tape)


seen = []
for _ in range(4):
    step()
    seen.append(float(weight.numpy()[0]))
assert seen == [0.0, -1.5, -1.5, -3.0], seen
assert int(aggregating.iterations.numpy()) == 4
say("Keras 2 local aggregation ok")

state = hvd.elastic.KerasState(model, optimizer, epoch=rank)
state.sync()
model.set_weights([np.full([4, 1], 9.0, np.float32), np.zeros([1], np.float32)])
state.restore()
same_on_every_rank(model.get_weights())
assert state.epoch == 0
from hvd.tensorflow import SyncBatchNormalization  # noqa: E402

layer = SyncBatchNormalization(fused=False)
batch = tf.constant(rng.normal(size=(4, 3)), tf.float32)
out = layer(batch, training=True)
whole = hvd.allgather(batch)
mean, variance = tf.nn.moments(whole, axes=[0])
expected = (batch - mean) / tf.sqrt(variance + layer.epsilon)
assert np.allclose(out.numpy(), expected.numpy(), atol=1e-4), (out, expected)
say("Keras 2 elastic state and SyncBatchNormalization ok")
