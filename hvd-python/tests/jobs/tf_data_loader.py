"""hvd.tensorflow.data.DataLoader over hvd's native loader: every sample once per epoch
across the ranks, whether iterated eagerly, through its tf.data.Dataset in a
tf.function training loop, or by Keras' fit; tensors of the loader's own buffers (no
copy, eagerly and through tf.data); a rollback to a committed place."""
import ctypes

import tensorflow as tf

tf.get_logger().setLevel("ERROR")

import keras  # noqa: E402

import hvd.tensorflow as hvd  # noqa: E402

hvd.init()
rank, size = hvd.rank(), hvd.size()
SAMPLES, BATCH, SIDE, CLASSES = 42, 4, 16, 3
SYNTHETIC = (SAMPLES, 24, 20, CLASSES)
STEPS = -(-SAMPLES // (BATCH * size))

get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
get_pointer.restype = ctypes.c_void_p
get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def data_pointer(capsule):
    """The address of a DLPack capsule's data (the first field of its tensor)."""
    return ctypes.c_void_p.from_address(get_pointer(capsule, b"dltensor")).value


def tensor_pointer(tensor):
    return data_pointer(tf.experimental.dlpack.to_dlpack(tensor))


class Recording(hvd.data.DataLoader):
    """The loader, noting each batch's buffer and samples as the native side hands them
    over, whoever iterates it (this loop, tf.data's threads, Keras)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.buffers, self.seen = set(), []

    def _capsules(self):
        for images, labels in super()._capsules():
            self.buffers.add(data_pointer(images))
            self.seen += self.indices
            yield images, labels

    def take_seen(self):
        seen, self.seen = self.seen, []
        return seen


def once_each(seen, what):
    everyone = sum(hvd.allgather_object(seen), [])
    assert sorted(everyone) == list(range(SAMPLES)), (what, sorted(everyone))
    return everyone


loader = Recording(synthetic=SYNTHETIC, image_size=SIDE, batch_size=BATCH, threads=2,
                   prefetch=2, shuffle_seed=7)
assert len(loader) == STEPS, (len(loader), STEPS)

# Eagerly: TensorFlow tensors at the loader's own addresses.
orders = []
loader.set_epoch(0)
for images, labels in loader:
    assert images.dtype == tf.float32 and labels.dtype == tf.int64
    assert images.shape[1:] == (3, SIDE, SIDE) and images.shape[0] == labels.shape[0]
    assert tensor_pointer(images) in loader.buffers, "the images were copied"
    # A kernel over the whole batch: TensorFlow aborts on memory off its alignment.
    assert bool(tf.reduce_all(tf.math.is_finite(images)))
    assert bool(tf.reduce_all((labels >= 0) & (labels < CLASSES)))
orders.append(once_each(loader.take_seen(), "eager"))

# Through tf.data: what comes out of the dataset is still the loader's memory.
loader.set_epoch(1)
batches = 0
for images, labels in loader.dataset():
    assert images.shape[1:] == (3, SIDE, SIDE), images.shape
    assert tensor_pointer(images) in loader.buffers, "tf.data copied the images"
    assert tensor_pointer(labels) != tensor_pointer(images)
    batches += 1
assert batches == STEPS, (batches, STEPS)
orders.append(once_each(loader.take_seen(), "tf.data"))
assert orders[0] != orders[1], "each epoch has its own shuffle"

# A tf.function step with DistributedGradientTape over the channels-last dataset.
tf.random.set_seed(0)
model = keras.Sequential([keras.Input((SIDE, SIDE, 3)),
                          keras.layers.Conv2D(4, 3, activation="relu"),
                          keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(CLASSES)])
optimizer = keras.optimizers.SGD(0.01)
lossf = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def step(images, labels):
    with tf.GradientTape() as tape:
        loss = lossf(labels, model(images, training=True))
    tape = hvd.DistributedGradientTape(tape)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    return loss


hvd.broadcast_variables(model.variables, root_rank=0)
loader.set_epoch(2)
for images, labels in loader.dataset(channels_last=True):
    assert images.shape[1:] == (SIDE, SIDE, 3), images.shape
    assert bool(tf.math.is_finite(step(images, labels)))
orders.append(once_each(loader.take_seen(), "tf.function"))

# Keras' fit, the epoch moved on by a callback: each of its epochs sees every sample once.
per_epoch = []
model.compile(optimizer=keras.optimizers.SGD(0.01), loss=lossf)
history = model.fit(loader.dataset(channels_last=True), epochs=2, verbose=0, callbacks=[
    keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: loader.set_epoch(10 + epoch),
        on_epoch_end=lambda epoch, logs: per_epoch.append(loader.take_seen()))])
assert len(per_epoch) == 2 and len(history.history["loss"]) == 2, history.history
orders += [once_each(seen, "fit") for seen in per_epoch]
assert orders[-1] != orders[-2], "fit's epochs have their own shuffles"

# A loader left to tune itself under fit: the ranks exchange their needs as each of
# tf.data's iterations starts (Keras may leave one before its end), and every epoch
# still sees every sample once.
tuned = Recording(synthetic=SYNTHETIC, image_size=SIDE, batch_size=BATCH, shuffle_seed=3)
per_epoch = []
history = model.fit(tuned.dataset(channels_last=True), epochs=3, verbose=0, callbacks=[
    keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: tuned.set_epoch(epoch),
        on_epoch_end=lambda epoch, logs: per_epoch.append(tuned.take_seen()))])
assert len(history.history["loss"]) == 3, history.history
for seen in per_epoch:
    once_each(seen, "fit, tuned")
assert tuned.tuning is not None and tuned.tuning["threads"] >= 1, tuned.tuning

# Every batch came from the loader's few buffers: threads + prefetch, and one more for a
# batch still held when the next epoch started.
assert len(loader.buffers) <= 2 + 2 + 1, loader.buffers

# A rollback to a commit: a new loader goes on with exactly the batches after it.
loader.set_epoch(5)
after_commit, committed = [], None
for number, _ in enumerate(loader):
    if number == 1:
        committed = loader.state_dict()
    elif number > 1:
        after_commit.append(list(loader.indices))
assert committed == {"epoch": 5, "consumed": 2 * BATCH * size}, committed
again = Recording(synthetic=SYNTHETIC, image_size=SIDE, batch_size=BATCH, threads=1,
                  shuffle_seed=7)
again.load_state_dict(committed)
assert sum(1 for _ in again.dataset()) == len(after_commit)
assert again.seen == sum(after_commit, []), (again.seen, after_commit)
print(f"rank {rank}: tf data loader ok", flush=True)
