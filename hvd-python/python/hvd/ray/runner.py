"""``RayExecutor``: Horovod's executor for Ray, on hvd. Workers are Ray actors in a
placement group; each gets hvdrun's variables for the place Ray gave it, and rank 0
serves the job's rendezvous store, so the ranks meet as any hvd job's do."""

from dataclasses import dataclass, field
from typing import Optional, Set

import ray

from hvd.ray.elastic import ElasticJob, ElasticSettings
from hvd.ray.failure import gather
from hvd.ray.strategy import Placement
from hvd.ray.worker import Worker
from hvd.runner import placement

_ELASTIC = ("min_workers", "max_workers", "reset_limit", "cooldown_range",
            "elastic_timeout", "override_discovery")


@dataclass
class RaySettings:
    """What ``RayExecutor.create_settings`` makes: ``timeout_s`` bounds how long the ranks
    wait for each other when the job starts (hvd's start timeout), and
    ``placement_group_timeout_s`` how long Ray may take to place the workers; ``nics``
    are the network interfaces the ranks use between nodes."""
    timeout_s: int = 300
    placement_group_timeout_s: int = 100
    nics: Optional[Set[str]] = None
    # Horovod's ssh settings: kept for its callers; Ray starts the workers, so nothing
    # logs in over ssh.
    ssh_identity_file: Optional[str] = None
    ssh_str: Optional[str] = field(default=None, repr=False)


