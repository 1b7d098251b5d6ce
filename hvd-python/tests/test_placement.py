"""The placement of the ranks Ray and Spark start (hvd.runner.placement), without
either: how workers on nodes become ranks with hvdrun's variables, and what the ranks of
one job share."""

import pytest

from hvd.runner import placement


def test_workers_are_numbered_node_by_node_in_the_order_nodes_first_appear():
    assert placement.group_by_node(["b", "a", "b", "c", "a"]) == [0, 2, 1, 4, 3]


def test_each_rank_gets_hvdruns_variables_under_both_names():
    envs = placement.rank_environments(["n1", "n1", "n2", "n2", "n2"],
                                       ["h1", "h1", "h2", "h2", "h2"])
    assert envs[3] == {
        f"{prefix}_{name}": value for prefix in ("HVD", "HOROVOD") for name, value in (
            ("RANK", "3"), ("SIZE", "5"), ("LOCAL_RANK", "1"), ("LOCAL_SIZE", "3"),
            ("CROSS_RANK", "1"), ("CROSS_SIZE", "2"), ("HOSTNAME", "h2"))}
    assert [e["HVD_LOCAL_RANK"] for e in envs] == ["0", "1", "0", "1", "2"]
    assert [e["HVD_CROSS_RANK"] for e in envs] == ["0", "0", "1", "1", "1"]


def test_ranks_of_a_node_that_are_not_consecutive_are_refused():
    with pytest.raises(ValueError, match=r"the ranks of each node must be consecutive: "
                                         r"\['a', 'b', 'a'\]"):
        placement.rank_environments(["a", "b", "a"])


def test_every_job_has_a_fresh_secret_unless_given_one():
    first = placement.job_environment("10.0.0.1", 4000, start_timeout_s=60,
                                      nics={"eth1", "eth0"})
    assert {k: v for k, v in first.items() if k != "HVD_SECRET"} == {
        "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "4000", "HVD_START_TIMEOUT": "60",
        "HVD_IFACE": "eth0,eth1"}
    assert len(first["HVD_SECRET"]) == 32
    assert placement.job_environment("a", 1)["HVD_SECRET"] != first["HVD_SECRET"]
    assert placement.job_environment("a", 1, secret="s")["HVD_SECRET"] == "s"
