"""An elastic hvd.ray.RayExecutor on a Ray cluster of fake nodes (ray.cluster_utils.Cluster,
two worker nodes of 2 CPUs): the elastic PyTorch job hvdrun's elastic tests run
(jobs/elastic_train.py), with one node killed and another added mid-job. The job must
finish with every example exactly once per epoch and the weights the same job reaches in
one process, the dead node named and kept out, the new node's workers in the last round,
and no worker left. An error no new round cures (a mismatch) ends the job, named; too
few slots for min_workers end it after elastic_timeout, naming every node. Also the
elastic arguments RayExecutor refuses, with the reason."""

import os
import re
import sys
import threading
import time

import pytest

from ray_helpers import need_ray, no_token_auth, send_by_value, wait_gone

ray = need_ray()

from ray.cluster_utils import Cluster  # noqa: E402

from hvd.ray import RayExecutor, WorkerFailedError  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "jobs"))
import elastic_train  # noqa: E402
from test_elastic import lines  # noqa: E402

# How long a change of nodes may take to show in the job.
CHANGE_S = 120


@pytest.fixture(scope="module")
def cluster():
    no_token_auth()
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address)
    send_by_value(__name__)
    send_by_value("elastic_train")
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def mismatch():
    """jobs/elastic_mismatch.py: ranks that submit different shapes, a bug."""
    import torch

    import hvd.torch as hvd
    hvd.init()
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=0)

    @hvd.elastic.run
    def train(state):
        hvd.allreduce(torch.zeros(1 + hvd.rank()), name="grad")

    train(state)


def test_an_error_no_round_cures_ends_the_job_named(cluster, capfd):
    # Runs before the test that kills a node: Ray may list a killed node as alive for a
    # while, and a round there would fail first.
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), min_workers=2,
                           max_workers=2)
    executor.start()
    try:
        with pytest.raises(WorkerFailedError) as failed:
            executor.run(mismatch)
    finally:
        executor.shutdown()
    assert re.match(
        r"hvd\.ray: rank [01] \(worker \w+:[01]\) on node \S+ failed with an error no new "
        r"round can cure, which ends the job: MismatchError: Mismatched shapes for tensor "
        r"'grad': rank 0 has \[1\], rank 1 has \[2\]", str(failed.value)), failed.value
    assert failed.value.rank in (0, 1)
    assert isinstance(failed.value.cause, ray.exceptions.RayTaskError)
    said = capfd.readouterr().err
    assert "round 2" not in said, said


def test_too_few_slots_for_min_workers_fail_naming_every_node(cluster):
    # Two nodes of two slots, and no round of five can form.
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), min_workers=5,
                           elastic_timeout=2)
    executor.start()
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError) as failed:
            executor.run(mismatch)
    finally:
        executor.shutdown()
    assert time.monotonic() - started < 30
    head, *listed = str(failed.value).split("\n")
    assert head == ("hvd.ray: only 4 worker(s) were available for 2s, fewer than "
                    "min_workers 5; Ray's nodes:"), failed.value
    assert sorted(listed) == sorted(
        f"  {n.node_id[:12]} ({n.node_ip_address}): 2 slot(s), 2 worker(s) running"
        for n in cluster.worker_nodes), failed.value


def job(out):
    """elastic_train's job on one worker; its rank and node in the last round."""
    import hvd.torch as hvd
    with open(os.path.join(out, "pids"), "a") as f:
        f.write(f"{os.getpid()}\n")
    elastic_train.main()
    return hvd.rank(), os.environ["HVD_HOSTNAME"]


def wait_for(what, condition):
    deadline = time.monotonic() + CHANGE_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {CHANGE_S}s"
        time.sleep(0.05)


def change_nodes(cluster, out, victim):
    """Once the first round trains, kills ``victim`` and adds a node (Ray changes its
    cluster from the main thread alone); the job runs slowly until a second round of
    four (the new node's workers in it) has formed. The new node's id."""
    try:
        wait_for("first round", lambda: len(lines(out, "rounds")) >= 4)
        cluster.remove_node(victim, allow_graceful=False)
        joined = cluster.add_node(num_cpus=2).node_id
        wait_for("round with the new node",
                 lambda: [r.split()[0] for r in lines(out, "rounds")].count("4") >= 8)
        return joined
    finally:
        open(os.path.join(out, "fast"), "w").close()


