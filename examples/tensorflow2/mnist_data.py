"""MNIST for the TensorFlow examples: Keras's copy (downloaded on first use), or with
--synthetic, or when it cannot be had (no network), a synthetic stand-in of the same
shape, built alike on every rank."""
import numpy as np
import tensorflow as tf


def synthetic_mnist(size, seed=0x5eed):
    """``size`` 28x28 uint8 images of ten classes and their labels: each class is a fixed
    template of three bright bars, shifted by up to 2 pixels each way, with noise."""
    rng = np.random.default_rng(seed)
    templates = np.zeros((10, 28, 28), np.float32)
    for c in range(10):
        for _ in range(3):
            row, col = rng.integers(6, 20, size=2)
            if rng.integers(2):
                templates[c, row:row + 3, 6:22] = 1.0
            else:
                templates[c, 6:22, col:col + 3] = 1.0
    labels = rng.integers(0, 10, size=size)
    shifts = rng.integers(-2, 3, size=(size, 2))
    images = np.stack([np.roll(templates[c], tuple(s), axis=(0, 1))
                       for c, s in zip(labels, shifts)])
    images = np.clip(images * rng.uniform(0.5, 1.0, (size, 1, 1))
                     + rng.normal(0.0, 0.3, images.shape), 0.0, 1.0)
    return (images * 255).astype(np.uint8), labels.astype(np.uint8)


def load(rank, synthetic, synthetic_size=60000):
    """(images, labels) of the training set, and where they came from."""
    if not synthetic:
        try:
            (images, labels), _ = tf.keras.datasets.mnist.load_data(path=f"mnist-{rank}.npz")
            return images, labels, "MNIST"
        except Exception as e:  # no network and no cached copy
            print(f"MNIST is not available ({e}); training on synthetic data", flush=True)
    images, labels = synthetic_mnist(synthetic_size)
    return images, labels, "synthetic MNIST"


def dataset(rank, synthetic, synthetic_size=60000, batch_size=128):
    """Horovod's input pipeline: scaled images with a channel axis, repeated, shuffled,
    batched. It seeds Python, NumPy, TensorFlow and Keras by rank first, so that every
    rank shuffles differently, as in Horovod's recipe, yet a run is reproducible: the
    model built next starts alike, and every launcher trains the same."""
    tf.keras.utils.set_random_seed(rank)
    images, labels, source = load(rank, synthetic, synthetic_size)
    data = tf.data.Dataset.from_tensor_slices(
        (tf.cast(images[..., tf.newaxis] / 255.0, tf.float32), tf.cast(labels, tf.int64)))
    return data.repeat().shuffle(10000).batch(batch_size), source


def model():
    """Horovod's MNIST CNN."""
    return tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)),
        tf.keras.layers.Conv2D(32, [3, 3], activation="relu"),
        tf.keras.layers.Conv2D(64, [3, 3], activation="relu"),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Dropout(0.25),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(10, activation="softmax"),
    ])
