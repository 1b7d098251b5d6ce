"""What Horovod's TensorFlow users catch and call, on hvd: TensorFlow's error classes
with hvd's messages, Horovod's refusals for IndexedSlices, broadcast_global_variables,
graph names that stay equal when a gradient differs by rank, and the elastic states of
hvd.tensorflow and hvd.keras (sync, restore, commit)."""
import keras
import numpy as np
import tensorflow as tf

import hvd.keras as hvd_keras
import hvd.tensorflow as hvd
from hvd.tensorflow.util import _executing_eagerly

hvd.init()
rank = hvd.rank()


def say(line):
    print(f"rank {rank}: {line}", flush=True)


assert _executing_eagerly() and hvd._executing_eagerly()

# Ranks that disagree: TensorFlow's FailedPreconditionError, which is still hvd's
# MismatchError, with hvd's message.
try:
    hvd.allreduce(tf.ones([rank + 2]), name="api.shape")
    raise AssertionError("mismatched shapes were not refused")
except tf.errors.FailedPreconditionError as e:
    assert isinstance(e, hvd.MismatchError), type(e)
    assert e.message == ("Mismatched shapes for tensor 'api.shape': rank 0 has [2], rank 1 "
                         "has [3]"), e.message
# alltoall without splits of rows that do not divide: InvalidArgumentError, a ValueError.
try:
    hvd.alltoall(tf.ones([3, 2]), name="api.uneven")
    raise AssertionError("uneven rows were not refused")
except tf.errors.InvalidArgumentError as e:
    assert isinstance(e, ValueError), type(e)
    assert e.message == ("alltoall of tensor 'api.uneven': the first dimension (3) does not "
                         "divide evenly between 2 ranks; pass splits (the rows for each "
                         "rank)"), e.message
# The same in a TensorFlow 1 graph, where hvd's status op raises the class, whether the
# failed collective is fetched alone or with one that depends on it.
graph = tf.Graph()
with graph.as_default():
    first = hvd.allreduce(tf.ones([rank + 2]), name="api.graph_shape")
    with tf.control_dependencies([first]):
        second = hvd.allgather(tf.ones([1, 2]), name="api.graph_after")
    with tf.compat.v1.Session(graph=graph) as session:
        for fetches in (first, [first, second]):
            try:
                session.run(fetches)
                raise AssertionError("mismatched shapes were not refused in a graph")
            except tf.errors.FailedPreconditionError as e:
                assert ("Mismatched shapes for tensor 'api.graph_shape': rank 0 has [2], "
                        "rank 1 has [3]") in e.message, e.message
hvd.barrier()
say("TensorFlow's error classes ok")

slices = tf.IndexedSlices(tf.ones([1, 3]), tf.constant([rank]))
for call, text in (
        (lambda: hvd.allreduce(slices, op=hvd.Max), "Only Sum and Average ops are supported "
                                                    "with tf.IndexedSlices"),
        (lambda: hvd.allreduce(slices, op=hvd.Sum, prescale_factor=0.5),
         "Pre/postscaling is not supported with tf.IndexedSlices"),
        (lambda: hvd.grouped_allreduce([tf.IndexedSlices([tf.ones([1, 3])] * 2,
                                                         tf.constant([rank]))],
                                       op=hvd.Product),
         "Only Sum and Average ops are supported with tf.IndexedSlices")):
    try:
        call()
        raise AssertionError(f"not refused: {text}")
    except NotImplementedError as e:
        assert str(e) == text, e
say("IndexedSlices refusals ok")

try:
    hvd.broadcast_global_variables(0)
    raise AssertionError("broadcast_global_variables ran in eager mode")
except RuntimeError as e:
    assert "does not support eager execution" in str(e), e
