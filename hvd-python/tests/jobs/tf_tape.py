"""DistributedGradientTape: the gradients of each rank's half of a batch, combined, equal
the gradients of the whole batch in one process, in eager mode and inside tf.function;
sparse gradients (IndexedSlices) too, and local sources keep their own; and
SyncBatchNormalization, whose statistics are the whole batch's."""
import numpy as np
import tensorflow as tf

import hvd.tensorflow as hvd

tf.get_logger().setLevel("ERROR")
hvd.init()
rank, size = hvd.rank(), hvd.size()


def say(what):
    print(f"rank {rank}: {what}", flush=True)


# The whole batch, the same on every rank; each rank computes on its own half.
data = np.random.default_rng(7)
x_all = tf.constant(data.normal(size=(8, 5)), tf.float32)
y_all = tf.constant(data.normal(size=(8, 3)), tf.float32)
ids_all = tf.constant([0, 3, 3, 5, 1, 5, 6, 2])
half = slice(rank * 4, rank * 4 + 4)
w = tf.Variable(data.normal(size=(5, 3)), dtype=tf.float32)
b = tf.Variable(np.zeros(3), dtype=tf.float32)
table = tf.Variable(data.normal(size=(7, 3)), dtype=tf.float32)


def loss_of(x, y, ids):
    prediction = x @ w + b + tf.gather(table, ids)
    return tf.reduce_mean((prediction - y) ** 2)


def local_grads(x, y, ids, distributed, **options):
    with tf.GradientTape() as tape:
        loss = loss_of(x, y, ids)
    if distributed:
        tape = hvd.DistributedGradientTape(tape, **options)
    return tape.gradient(loss, [w, b, table])


def dense(g):
    return tf.convert_to_tensor(g).numpy()


whole = [dense(g) for g in local_grads(x_all, y_all, ids_all, False)]
mine = (x_all[half], y_all[half], ids_all[half])
graph = tf.function(lambda x, y, ids: local_grads(x, y, ids, True))
for label, grads in [("eager", local_grads(*mine, True)), ("tf.function", graph(*mine)),
                     ("sparse_as_dense", local_grads(*mine, True, sparse_as_dense=True))]:
    assert isinstance(grads[2], tf.IndexedSlices) == (label != "sparse_as_dense"), grads[2]
    for got, want in zip(grads, whole):
        np.testing.assert_allclose(dense(got), want, rtol=1e-5, atol=1e-6)
    say(f"DistributedGradientTape ({label}) equals the whole batch's gradients")

# Sum, and a predivide factor (which must not change the average).
summed = local_grads(*mine, True, op=hvd.Sum)
np.testing.assert_allclose(dense(summed[0]), size * whole[0], rtol=1e-5, atol=1e-6)
predivided = local_grads(*mine, True, gradient_predivide_factor=2.0)
np.testing.assert_allclose(dense(predivided[0]), whole[0], rtol=1e-5, atol=1e-6)

# A local source keeps its own gradient, divided by the set's size.
with tf.GradientTape() as tape:
    loss = loss_of(*mine)
own = tape.gradient(loss, b)
with tf.GradientTape() as tape:
    loss = loss_of(*mine)
tape = hvd.DistributedGradientTape(tape)
tape.register_local_source(b)
grads = tape.gradient(loss, [w, b])
np.testing.assert_allclose(grads[0].numpy(), whole[0], rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(grads[1].numpy(), own.numpy() / size, rtol=1e-6)
say("Sum, predivide and local sources ok")

# PartialDistributedGradientTape: a local layer's weights keep this rank's gradients
# (divided by the set's size), the others are averaged.
import keras  # noqa: E402

keras.utils.set_random_seed(0)
shared_layer, local_layer = keras.layers.Dense(3), keras.layers.Dense(2)
shared_layer.build((None, 5))
local_layer.build((None, 3))


def two_layers(x):
    return tf.reduce_mean(local_layer(shared_layer(x)) ** 2)


def grads_of(x, partial):
    with tf.GradientTape() as tape:
        loss = two_layers(x)
    if partial:
        tape = hvd.PartialDistributedGradientTape(tape, local_layers=[local_layer])
    variables = shared_layer.trainable_weights + local_layer.trainable_weights
    return [g.numpy() for g in tape.gradient(loss, variables)]


whole_two = grads_of(x_all, False)
own_two = grads_of(x_all[half], False)
partial = grads_of(x_all[half], True)
for got, want in zip(partial[:2], whole_two[:2]):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
for got, own_grad in zip(partial[2:], own_two[2:]):
    np.testing.assert_allclose(got, own_grad / size, rtol=1e-5, atol=1e-7)
say("PartialDistributedGradientTape keeps the local layer's gradients")

# SyncBatchNormalization: in training, each rank's half normalised with the statistics of
# the whole batch, as one process's BatchNormalization of the whole batch would.
features = tf.constant(data.normal(2.0, 3.0, size=(8, 4)), tf.float32)
whole_bn = keras.layers.BatchNormalization()(features, training=True).numpy()
sync = hvd.SyncBatchNormalization()
np.testing.assert_allclose(sync(features[half], training=True).numpy(), whole_bn[half],
                           rtol=1e-4, atol=1e-4)
graph_bn = hvd.SyncBatchNormalization()
traced = tf.function(lambda x: graph_bn(x, training=True))
np.testing.assert_allclose(traced(features[half]).numpy(), whole_bn[half], rtol=1e-4,
                           atol=1e-4)
say("SyncBatchNormalization equals the whole batch's")
say("tape ok")
