"""The hosts of an elastic job on Ray, without a Ray instance: slots from each alive
node's resources, and the cooldowns of the nodes kept out after a failure."""

import math

import pytest

from ray_helpers import need_ray

ray = need_ray()

from hvd.ray import discovery  # noqa: E402
from hvd.ray.discovery import Blacklist, Host  # noqa: E402

NODES = [
    {"NodeID": "a" * 56, "NodeManagerAddress": "10.0.0.1", "Alive": True,
     "Resources": {"CPU": 8.0, "GPU": 2.0}},
    {"NodeID": "b" * 56, "NodeManagerAddress": "10.0.0.2", "Alive": False,
     "Resources": {"CPU": 8.0}},
    # A head node that runs no workers.
    {"NodeID": "c" * 56, "NodeManagerAddress": "10.0.0.3", "Alive": True,
     "Resources": {"memory": 1e9}},
    {"NodeID": "d" * 56, "NodeManagerAddress": "10.0.0.4", "Alive": True,
     "Resources": {"CPU": 3.0}},
]


@pytest.fixture
def nodes(monkeypatch):
    monkeypatch.setattr(discovery.ray, "nodes", lambda: NODES)


def test_slots_are_the_workers_an_alive_node_has_room_for(nodes):
    assert discovery.alive_hosts(cpus_per_worker=2) == [
        Host("a" * 56, "10.0.0.1", 4), Host("d" * 56, "10.0.0.4", 1)]
    # GPUs bound the slots too, and a node without them has none.
    assert discovery.alive_hosts(cpus_per_worker=1, gpus_per_worker=1) == [
        Host("a" * 56, "10.0.0.1", 2)]
    assert discovery.alive_hosts(cpus_per_worker=0.5)[1].slots == 6
    assert Host("a" * 56, "10.0.0.1", 4).name == "a" * 12


def test_a_failed_node_is_kept_out_for_good_by_default():
    kept = Blacklist()
    assert kept.charge("n", now=0) == math.inf
    assert kept.blocks("n", now=1e9) and not kept.blocks("other", now=0)


def test_a_cooldown_doubles_with_each_failure_up_to_its_most():
    kept = Blacklist(cooldown_range=(10, 35))
    assert [kept.charge("n", now=0) for _ in range(4)] == [10, 20, 35, 35]
    assert kept.blocks("n", now=34.9) and not kept.blocks("n", now=35)
