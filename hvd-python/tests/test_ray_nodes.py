"""hvd.ray.RayExecutor over two Ray nodes (ray.cluster_utils.Cluster: two raylets on this
machine), two workers on each: ranks are numbered node by node, local and cross ranks
follow the nodes Ray placed the workers on, and an allreduce sums over all four.

Both nodes are this host to hvd's transports, which find hosts for themselves: so
hvd.local_rank() counts all four, while the launcher's variables (what the executor
decides, and what programs written for Horovod read) follow Ray's nodes."""

import os

import pytest

from ray_helpers import need_ray, no_token_auth, send_by_value

ray = need_ray()

from ray.cluster_utils import Cluster  # noqa: E402

from hvd.ray import RayExecutor  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def two_nodes():
    # The nodes take this machine's address, not loopback: a driver connecting to a
    # cluster at 127.0.0.1 is sent to the machine's address by Ray, and never gets there.
    no_token_auth()
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address)
    send_by_value(__name__)
    yield
    ray.shutdown()
    cluster.shutdown()


def place():
    import torch

    import hvd.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), op=hvd.Sum).item()
    env = tuple(int(os.environ[f"HOROVOD_{name}"]) for name in
                ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"))
    return {"rank": (hvd.rank(), hvd.size()), "env": env, "total": total,
            "node": ray.get_runtime_context().get_node_id()}


def test_four_workers_on_two_nodes_are_numbered_node_by_node():
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_hosts=2,
                           num_workers_per_host=2)
    executor.start()
    try:
        places = executor.run(place)
    finally:
        executor.shutdown()
    assert [p["rank"] for p in places] == [(r, 4) for r in range(4)]
    assert [p["env"] for p in places] == [
        (0, 4, 0, 2, 0, 2), (1, 4, 1, 2, 0, 2), (2, 4, 0, 2, 1, 2), (3, 4, 1, 2, 1, 2)]
    nodes = [p["node"] for p in places]
    assert nodes[0] == nodes[1] != nodes[2] == nodes[3]
    assert [p["total"] for p in places] == [10.0] * 4
