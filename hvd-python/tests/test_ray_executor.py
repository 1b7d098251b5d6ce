"""hvd.ray.RayExecutor on one Ray node of this machine: ranks numbered as hvdrun numbers
them, collectives between the actors, hvd.init again after hvd.shutdown, Horovod's
execute/execute_single, a worker that dies or raises named by the driver's exception,
and no worker left after shutdown."""

import os
import re
import signal
import time

import pytest

from ray_helpers import need_ray, ray_options, send_by_value, wait_gone

ray = need_ray()

from hvd.ray import RayExecutor, WorkerFailedError  # noqa: E402

# How long the job may take to start (hvd's start timeout), and to notice a dead peer.
TIMEOUT_S = 60


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    ray.init(num_cpus=4, **ray_options())
    send_by_value(__name__)
    yield
    ray.shutdown()


class Counter:
    """What start() makes on every worker, for execute()."""

    def __init__(self, start):
        self.count = start

    def bump(self):
        self.count += 1
        return self.count


@pytest.fixture(scope="module")
def executor(ray_instance):
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=TIMEOUT_S), num_workers=2)
    executor.start(executable_cls=Counter, executable_args=[10])
    yield executor
    executor.shutdown()


def place():
    import hvd.torch as hvd
    hvd.init()
    return {"hvd": (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(),
                    hvd.cross_rank(), hvd.cross_size()),
            "env": tuple(int(os.environ[f"HOROVOD_{name}"]) for name in
                         ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK",
                          "CROSS_SIZE"))}


def test_ranks_follow_the_node_ray_chose(executor):
    places = executor.run(place)
    expected = [(0, 2, 0, 2, 0, 1), (1, 2, 1, 2, 0, 1)]
    assert [p["hvd"] for p in places] == expected
    assert [p["env"] for p in places] == expected


def add(base, scale=1.0):
    import torch

    import hvd.torch as hvd
    hvd.init()
    value = torch.tensor([base + hvd.rank()], dtype=torch.float64) * scale
    return hvd.allreduce(value, op=hvd.Sum).item()


def test_allreduce_sums_over_the_workers(executor):
    assert executor.run(add, args=[1.0], kwargs={"scale": 2.0}) == [6.0, 6.0]
    assert ray.get(executor.run_remote(add, args=[5.0])) == [11.0, 11.0]


def reinit():
    import hvd.torch as hvd
    hvd.shutdown()
    first = add(1.0)
    hvd.shutdown()
    return first, add(2.0)


def test_init_after_shutdown_meets_the_other_ranks_again(executor):
    # Rank 0 serves the store for the life of its worker: every new job meets there, in
    # one call or the next.
    assert executor.run(reinit) == [(3.0, 5.0), (3.0, 5.0)]
    assert executor.run(reinit) == [(3.0, 5.0), (3.0, 5.0)]


def test_a_second_start_is_refused(executor):
    with pytest.raises(RuntimeError, match=r"^RayExecutor: already started \(call "
                                           r"shutdown\(\) first\)$"):
        executor.start()


def test_execute_passes_the_executable_and_execute_single_runs_on_rank_0(executor):
    assert executor.execute(lambda counter: counter.bump()) == [11, 11]
    assert executor.execute_single(lambda counter: counter.bump()) == 12
    assert executor.execute(lambda counter: counter.count) == [12, 11]


def dies_on_rank_1():
    import torch

    import hvd.torch as hvd
    hvd.init()
    hvd.allreduce(torch.ones(1), name="before")
    if hvd.rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    hvd.allreduce(torch.ones(1), name="after")


def raises_on_rank_1():
    import torch

    import hvd.torch as hvd
    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("no data for this shard")
    hvd.allreduce(torch.ones(1), name="waits for rank 1")


def freezes_on_rank_1():
    import torch

    import hvd.torch as hvd
    hvd.init()
    if hvd.rank() == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
    hvd.allreduce(torch.ones(1), name="waits for rank 1")


