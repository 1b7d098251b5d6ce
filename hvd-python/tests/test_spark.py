"""hvd on Spark, in local mode (local[2]): hvd.init() in the processes pyspark's
TorchDistributor starts (torchrun's variables), on the driver and in barrier tasks, and
hvd.spark.run on the tasks of a barrier stage, twice in one session (Spark reuses its
Python workers)."""

import os
import shutil
import sys

import pytest

INSTALL = ("pip install pyspark==4.3.0, and Java 17: "
           "apt-get install openjdk-17-jre-headless")


def need_spark():
    """pyspark and Java; skips the module without them (fails under CI, which installs
    them)."""
    try:
        import pyspark
    except ImportError:
        missing = "pyspark is not installed"
    else:
        if shutil.which("java") or os.environ.get("JAVA_HOME"):
            return pyspark
        missing = "Java is not installed"
    if os.environ.get("CI"):
        pytest.fail(f"{missing} ({INSTALL})")
    pytest.skip(f"{missing} ({INSTALL})", allow_module_level=True)


pyspark = need_spark()

from pyspark import cloudpickle  # noqa: E402
from pyspark.ml.torch.distributor import TorchDistributor  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import hvd.spark  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def session():
    # Spark's Python workers run this Python (its packages), not the first on PATH.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = SparkSession.builder.master("local[2]").appName("hvd-spark-test") \
        .config("spark.ui.enabled", "false").getOrCreate()
    # Spark's workers cannot import the test modules: their functions travel by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield spark
    spark.stop()


def place(offset):
    import torch

    import hvd.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([hvd.rank() + offset]), op=hvd.Sum).item()
    places = hvd.allgather_object((hvd.rank(), hvd.size(), hvd.local_rank(),
                                   hvd.local_size(), total))
    return places


@pytest.mark.parametrize("local_mode", [True, False], ids=["on-the-driver", "in-tasks"])
def test_hvd_init_works_under_torch_distributor(local_mode):
    # On the driver, one torchrun of 2 processes; in tasks, a torchrun of 1 process in
    # each of 2 barrier tasks (a node each, to torchrun). TorchDistributor hands back
    # rank 0's value: every rank's place, as rank 0 saw it.
    places = TorchDistributor(num_processes=2, local_mode=local_mode, use_gpu=False).run(
        place, 1.0)
    assert [p[:2] + p[4:] for p in places] == [(0, 2, 3.0), (1, 2, 3.0)]


def test_spark_run_gives_every_rank_result_in_rank_order():
    for offset in (1.0, 10.0):
        results = hvd.spark.run(place, args=(offset,), num_proc=2)
        expected = [(0, 2, 0, 2, 1 + 2 * offset), (1, 2, 1, 2, 1 + 2 * offset)]
        assert results == [expected, expected]


def test_spark_run_sets_env_only_for_the_task():
    def read():
        return os.environ.get("HVD_SPARK_TEST"), os.environ.get("HVD_RANK")

    assert hvd.spark.run(read, num_proc=2, env={"HVD_SPARK_TEST": "yes"}) == [
        ("yes", "0"), ("yes", "1")]
    # Spark's reused workers keep none of the job's variables.
    assert hvd.spark.run(lambda: os.environ.get("HVD_SPARK_TEST"), num_proc=2) == [
        None, None]


def test_spark_run_needs_a_session(monkeypatch):
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    with pytest.raises(RuntimeError, match=r"^hvd.spark.run needs an active Spark session "
                                           r"\(SparkSession.builder.getOrCreate\(\)\)$"):
        hvd.spark.run(place, args=(1.0,), num_proc=2)