class RayExecutor:
    """Runs functions on ``num_workers`` hvd ranks (packed onto as few nodes as Ray can),
    or on ``num_hosts`` nodes with ``num_workers_per_host`` ranks each, every worker with
    ``cpus_per_worker`` CPUs and, with ``use_gpu``, ``gpus_per_worker`` GPUs (1 unless
    given). Ranks are numbered node by node, so local and cross ranks follow the nodes
    Ray chose. The functions call ``hvd.init()`` themselves, as under any launcher.

    With ``min_workers`` (and ``max_workers``, ``reset_limit``, ``cooldown_range``,
    ``elastic_timeout``) the job is elastic, as under ``hvdrun --elastic``: a worker on
    every slot of Ray's alive nodes (``cpus_per_worker`` CPUs each), and nodes that
    die or join change the job through ``hvd.elastic`` (see ``hvd.ray.elastic``)."""

    @classmethod
    def create_settings(cls, timeout_s=300, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        return RaySettings(timeout_s=timeout_s,
                           placement_group_timeout_s=placement_group_timeout_s,
                           nics=nics, ssh_identity_file=ssh_identity_file, ssh_str=ssh_str)

    def __init__(self, settings=None, num_workers=None, num_hosts=None,
                 num_workers_per_host=1, cpus_per_worker=1, use_gpu=False,
                 gpus_per_worker=None, **elastic):
        unknown = sorted(set(elastic) - set(_ELASTIC))
        if unknown:
            raise TypeError(f"RayExecutor() got unexpected keyword arguments: "
                            f"{', '.join(unknown)}")
        if gpus_per_worker and not use_gpu:
            raise ValueError("RayExecutor: gpus_per_worker is set, but use_gpu is False")
        if use_gpu and gpus_per_worker is not None and gpus_per_worker < 1:
            raise ValueError(f"RayExecutor: gpus_per_worker must be 1 or more; got "
                             f"{gpus_per_worker}")
        self.settings = settings or RaySettings()
        self.use_gpu = use_gpu
        gpus = (gpus_per_worker or 1) if use_gpu else 0
        self.elastic = _elastic_settings(num_workers, num_hosts, elastic)
        self.resources = (cpus_per_worker, gpus)
        self.placement = None if self.elastic else Placement.for_job(
            num_workers, num_hosts, num_workers_per_host, cpus_per_worker, gpus)
        self.workers = []
        # Each rank's node: what Ray reports for its actor (address, id, host, pid).
        self.nodes = []
        self.extra_env_vars = None

    @property
    def num_workers(self):
        """The job's size; None for an elastic job, whose size changes."""
        return self.placement.num_workers if self.placement else None

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Places the workers, gives each its rank's variables (and ``extra_env_vars``),
        and makes ``executable_cls(*executable_args, **executable_kwargs)`` on each, the
        object ``execute`` passes to its function."""
        if self.workers or self.extra_env_vars is not None:
            raise RuntimeError("RayExecutor: already started (call shutdown() first)")
        if self.elastic:
            if executable_cls is not None:
                raise ValueError("RayExecutor: an elastic job has no executable_cls: its "
                                 "workers start with each run()")
            # Each run() starts its workers, on the nodes Ray has then.
            self.extra_env_vars = dict(extra_env_vars or {})
            return
        try:
            self._start(executable_cls, executable_args, executable_kwargs,
                        extra_env_vars or {})
        except BaseException:
            self.shutdown()
            raise

    def _start(self, executable_cls, args, kwargs, extra_env_vars):
        self.placement.reserve(self.settings.placement_group_timeout_s)
        actor = ray.remote(Worker)
        actors = [actor.options(**self.placement.options(i)).remote()
                  for i in range(self.num_workers)]
        # Until they are placed and numbered, a failure has no rank to name: these are
        # the workers to kill should the start fail.
        self.workers = actors
        nodes = ray.get([a.node.remote() for a in actors],
                        timeout=self.settings.timeout_s)
        # The address each node registered with Ray, which its peers reach it on.
        addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
        for node in nodes:
            node["ip"] = addresses[node["node_id"]]
        order = placement.group_by_node([n["node_id"] for n in nodes])
        self.workers = [actors[i] for i in order]
        self.nodes = [nodes[i] for i in order]
        ranks = placement.rank_environments([n["node_id"] for n in self.nodes],
                                            [n["hostname"] for n in self.nodes])
        timeout = self.settings.timeout_s
        port = ray.get(self.workers[0].free_port.remote(), timeout=timeout)
        job = placement.job_environment(self.nodes[0]["ip"], port, self.settings.timeout_s,
                                        self.settings.nics)
        gpus = self._visible_devices() if self.use_gpu else [{}] * self.num_workers
        ray.get([w.update_env_vars.remote({**extra_env_vars, **gpu})
                 for w, gpu in zip(self.workers, gpus)], timeout=timeout)
        gather([w.rendezvous.remote({**job, **rank})
                for w, rank in zip(self.workers, ranks)], self.nodes)
        # The user's class is built on every worker: a worker that dies doing so is named.
        gather([w.start_executable.remote(executable_cls, args, kwargs)
                for w in self.workers], self.nodes)

    def _visible_devices(self):
        """Every worker of a node sees every GPU Ray gave that node's workers (as in
        Horovod), so that ``hvd.local_rank()`` picks its own and peers can reach theirs."""
        by_node = {}
        for node in self.nodes:
            by_node.setdefault(node["node_id"], []).extend(node["gpu_ids"])
        visible = {node: ",".join(sorted(set(ids))) for node, ids in by_node.items()}
        return [{"CUDA_VISIBLE_DEVICES": visible[n["node_id"]]} for n in self.nodes]

    def execute(self, fn):
        """``fn(executable)`` on every worker; the results in rank order."""
        self._assert_started()
        return gather([w.execute.remote(fn) for w in self.workers], self.nodes)

    def run(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every worker; the results in rank order. A rank
        that fails (its function raised, or its worker died) raises WorkerFailedError
        naming it, its node and Ray's error.

        In an elastic job, ``fn`` runs on a worker of every slot of Ray's nodes (as
        ``hvd.elastic.run`` trains under ``hvdrun --elastic``) and the results are those
        of the last round's ranks; WorkerFailedError names a rank whose error no new
        round cures."""
        if self.elastic:
            if self.extra_env_vars is None:
                raise RuntimeError("RayExecutor: call start() first (or after shutdown())")
            return ElasticJob(self.elastic, self.settings, self.resources, fn, args, kwargs,
                              self.extra_env_vars).run()
        return gather(self.run_remote(fn, args, kwargs), self.nodes)

    def run_remote(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every worker, without waiting: Ray object refs in
        rank order."""
        self._assert_started()
        args, kwargs = list(args or ()), dict(kwargs or {})
        return [w.run.remote(fn, args, kwargs) for w in self.workers]

    def execute_single(self, fn):
        """``fn(executable)`` on rank 0 alone."""
        self._assert_started()
        return gather([self.workers[0].execute.remote(fn)], self.nodes[:1])[0]

    def _assert_started(self):
        if self.elastic:
            raise NotImplementedError(
                "RayExecutor: an elastic job runs functions with run() alone: its ranks "
                "change from round to round")
        if not self.nodes:
            raise RuntimeError("RayExecutor: call start() first (or after shutdown())")

    def shutdown(self):
        """Kills every worker (whatever it is running) and frees the placement group."""
        for worker in self.workers:
            ray.kill(worker, no_restart=True)
        self.workers, self.nodes = [], []
        self.extra_env_vars = None
        if self.placement:
            self.placement.release()


def _elastic_settings(num_workers, num_hosts, elastic):
    """The elastic job's settings from Horovod's arguments, None for a job of fixed size."""
    given = {k: v for k, v in elastic.items() if v is not None}
    if given.pop("override_discovery", True) is False:
        raise ValueError("RayExecutor: an elastic job on Ray finds its hosts in Ray's "
                         "alive nodes; override_discovery=False is not supported")
    if not given:
        return None
    if num_workers is not None or num_hosts is not None:
        raise ValueError("RayExecutor: an elastic job (min_workers, max_workers) has no "
                         "num_workers or num_hosts: its size follows Ray's nodes")
    if "min_workers" not in given:
        raise ValueError("RayExecutor: an elastic job needs min_workers")
    return ElasticSettings(**given)