def pids(executor):
    return executor.execute(lambda _: os.getpid())


def test_a_worker_that_dies_is_named_and_nothing_is_left():
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=TIMEOUT_S), num_workers=2)
    executor.start()
    try:
        workers = pids(executor)
        started = time.monotonic()
        with pytest.raises(WorkerFailedError) as failed:
            executor.run(dies_on_rank_1)
        assert time.monotonic() - started < TIMEOUT_S
    finally:
        executor.shutdown()
    message = str(failed.value)
    assert re.match(rf"hvd\.ray: rank 1 \(pid {workers[1]}\) on node [0-9.]+ died: "
                    r"The actor died unexpectedly before finishing this task\. "
                    r"The actor is dead because its worker process has died", message), message
    assert failed.value.rank == 1
    assert isinstance(failed.value.cause, ray.exceptions.RayActorError)
    assert failed.value.__cause__ is failed.value.cause
    assert wait_gone(workers) == []


def test_a_function_that_raises_is_named_with_its_error():
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=TIMEOUT_S), num_workers=2)
    executor.start()
    try:
        workers = pids(executor)
        with pytest.raises(WorkerFailedError) as failed:
            executor.run(raises_on_rank_1)
    finally:
        executor.shutdown()
    # Rank 1 left the job as it raised, so rank 0 failed at once rather than wait.
    assert str(failed.value).startswith(
        f"hvd.ray: rank 1 (pid {workers[1]}) on node {failed.value.node} failed: "
        "ValueError: no data for this shard"), failed.value
    assert isinstance(failed.value.cause.cause, ValueError)
    assert wait_gone(workers) == []
    with pytest.raises(RuntimeError, match=r"RayExecutor: call start\(\) first"):
        executor.run(add, args=[1.0])


def test_a_worker_that_freezes_is_named_once_its_peers_lose_it():
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=TIMEOUT_S), num_workers=2)
    # The peers give up on a silent rank after HVD_TIMEOUT.
    executor.start(extra_env_vars={"HVD_TIMEOUT": "3"})
    try:
        workers = pids(executor)
        with pytest.raises(WorkerFailedError) as failed:
            executor.run(freezes_on_rank_1)
    finally:
        executor.shutdown()
    assert str(failed.value) == (
        f"hvd.ray: rank 1 (pid {workers[1]}) on node {failed.value.node} was still running "
        "when its peers lost it: frozen, stopped or stuck?; rank 0 failed on losing a peer")
    assert failed.value.rank == 1
    assert wait_gone(workers) == []


@pytest.mark.parametrize("arguments, error, text", [
    ({}, ValueError, "RayExecutor needs num_workers, or num_hosts and num_workers_per_host "
     "(1 or more each)"),
    ({"num_workers": 2, "num_hosts": 2}, ValueError,
     "RayExecutor: give num_workers, or num_hosts (with num_workers_per_host), not both"),
    ({"num_workers": 2, "gpus_per_worker": 1}, ValueError,
     "RayExecutor: gpus_per_worker is set, but use_gpu is False"),
    ({"num_workers": 2, "num_slots": 2}, TypeError,
     "RayExecutor() got unexpected keyword arguments: num_slots"),
])
def test_bad_arguments_are_refused_with_the_reason(arguments, error, text):
    with pytest.raises(error) as refused:
        RayExecutor(RayExecutor.create_settings(), **arguments)
    assert str(refused.value) == text


def test_a_job_ray_cannot_place_times_out_with_what_it_asked_for():
    executor = RayExecutor(
        RayExecutor.create_settings(placement_group_timeout_s=1), num_workers=2,
        cpus_per_worker=100)
    with pytest.raises(TimeoutError, match=r"RayExecutor: Ray could not place 2 bundle\(s\) "
                       r"of \{'CPU': 100\} \(PACK\) within 1s; the cluster has .* free"):
        executor.start()
