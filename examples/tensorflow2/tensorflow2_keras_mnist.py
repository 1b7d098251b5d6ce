"""Horovod's Keras MNIST recipe (model.fit with DistributedOptimizer and its callbacks)
with its import changed to hvd's, on Keras 3 with its TensorFlow backend.

    hvdrun -np 2 python examples/tensorflow2/tensorflow2_keras_mnist.py
    horovodrun -np 2 -H localhost:2 python examples/tensorflow2/tensorflow2_keras_mnist.py
    mpirun -np 2 python examples/tensorflow2/tensorflow2_keras_mnist.py

MNIST comes through Keras (downloaded on first use); with --synthetic, or without network,
a synthetic stand-in of the same shape (see mnist_data.py). Besides the import, Keras 3
needs two changes: ``compile`` has no ``experimental_run_tf_function`` any more, and
ModelCheckpoint writes ``.keras`` files. Rank 0 ends with a line to compare runs by:
``final loss L accuracy A``.
"""
import argparse
import os

import tensorflow as tf

import hvd.tensorflow.keras as hvd  # was: import horovod.tensorflow.keras as hvd
import mnist_data

parser = argparse.ArgumentParser(description="Keras MNIST example")
parser.add_argument("--epochs", type=int, default=24, help="epochs (default: 24)")
parser.add_argument("--steps-per-epoch", type=int, default=500,
                    help="steps per epoch of the whole job, divided between the ranks "
                         "(default: 500)")
parser.add_argument("--synthetic", action="store_true",
                    help="train on the synthetic stand-in even when MNIST is available")
parser.add_argument("--synthetic-size", type=int, default=60000,
                    help="examples of the synthetic stand-in (default: 60000)")
parser.add_argument("--checkpoint-dir", default=".",
                    help="where rank 0 saves a checkpoint every epoch (default: .)")


def train(args):
    # Horovod: initialize Horovod.
    hvd.init()

    # Horovod: pin GPU to be used to process local rank (one GPU per process)
    gpus = tf.config.experimental.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")

    dataset, source = mnist_data.dataset(hvd.rank(), args.synthetic, args.synthetic_size)
    mnist_model = mnist_data.model()

    # Horovod: adjust learning rate based on number of GPUs.
    scaled_lr = 0.001 * hvd.size()
    opt = tf.optimizers.Adam(scaled_lr)

    # Horovod: add Horovod DistributedOptimizer.
    opt = hvd.DistributedOptimizer(
        opt, backward_passes_per_step=1, average_aggregated_gradients=True)

    mnist_model.compile(loss=tf.losses.SparseCategoricalCrossentropy(),
                        optimizer=opt,
                        metrics=["accuracy"])

    callbacks = [
        # Horovod: broadcast initial variable states from rank 0 to all other processes.
        # This is necessary to ensure consistent initialization of all workers when
        # training is started with random weights or restored from a checkpoint.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),

        # Horovod: average metrics among workers at the end of every epoch. It must come
        # before the callbacks that read the metrics (ReduceLROnPlateau, TensorBoard).
        hvd.callbacks.MetricAverageCallback(),

        # Horovod: warm the learning rate up from 0.001 to 0.001 * size over the first
        # three epochs (https://arxiv.org/abs/1706.02677).
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=3,
                                                 verbose=1),
    ]

    # Horovod: save checkpoints only on worker 0 to prevent other workers from corrupting them.
    if hvd.rank() == 0:
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(
            os.path.join(args.checkpoint_dir, "checkpoint-{epoch}.keras")))

    # Horovod: write logs on worker 0.
    verbose = 2 if hvd.rank() == 0 else 0
    if hvd.rank() == 0:
        print(f"training on {source}, {hvd.size()} ranks", flush=True)

    # Train the model.
    # Horovod: adjust number of steps based on number of GPUs.
    history = mnist_model.fit(dataset, steps_per_epoch=args.steps_per_epoch // hvd.size(),
                              callbacks=callbacks, epochs=args.epochs, verbose=verbose)
    if hvd.rank() == 0:
        # The last epoch's loss and accuracy, averaged over the ranks.
        print(f"final loss {history.history['loss'][-1]:.6f} "
              f"accuracy {history.history['accuracy'][-1]:.6f}", flush=True)
    return mnist_model


if __name__ == "__main__":
    train(parser.parse_args())
