"""Where a ``RayExecutor``'s workers go: a placement group of one bundle per worker,
packed (``num_workers``), or one bundle per host, each on a node of its own
(``num_hosts`` x ``num_workers_per_host``), as Horovod's executor places them."""

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


class Placement:
    """The bundles of one job's placement group and how many workers share each."""

    def __init__(self, bundles, workers_per_bundle, strategy):
        self.bundles = bundles
        self.workers_per_bundle = workers_per_bundle
        self.strategy = strategy
        self.group = None

    @classmethod
    def for_job(cls, num_workers, num_hosts, num_workers_per_host, cpus_per_worker,
                gpus_per_worker):
        worker = {"CPU": cpus_per_worker}
        if gpus_per_worker:
            worker["GPU"] = gpus_per_worker
        if num_workers is not None:
            if num_hosts is not None:
                raise ValueError("RayExecutor: give num_workers, or num_hosts (with "
                                 "num_workers_per_host), not both")
            if num_workers < 1:
                raise ValueError(f"RayExecutor: num_workers must be 1 or more; got "
                                 f"{num_workers}")
            return cls([dict(worker) for _ in range(num_workers)], 1, "PACK")
        if not num_hosts or not num_workers_per_host:
            raise ValueError("RayExecutor needs num_workers, or num_hosts and "
                             "num_workers_per_host (1 or more each)")
        host = {name: amount * num_workers_per_host for name, amount in worker.items()}
        return cls([dict(host) for _ in range(num_hosts)], num_workers_per_host,
                   "STRICT_SPREAD")

    @property
    def num_workers(self):
        return len(self.bundles) * self.workers_per_bundle

    def reserve(self, timeout_s):
        """Creates the placement group; a TimeoutError naming what was asked and what
        the cluster has free when Ray cannot place it in ``timeout_s``."""
        self.group = placement_group(self.bundles, strategy=self.strategy)
        ready, _ = ray.wait([self.group.ready()], timeout=timeout_s)
        if not ready:
            self.release()
            raise TimeoutError(
                f"RayExecutor: Ray could not place {len(self.bundles)} bundle(s) of "
                f"{self.bundles[0]} ({self.strategy}) within {timeout_s}s; the cluster "
                f"has {ray.available_resources()} free (add nodes, ask for less, or "
                f"raise placement_group_timeout_s)")

    def options(self, worker):
        """The actor options of worker ``worker`` (its bundle's share)."""
        share = {name.lower(): amount / self.workers_per_bundle
                 for name, amount in self.bundles[0].items()}
        bundle = worker // self.workers_per_bundle
        return {"num_cpus": share["cpu"], "num_gpus": share.get("gpu", 0),
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    self.group, placement_group_bundle_index=bundle)}

    def release(self):
        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None