graph = tf.Graph()
with graph.as_default():
    variable = tf.compat.v1.Variable(float(rank + 1))
    # A gradient that differs by rank (the root's is kept, the others' zeroed), then a
    # collective named after a tensor made after it: the names must still match.
    x = tf.ones([3]) * float(rank)
    grad = tf.gradients(hvd.broadcast(x, 1), x, tf.ones([3]))[0]
    later = hvd.allreduce(tf.ones([2]) * 2.0, op=hvd.Sum)
    bcast = hvd.broadcast_global_variables(0)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(bcast)
        assert session.run(variable) == 1.0
        g, total = session.run([grad, later])
        assert np.array_equal(g, np.full([3], float(rank == 1))), g
        assert np.array_equal(total, [4.0, 4.0]), total
say("graph: broadcast_global_variables and names ok")

# Horovod's session hook: a monitored session's variables start as the root's.
graph = tf.Graph()
with graph.as_default():
    variable = tf.compat.v1.Variable(float(rank + 1))
    step = tf.compat.v1.train.get_or_create_global_step()
    hooks = [hvd.BroadcastGlobalVariablesHook(0)]
    with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as session:
        assert session.run(variable) == 1.0
say("graph: BroadcastGlobalVariablesHook ok")

# A TensorFlow 1 optimizer, combining every second pass: the ranks' gradients are
# rank + 1, so each update is their average, 1.5, and the global step counts every pass.
graph = tf.Graph()
with graph.as_default():
    weight = tf.compat.v1.Variable([0.0])
    step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                         backward_passes_per_step=2,
                                         average_aggregated_gradients=True)
    train = optimizer.minimize(tf.reduce_sum(weight * float(rank + 1)), global_step=step)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run([tf.compat.v1.global_variables_initializer(),
                     tf.compat.v1.local_variables_initializer()])
        seen = []
        for _ in range(4):
            session.run(train)
            seen.append(float(session.run(weight)[0]))
        assert seen == [0.0, -1.5, -1.5, -3.0], seen
        assert session.run(step) == 4
say("TensorFlow 1 DistributedOptimizer ok")

# Elastic states: sync brings the root's values, restore goes back to the last sync or
# commit, commit keeps what is there.
variables = [tf.Variable(np.full([2], float(rank + 1)))]
state = hvd.elastic.TensorFlowState(variables, batch=20 + rank)
state.sync()
assert np.array_equal(variables[0].numpy(), [1.0, 1.0]) and state.batch == 20
variables[0].assign([5.0, 6.0])
state.batch = 21
state.restore()
assert np.array_equal(variables[0].numpy(), [1.0, 1.0]) and state.batch == 20
variables[0].assign([5.0, 6.0])
state.batch = 21
state.commit()
state.restore()
assert np.array_equal(variables[0].numpy(), [5.0, 6.0]) and state.batch == 21

model = keras.Sequential([keras.Input([2]), keras.layers.Dense(1)])
model.set_weights([np.full([2, 1], float(rank + 1)), np.zeros([1])])
optimizer = keras.optimizers.SGD(0.1)
optimizer.build(model.trainable_variables)
kstate = hvd_keras.elastic.KerasState(model, optimizer, epoch=rank)
kstate.sync()
assert np.array_equal(model.get_weights()[0], np.ones([2, 1])) and kstate.epoch == 0
model.set_weights([np.full([2, 1], 7.0), np.zeros([1])])
kstate.restore()
assert np.array_equal(model.get_weights()[0], np.ones([2, 1]))
callbacks = [hvd_keras.elastic.UpdateEpochStateCallback(kstate),
             hvd_keras.elastic.UpdateBatchStateCallback(kstate),
             hvd_keras.elastic.CommitStateCallback(kstate, batches_per_commit=2)]
kstate.batch = 0
model.compile(optimizer=optimizer, loss="mse")
model.fit(np.ones([8, 2]), np.ones([8, 1]), batch_size=2, epochs=2, verbose=0,
          callbacks=callbacks)
assert kstate.epoch == 2 and kstate.batch == 0, (kstate.epoch, kstate.batch)
say("elastic states ok")
