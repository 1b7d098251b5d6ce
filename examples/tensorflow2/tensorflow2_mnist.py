"""Horovod's TensorFlow 2 MNIST recipe (a custom loop with DistributedGradientTape) with
its import changed to hvd's.

    hvdrun -np 2 python examples/tensorflow2/tensorflow2_mnist.py
    horovodrun -np 2 -H localhost:2 python examples/tensorflow2/tensorflow2_mnist.py
    mpirun -np 2 python examples/tensorflow2/tensorflow2_mnist.py

MNIST comes through Keras (downloaded on first use); with --synthetic, or without network,
a synthetic stand-in of the same shape (see mnist_data.py). Besides the import, one call
follows Keras 3: an optimizer's ``variables`` is a property, no longer a method. Rank 0
ends with a line to compare runs by: ``final loss L``.
"""
import argparse
import os

import tensorflow as tf

import hvd.tensorflow as hvd  # was: import horovod.tensorflow as hvd
import mnist_data

parser = argparse.ArgumentParser(description="TensorFlow 2 MNIST example")
parser.add_argument("--steps", type=int, default=10000,
                    help="training steps of the whole job, divided between the ranks "
                         "(default: 10000)")
parser.add_argument("--synthetic", action="store_true",
                    help="train on the synthetic stand-in even when MNIST is available")
parser.add_argument("--synthetic-size", type=int, default=60000,
                    help="examples of the synthetic stand-in (default: 60000)")
parser.add_argument("--checkpoint-dir", default="./checkpoints",
                    help="where rank 0 saves the trained model (default: ./checkpoints)")


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
    loss = tf.losses.SparseCategoricalCrossentropy()

    # Horovod: adjust learning rate based on number of GPUs.
    opt = tf.optimizers.Adam(0.001 * hvd.size())

    checkpoint = tf.train.Checkpoint(model=mnist_model, optimizer=opt)

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            probs = mnist_model(images, training=True)
            loss_value = loss(labels, probs)

        # Horovod: add Horovod Distributed GradientTape.
        tape = hvd.DistributedGradientTape(tape)

        grads = tape.gradient(loss_value, mnist_model.trainable_variables)
        opt.apply_gradients(zip(grads, mnist_model.trainable_variables))

        # Horovod: broadcast initial variable states from rank 0 to all other processes,
        # after the first step, so that the optimizer's variables exist.
        if first_batch:
            hvd.broadcast_variables(mnist_model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables, root_rank=0)

        return loss_value

    if hvd.rank() == 0:
        print(f"training on {source}, {hvd.size()} ranks", flush=True)
    # Horovod: adjust number of steps based on number of GPUs.
    for batch, (images, labels) in enumerate(dataset.take(args.steps // hvd.size())):
        loss_value = training_step(images, labels, batch == 0)

        if batch % 10 == 0 and hvd.local_rank() == 0:
            print("Step #%d\tLoss: %.6f" % (batch, loss_value), flush=True)

    # The last step's loss, averaged over the ranks.
    final = hvd.allreduce(loss_value, name="final_loss")
    if hvd.rank() == 0:
        print(f"final loss {float(final):.6f}", flush=True)

    # Horovod: save checkpoints only on worker 0 to prevent other workers from
    # corrupting it.
    if hvd.rank() == 0:
        saved = checkpoint.save(os.path.join(args.checkpoint_dir, "ckpt"))
        print(f"checkpoint saved to {saved}", flush=True)


if __name__ == "__main__":
    train(parser.parse_args())
