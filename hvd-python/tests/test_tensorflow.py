"""hvd.tensorflow and hvd.keras, in multi-process jobs under hvdrun, and Horovod's two
TensorFlow 2 MNIST recipes under hvdrun, horovodrun and mpirun. Without TensorFlow these
are skipped with the command that installs it; under CI (which installs it) a missing
TensorFlow is a failure."""
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from conftest import MPIRUN_ENV, two_ranks

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tensorflow2")
# A rank that never submits an op fails it within a minute, not the default five.
STALL = {"HVD_STALL_CHECK_TIME": "20", "HVD_STALL_SHUTDOWN_TIME": "60"}


@pytest.fixture(autouse=True)
def tensorflow_installed():
    missing = [m for m in ("tensorflow", "keras") if importlib.util.find_spec(m) is None]
    if missing:
        why = (f"{' and '.join(missing)} not installed in {sys.prefix}: "
               f"pip install tensorflow-cpu")
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def assert_every_rank(out, *lines):
    for rank in (0, 1):
        for line in lines:
            assert f"rank {rank}: {line}" in out, out


def test_every_op_eager_and_in_tf_function(run_job):
    code, out = run_job("tf_ops", env=STALL)
    assert code == 0, out
    assert_every_rank(out, "every op and dtype matches, eager and in tf.function",
                      "grouped allgather and reducescatter ok", "empty tensors ok", "alltoall splits ok",
                      "compression and process sets ok", "IndexedSlices ok",
                      "gradients match the analytic values",
                      "variables, objects, join and barrier ok",
                      "TensorFlow's buffers untouched and results aligned", "XLA refused",
                      "ordering under stress ok", "mismatches named", "tf ops ok")


def test_differently_named_ops_fail_on_every_rank_naming_the_tensor(run_job):
    code, out = run_job("tf_names", env={"HVD_STALL_CHECK_TIME": "1",
                                         "HVD_STALL_SHUTDOWN_TIME": "2"})
    assert code == 0, out
    for rank in (0, 1):
        assert re.search(
            rf"rank {rank}: caught: HorovodTimeoutError: rank {rank}: allreduce of tensor "
            rf"'grad.rank{rank}' timed out after [0-9.]+s waiting for rank\(s\) {1 - rank} "
            r"to submit it \(stall shutdown: HVD_STALL_SHUTDOWN_TIME\)", out), out


def test_distributed_gradient_tape_equals_the_whole_batch(run_job):
    code, out = run_job("tf_tape", env=STALL)
    assert code == 0, out
    assert_every_rank(out, "DistributedGradientTape (eager) equals the whole batch's gradients",
                      "DistributedGradientTape (tf.function) equals the whole batch's gradients",
                      "DistributedGradientTape (sparse_as_dense) equals the whole batch's "
                      "gradients", "Sum, predivide and local sources ok",
                      "PartialDistributedGradientTape keeps the local layer's gradients",
                      "SyncBatchNormalization equals the whole batch's", "tape ok")


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_keras_fit_callbacks_and_load_model(run_job, tmp_path, backend):
    if backend == "torch" and importlib.util.find_spec("torch") is None:
        pytest.skip("torch not installed: pip install torch")
    code, out = run_job("keras_fit", env={**STALL, "KERAS_BACKEND": backend},
                        args=[str(tmp_path)])
    assert code == 0, out
    assert_every_rank(out, f"on Keras's {backend} backend",
                      "fit: weights identical on every rank after every epoch",
                      "fit: loss equals one process's on the combined batch",
                      "MetricAverageCallback ok", "collectives on values ok",
                      "LearningRateWarmupCallback ok",
                      "LearningRateScheduleCallback ok", "BestModelCheckpoint ok",
                      "load_model ok", "keras ok")
    if backend == "tensorflow":
        assert_every_rank(out, "Keras's XLA refused")


# Horovod's two recipes under every launcher a Horovod user has. Seeded by rank and one
# thread per rank, each run is the same computation (a sum of two is the same either way
# round), so every launcher must end on the same loss and accuracy, and the model must
# have learnt (chance is a loss of ln 10 = 2.30 and an accuracy of 10%).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
              "TF_NUM_INTEROP_THREADS": "1"}
FINAL = re.compile(r"final loss ([0-9.]+)(?: accuracy ([0-9.]+))?")
EXAMPLE_ARGS = {
    "tensorflow2_mnist": ["--steps", "40"],
    "tensorflow2_keras_mnist": ["--epochs", "2", "--steps-per-epoch", "32"],
}


