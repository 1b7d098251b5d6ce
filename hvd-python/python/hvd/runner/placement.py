"""Where each rank of a job another engine starts (Ray, Spark) stands, and the launcher
variables that tell it: the same ``HVD_*``/``HOROVOD_*`` variables hvdrun gives its
ranks, so that a rank under Ray or Spark is a rank under hvdrun. Plain Python: Ray's
executor and trainer and ``hvd.spark.run`` all use it."""

import os
import secrets
import socket
from collections import OrderedDict

# hvdrun's names for a rank's place, each set under hvd's prefix and Horovod's.
_PREFIXES = ("HVD", "HOROVOD")


def group_by_node(nodes):
    """The order in which to number workers placed on ``nodes`` (a node key per worker):
    the workers of each node together, the nodes in the order they first appear, so that
    local ranks are consecutive as under hvdrun."""
    by_node = OrderedDict()
    for worker, node in enumerate(nodes):
        by_node.setdefault(node, []).append(worker)
    return [worker for workers in by_node.values() for worker in workers]


def rank_environments(nodes, hostnames=None):
    """The place of every rank, in rank order, as hvdrun's variables, given the node key of
    each rank (ranks of a node must be consecutive: see ``group_by_node``). The cross rank
    is the node's index and the cross size the number of nodes, as hvdrun sets them;
    ``hostnames`` (one per rank) become ``HVD_HOSTNAME``, else the node keys do."""
    order = list(OrderedDict.fromkeys(nodes))
    if group_by_node(nodes) != list(range(len(nodes))):
        raise ValueError(f"the ranks of each node must be consecutive: {nodes}")
    hostnames = hostnames or nodes
    environments = []
    for rank, node in enumerate(nodes):
        peers = [r for r, n in enumerate(nodes) if n == node]
        place = {
            "RANK": rank,
            "SIZE": len(nodes),
            "LOCAL_RANK": peers.index(rank),
            "LOCAL_SIZE": len(peers),
            "CROSS_RANK": order.index(node),
            "CROSS_SIZE": len(order),
            "HOSTNAME": hostnames[rank],
        }
        environments.append({f"{prefix}_{name}": str(value)
                             for prefix in _PREFIXES for name, value in place.items()})
    return environments


def job_environment(master_addr, master_port, start_timeout_s=None, nics=None,
                    secret=None):
    """What every rank of one job shares: the rendezvous (rank 0 serves the store at
    ``master_addr:master_port``, torchrun's convention, which hvd follows), the secret
    that authenticates the store and the transports (``secret``, else a fresh one, as
    hvdrun makes for each job), and Horovod's settings: the start timeout and the
    network interfaces."""
    env = {
        "MASTER_ADDR": str(master_addr),
        "MASTER_PORT": str(master_port),
        "HVD_SECRET": secret or secrets.token_hex(16),
    }
    if start_timeout_s is not None:
        env["HVD_START_TIMEOUT"] = str(start_timeout_s)
    if nics:
        env["HVD_IFACE"] = ",".join(sorted(nics))
    return env


def free_port():
    """A TCP port free on this host now, for rank 0's store."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def rendezvous(env):
    """Runs on every worker of a job, with its rank's variables ``env``: a first job of
    all the ranks (``hvd.init()``, then ``hvd.shutdown()``), in which rank 0 starts
    serving the store, which it then does for the rest of its process's life. From then
    on every ``hvd.init()`` of the process, rank 0's included, connects to that store,
    as hvdrun's ranks connect to hvdrun's (a rank 0 that served again would find its
    own port taken)."""
    from hvd.common import basics

    os.environ.update(env)
    basics.init()
    basics.shutdown()
    os.environ["HVD_STORE_ADDR"] = f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