def test_a_node_killed_and_one_added_mid_job_lose_and_repeat_no_example(
        cluster, tmp_path, capfd):
    out = str(tmp_path)
    first, victim = cluster.worker_nodes
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), min_workers=2,
                           max_workers=4, elastic_timeout=60)
    executor.start(extra_env_vars={
        "ELASTIC_OUT": out, "ELASTIC_STEP_MS": "2000",
        "ELASTIC_SLOW_UNTIL": os.path.join(out, "fast"), "HVD_TIMEOUT": "5"})
    outcome = {}

    def drive():
        try:
            outcome["results"] = executor.run(job, args=[out])
        except BaseException as e:
            outcome["error"] = e

    driver = threading.Thread(target=drive)
    driver.start()
    try:
        joined = [change_nodes(cluster, out, victim)]
    finally:
        driver.join(timeout=300)
        executor.shutdown()
    assert not driver.is_alive(), "the elastic job did not end within 300s"
    assert "error" not in outcome, outcome["error"]
    results = outcome["results"]
    said = capfd.readouterr().err

    final = elastic_train_final(out)
    log = final["log"]
    for epoch in range(elastic_train.EPOCHS):
        part = log[epoch * elastic_train.EXAMPLES:(epoch + 1) * elastic_train.EXAMPLES]
        assert sorted(part) == list(range(elastic_train.EXAMPLES)), f"epoch {epoch}"
    assert len(log) == elastic_train.EPOCHS * elastic_train.EXAMPLES
    for got, want in zip(final["w"], elastic_train.reference()):
        assert abs(got - want) <= 1e-5 * abs(want), (got, want)

    # The last round: the first node's two workers and the new node's two.
    name = {n.node_id: n.node_id[:12] for n in (first, victim)}
    new = joined[0][:12]
    assert sorted(r for r, _ in results) == [0, 1, 2, 3], results
    assert sorted(h for _, h in results) == sorted([name[first.node_id]] * 2 + [new] * 2)
    sizes = [int(r.split()[0]) for r in lines(out, "rounds")]
    assert sizes[:4] == [4] * 4 and sizes[-4:] == [4] * 4, sizes
    assert re.search(rf"round 1 failed: rank [0-3] \(worker {name[victim.node_id]}:[01]\) "
                     rf"on node \S+ .*; node {name[victim.node_id]} is kept out for the "
                     "rest of the job", said), said
    finished = [w.split()[0] for w in lines(out, "workers") if " finished " in w]
    assert sorted(finished) == sorted([name[first.node_id]] * 2 + [new] * 2), finished
    pids = [int(p) for p in lines(out, "pids")]
    assert len(pids) == 6 and wait_gone(pids) == [], pids


def elastic_train_final(out):
    import json
    with open(os.path.join(out, "final.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("arguments, text", [
    ({"min_workers": 2, "num_workers": 2},
     "RayExecutor: an elastic job (min_workers, max_workers) has no num_workers or "
     "num_hosts: its size follows Ray's nodes"),
    ({"max_workers": 4}, "RayExecutor: an elastic job needs min_workers"),
    ({"min_workers": 4, "max_workers": 2},
     "RayExecutor: max_workers (2) is below min_workers (4)"),
    ({"min_workers": 2, "override_discovery": False},
     "RayExecutor: an elastic job on Ray finds its hosts in Ray's alive nodes; "
     "override_discovery=False is not supported"),
])
def test_bad_elastic_arguments_are_refused_with_the_reason(arguments, text):
    with pytest.raises(ValueError) as refused:
        RayExecutor(RayExecutor.create_settings(), **arguments)
    assert str(refused.value) == text


def test_an_elastic_job_has_run_alone(cluster):
    executor = RayExecutor(RayExecutor.create_settings(), min_workers=1)
    executor.start()
    try:
        with pytest.raises(NotImplementedError, match="runs functions with run"):
            executor.execute(lambda _: None)
    finally:
        executor.shutdown()
