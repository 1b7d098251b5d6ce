"""A Keras MLP or CNN trained with hvd.keras or with TensorFlow's own
MultiWorkerMirroredStrategy, on the same job: synthetic MNIST-shaped data (mnist_data.py),
each rank its strided shard in order, the same seeds, SGD lr 0.1, global batch 64 split
between the ranks, one thread per rank, no XLA; only the gradient exchange differs.

    hvdrun -np 2 python examples/tensorflow2/bench_keras.py --strategy hvd --model mlp
    python examples/tensorflow2/bench_keras.py --strategy mwms --np 2 --model mlp

With ``--strategy mwms`` the script starts ``--np`` workers of itself on localhost (TF_CONFIG
with free ports) and relays the chief's output. Prints one line per epoch and, on rank 0,
a final JSON line like bench-torch's: {"peer", "model", "world", "examples_per_s", "loss"}.
"""
import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

# One thread per rank, set before TensorFlow starts its pools.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import mnist_data  # noqa: E402

# How long the MultiWorkerMirroredStrategy workers may run before they are killed.
WORKER_TIMEOUT = 1800

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)


def build(kind):
    layers = tf.keras.layers
    if kind == "mlp":
        body = [layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(10)]
    else:
        body = [layers.Conv2D(16, 5, activation="relu"), layers.MaxPooling2D(2),
                layers.Conv2D(32, 5, activation="relu"), layers.MaxPooling2D(2),
                layers.Flatten(), layers.Dense(10)]
    return tf.keras.Sequential([tf.keras.Input((28, 28, 1)), *body])


def shard(args, rank, world):
    """This rank's strided share of the data, in order, batched by its part of the
    global batch; and the steps of an epoch."""
    images, labels = mnist_data.synthetic_mnist(args.examples)
    x = (images[rank::world, ..., np.newaxis] / 255.0).astype(np.float32)
    y = labels[rank::world].astype(np.int64)
    local = args.batch // world
    steps = len(x) // local
    data = tf.data.Dataset.from_tensor_slices((x, y)).take(steps * local).batch(local)
    return data.repeat().prefetch(2), steps


class Clock(tf.keras.callbacks.Callback):
    """Each epoch's wall time (every step synchronises the ranks already)."""

    def __init__(self):
        super().__init__()
        self.times = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.times.append(time.perf_counter() - self.start)


def train(args, rank, world, scope, optimizer, distribute, callbacks):
    data, steps = shard(args, rank, world)
    tf.keras.utils.set_random_seed(1)
    with scope:
        model = build(args.model)
        model.compile(optimizer=optimizer(tf.keras.optimizers.SGD(0.1)),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=False)
    clock = Clock()
    history = model.fit(distribute(data), epochs=args.epochs, steps_per_epoch=steps,
                        verbose=0, shuffle=False, callbacks=[*callbacks, clock])
    rates = [round(steps * args.batch / t) for t in clock.times]
    losses = [round(float(v), 4) for v in history.history["loss"]]
    if rank == 0:
        for ep, (rate, loss) in enumerate(zip(rates, losses)):
            print(f"epoch {ep + 1}/{args.epochs}  loss {loss:.4f}  {rate} examples/s on "
                  f"{world} ranks", flush=True)
        print(json.dumps({"peer": args.peer, "model": args.model, "world": world,
                          "examples_per_s": rates, "loss": losses}), flush=True)


def with_hvd(args):
    import hvd.keras as hvd

    hvd.init()
    train(args, hvd.rank(), hvd.size(), contextlib.nullcontext(), hvd.DistributedOptimizer,
          lambda data: data, [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                              hvd.callbacks.MetricAverageCallback()])


class KerasMultiWorker(tf.distribute.MultiWorkerMirroredStrategy):
    """MultiWorkerMirroredStrategy as Keras 3.15's fit can use it. fit reduces one batch
    of (images, labels) with ``reduce("MEAN", batch)`` before the first step to learn
    its shapes, which fails on a tuple of per-replica values (this worker's own part has
    the shapes); and it averages each step's metrics with ``reduce("MEAN", v, axis=0)``,
    which fails on scalars (their average over the workers is what it means)."""

    def reduce(self, reduce_op, value, axis):
        if isinstance(value, (tuple, list, dict)):
            return tf.nest.map_structure(lambda v: self.experimental_local_results(v)[0],
                                         value)
        if axis is not None and self.experimental_local_results(value)[0].shape.rank == 0:
            axis = None
        return super().reduce(reduce_op, value, axis)


def with_mwms(args):
    strategy = KerasMultiWorker()

    # Each worker feeds its own shard, as under hvd: the strategy does not shard, and
    # the shard's batches, joined into batches of the global size, are split back by the
    # strategy into this worker's part of each step.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF

    def distribute(data):
        return data.rebatch(args.batch).with_options(options)

    train(args, strategy.cluster_resolver.task_id, strategy.num_replicas_in_sync,
          strategy.scope(), lambda opt: opt, distribute, [])


def launch_workers(args):
    """``--np`` workers of this script with TF_CONFIG on free localhost ports; the
    chief's output is relayed, the others' only when they fail."""
    ports = []
    for _ in range(args.np):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    workers = [f"127.0.0.1:{port}" for port in ports]
    procs = []
    logs = [tempfile.TemporaryFile(mode="w+") for _ in range(args.np)]
    for index in range(args.np):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        procs.append(subprocess.Popen(
            [sys.executable, *sys.argv],
            env={**os.environ, "TF_CONFIG": json.dumps(config)},
            # Not a pipe, which a chatty worker could fill while nobody reads it.
            stdout=None if index == 0 else logs[index],
            stderr=None if index == 0 else subprocess.STDOUT))
    # A worker that dies leaves the others waiting in a collective for good: once one
    # fails, or after WORKER_TIMEOUT seconds, the rest are killed.
    deadline = time.monotonic() + WORKER_TIMEOUT
    while any(p.poll() is None for p in procs):
        if any(p.returncode not in (None, 0) for p in procs) or time.monotonic() > deadline:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
            break
        time.sleep(0.2)
    failed = 0
    for index, proc in enumerate(procs):
        proc.wait()
        logs[index].seek(0)
        out = logs[index].read()
        if proc.returncode != 0:
            failed = proc.returncode
            print(f"worker {index} exited with {proc.returncode}" + (f":\n{out}" if out else ""),
                  file=sys.stderr)
    return failed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--strategy", choices=["hvd", "mwms"], required=True)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--np", type=int, default=2, help="workers of --strategy mwms")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="global batch")
    p.add_argument("--examples", type=int, default=60000)
    args = p.parse_args()
    args.peer = "hvd-keras" if args.strategy == "hvd" else "tf-mwms"
    if args.strategy == "hvd":
        with_hvd(args)
    elif "TF_CONFIG" in os.environ:
        with_mwms(args)
    else:
        sys.exit(launch_workers(args))


if __name__ == "__main__":
    main()
