"""hvd.ray.HorovodTrainer under Ray Train (V2) on one Ray node: two workers that are hvd
ranks (the launcher's variables as hvdrun sets them), hvd started again in the loop, an
allreduce between them, a checkpoint reported with ray.train.report, and a second run of the same name that
resumes from it through ray.train.get_checkpoint."""

import json
import os
import tempfile

import pytest

from ray_helpers import need_ray, ray_options, send_by_value

ray = need_ray()

import ray.train  # noqa: E402

from hvd.ray import HorovodConfig, HorovodTrainer  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    ray.init(num_cpus=2, **ray_options())
    send_by_value(__name__)
    yield
    ray.shutdown()


def train(config):
    import torch

    import hvd.torch as hvd
    hvd.init()
    # A job started again meets the other ranks at the same store, rank 0 included.
    hvd.shutdown()
    hvd.init()
    first = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as directory:
            with open(os.path.join(directory, "state.json")) as f:
                first = json.load(f)["epoch"] + 1
    place = [int(os.environ[f"HOROVOD_{name}"]) for name in
             ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE")]
    for epoch in range(first, config["epochs"]):
        total = hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), op=hvd.Sum).item()
        metrics = {"epoch": epoch, "first": first, "total": total,
                   "ranks": (hvd.rank(), hvd.size()), "place": place}
        with tempfile.TemporaryDirectory() as directory:
            saved = None
            if hvd.rank() == 0:
                with open(os.path.join(directory, "state.json"), "w") as f:
                    json.dump({"epoch": epoch}, f)
                saved = ray.train.Checkpoint.from_directory(directory)
            ray.train.report(metrics, checkpoint=saved)


def fit(storage, epochs):
    trainer = HorovodTrainer(
        train, train_loop_config={"epochs": epochs},
        horovod_config=HorovodConfig(timeout_s=60),
        scaling_config=ray.train.ScalingConfig(num_workers=2),
        run_config=ray.train.RunConfig(name="hvd-trainer", storage_path=str(storage)))
    return trainer.fit()


def test_fit_reports_a_checkpoint_and_a_second_run_resumes_from_it(tmp_path):
    result = fit(tmp_path, epochs=2)
    assert result.error is None
    assert result.metrics["epoch"] == 1 and result.metrics["first"] == 0
    assert result.metrics["total"] == 3.0
    # Rank 0 reports Ray Train's metrics: the ranks hvd and the launcher's variables give.
    assert list(result.metrics["ranks"]) == [0, 2]
    assert result.metrics["place"] == [0, 2, 0, 2, 0, 1]
    with result.checkpoint.as_directory() as directory:
        with open(os.path.join(directory, "state.json")) as f:
            assert json.load(f) == {"epoch": 1}

    resumed = fit(tmp_path, epochs=3)
    assert resumed.error is None
    assert resumed.metrics["first"] == 2 and resumed.metrics["epoch"] == 2


def test_the_options_ray_train_v2_dropped_are_refused_by_it():
    # Horovod's trainer took them; Ray Train V2 resumes a run by its name instead.
    with pytest.raises(DeprecationWarning, match="`resume_from_checkpoint` is deprecated"):
        HorovodTrainer(train, resume_from_checkpoint=ray.train.Checkpoint("/nowhere"))