def run_example(launcher, name, checkpoint_dir):
    """Runs examples/tensorflow2/<name>.py on the synthetic stand-in on 2 ranks under
    `launcher`; returns its output and rank 0's final (loss, accuracy or None)."""
    command = [*two_ranks(launcher), os.path.join(EXAMPLES, f"{name}.py"), "--synthetic",
               "--synthetic-size", "2000", "--checkpoint-dir", str(checkpoint_dir),
               *EXAMPLE_ARGS[name]]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **STALL, **ONE_THREAD, **MPIRUN_ENV})
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{launcher} failed:\n{out}"
    assert "training on synthetic MNIST, 2 ranks" in out, out
    results = FINAL.findall(out)
    assert len(results) == 1, f"expected one final line from rank 0:\n{out}"
    loss, accuracy = results[0]
    return out, (float(loss), float(accuracy) if accuracy else None)


@pytest.fixture(scope="module")
def under_hvdrun(tmp_path_factory):
    """Each example's output and result under hvdrun, and where it saved."""
    runs = {}
    for name in EXAMPLE_ARGS:
        checkpoints = tmp_path_factory.mktemp(name)
        runs[name] = (*run_example("hvdrun", name, checkpoints), checkpoints)
    return runs


def test_tensorflow2_mnist_example_learns_under_hvdrun(under_hvdrun):
    out, (loss, _), checkpoints = under_hvdrun["tensorflow2_mnist"]
    assert "Step #10\tLoss: " in out, out
    assert loss < 1.5, out
    assert os.path.exists(checkpoints / "ckpt-1.index"), out


def test_tensorflow2_keras_mnist_example_learns_under_hvdrun(under_hvdrun):
    out, (loss, accuracy), checkpoints = under_hvdrun["tensorflow2_keras_mnist"]
    assert "Epoch 2/2" in out and "lr: " in out, out
    assert loss < 1.5 and accuracy >= 0.5, out
    assert os.path.exists(checkpoints / "checkpoint-2.keras"), out


@pytest.mark.parametrize("launcher", ["horovodrun", "mpirun"])
@pytest.mark.parametrize("name", list(EXAMPLE_ARGS))
def test_example_trains_the_same_under(launcher, name, under_hvdrun, tmp_path):
    _, result = run_example(launcher, name, tmp_path)
    assert result == under_hvdrun[name][1]


def test_graph_runs_with_many_collectives_complete_or_fail_once_on_every_rank(run_job):
    code, out = run_job("tf_graph_stall", env={"HVD_STALL_CHECK_TIME": "1",
                                               "HVD_STALL_SHUTDOWN_TIME": "2"})
    assert code == 0, out
    assert_every_rank(out, "48 collectives of one graph run ok", "graph stall ok")
    for rank in (0, 1):
        assert re.search(
            rf"rank {rank}: starved run failed: rank {rank}: allgather of tensor "
            rf"'starved\.[0-9]+' timed out after [0-9.]+s waiting for rank\(s\) {1 - rank} "
            r"to submit it", out), out


def test_horovod_tensorflow_api_errors_names_and_elastic_states(run_job):
    code, out = run_job("tf_horovod_api", env=STALL)
    assert code == 0, out
    assert_every_rank(out, "TensorFlow's error classes ok", "IndexedSlices refusals ok",
                      "graph: broadcast_global_variables and names ok",
                      "TensorFlow 1 DistributedOptimizer ok", "elastic states ok")


def test_keras2_code_trains_under_tf_keras(run_job):
    if importlib.util.find_spec("tf_keras") is None:
        why = ("tf_keras (Keras 2) not installed: pip install --no-deps "
               "'tf_keras==<TensorFlow's major.minor>.*'")
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    code, out = run_job("keras2_fit", env={**STALL, "TF_USE_LEGACY_KERAS": "1"})
    assert code == 0, out
    assert_every_rank(out, "Keras 2 fit: weights and averaged loss identical on every rank",
                      "Keras 2 local aggregation ok",
                      "Keras 2 elastic state and SyncBatchNormalization ok")


def test_an_instrumented_dataset_names_the_rank_whose_batches_are_slow(run_job):
    code, out = run_job("tf_data_stall", env=STALL)
    assert code == 0, out
    assert_every_rank(out, "tf.data instrumented: data-bound")
    assert "rank 1 waited for data" in out, out


def test_the_native_loader_feeds_tf_data_fit_and_loops_every_sample_once_without_a_copy(
        run_job):
    code, out = run_job("tf_data_loader", env=STALL)
    assert code == 0, out
    assert_every_rank(out, "tf data loader ok")
