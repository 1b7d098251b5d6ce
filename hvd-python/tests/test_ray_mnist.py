"""Horovod's PyTorch MNIST recipe (examples/pytorch/train_mnist.py, as test_launchers.py
runs it under hvdrun) run unchanged on two Ray workers, through hvd.ray.RayExecutor and
through hvd.ray.HorovodTrainer: the job is deterministic, so each must reach the very
test loss and accuracy hvdrun's run reaches."""

import os

import pytest

from ray_helpers import need_ray, ray_options, send_by_value

ray = need_ray()

import ray.train  # noqa: E402

from hvd.ray import HorovodConfig, HorovodTrainer, RayExecutor  # noqa: E402
from test_launchers import ARGS, EXAMPLE, RESULT, train  # noqa: E402

# Ray Train runs the loop in a directory of its own.
EXAMPLE = os.path.abspath(EXAMPLE)
EXAMPLE_ARGS = list(ARGS)


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    ray.init(num_cpus=2, **ray_options())
    send_by_value(__name__)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def under_hvdrun():
    return train("hvdrun")


def recipe(example, args):
    """Runs the recipe as a script on this worker; what it printed."""
    import contextlib
    import io
    import runpy
    import sys

    printed = io.StringIO()
    sys.argv = [example, *args]
    with contextlib.redirect_stdout(printed):
        runpy.run_path(example, run_name="__main__")
    return printed.getvalue()


def result(printed):
    """Rank 0's test loss and accuracy; None on the other ranks, which print none."""
    found = RESULT.findall(printed)
    assert len(found) <= 1, printed
    return tuple(float(v) for v in found[0]) if found else None


def test_recipe_through_ray_executor_reaches_hvdrun_loss(under_hvdrun):
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=2)
    executor.start()
    try:
        printed = executor.run(recipe, args=[EXAMPLE, EXAMPLE_ARGS])
    finally:
        executor.shutdown()
    # Each rank trained on its half, as under hvdrun.
    assert all("Train Epoch: 1 [0/3000 (0%)]" in p for p in printed), printed
    assert [result(p) for p in printed] == [under_hvdrun, None], printed


def train_loop(config):
    import os
    import tempfile

    printed = recipe(config["example"], config["args"])
    # Ray Train V2 keeps the metrics reported with a checkpoint: rank 0 saves what it
    # printed as one.
    with tempfile.TemporaryDirectory() as directory:
        saved = None
        if ray.train.get_context().get_world_rank() == 0:
            with open(os.path.join(directory, "printed.txt"), "w") as f:
                f.write(printed)
            saved = ray.train.Checkpoint.from_directory(directory)
        ray.train.report({"printed": printed}, checkpoint=saved)


def test_recipe_through_horovod_trainer_reaches_hvdrun_loss(tmp_path, under_hvdrun):
    trainer = HorovodTrainer(
        train_loop, train_loop_config={"example": EXAMPLE, "args": EXAMPLE_ARGS},
        horovod_config=HorovodConfig(timeout_s=60),
        scaling_config=ray.train.ScalingConfig(num_workers=2),
        run_config=ray.train.RunConfig(name="hvd-mnist", storage_path=str(tmp_path)))
    done = trainer.fit()
    assert done.error is None, done.error
    # Ray Train keeps rank 0's metrics.
    printed = done.metrics["printed"]
    assert "Train Epoch: 1 [0/3000 (0%)]" in printed, printed
    assert result(printed) == under_hvdrun, printed
