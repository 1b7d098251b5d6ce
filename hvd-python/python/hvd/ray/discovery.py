"""The hosts of an elastic job on Ray: Ray's alive nodes, each with as many slots as
workers fit in its resources (what hvdrun's discovery script says on other clusters),
and the hosts kept out after a failure, as hvdrun keeps them out."""

import math
import time
from dataclasses import dataclass

import ray


@dataclass(frozen=True)
class Host:
    """A Ray node: ``node_id`` is its identity (a node that comes back is a new one),
    ``name`` the short form workers and messages use, ``ip`` its address."""
    node_id: str
    ip: str
    slots: int

    @property
    def name(self):
        return self.node_id[:12]


def alive_hosts(cpus_per_worker, gpus_per_worker=0):
    """Ray's alive nodes with room for at least one worker, in Ray's order."""
    hosts = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        resources = node.get("Resources", {})
        slots = math.floor(resources.get("CPU", 0) / cpus_per_worker + 1e-9)
        if gpus_per_worker:
            slots = min(slots, math.floor(resources.get("GPU", 0) / gpus_per_worker + 1e-9))
        if slots > 0:
            hosts.append(Host(node["NodeID"], node["NodeManagerAddress"], slots))
    return hosts


class Blacklist:
    """Hosts kept out after a failure: for the rest of the job (Horovod's default), or
    with ``cooldown_range=(least, most)`` seconds for ``least``, doubled with each
    further failure of the host, at most ``most``."""

    def __init__(self, cooldown_range=None):
        self.cooldown_range = cooldown_range
        self.failures = {}
        self.until = {}

    def charge(self, host, now=None):
        """Keeps ``host`` out; how long, in seconds (``math.inf`` for good)."""
        now = time.monotonic() if now is None else now
        self.failures[host] = self.failures.get(host, 0) + 1
        if self.cooldown_range is None:
            cooldown = math.inf
        else:
            least, most = self.cooldown_range
            cooldown = min(least * 2 ** (self.failures[host] - 1), max(least, most))
        self.until[host] = now + cooldown
        return cooldown

    def blocks(self, host, now=None):
        now = time.monotonic() if now is None else now
        return self.until.get(host, -math.inf) > now
