"""Elastic jobs on Ray. The driver plays the part hvdrun's elastic supervisor plays
(see hvdrun's ``elastic`` module): it serves the job's store, starts a worker (a Ray
actor) on every slot of Ray's alive nodes, forms the rendezvous rounds and judges the
failed ones, through the same protocol (``hvd._hvd.ElasticRounds``). The workers run
the user's function as hvdrun's workers run a script: under ``hvd.elastic.run``, with
the same commits, restores and reset callbacks, so no sample is lost or repeated.

A node that dies fails its round; the survivors go back to their last commit and the
next round is formed without it (its node kept out). A node that joins gets workers,
and the round's members leave at their next commit to take them in."""

import secrets
import sys
import time
from dataclasses import dataclass
from typing import Optional, Tuple

import ray
from ray.exceptions import RayActorError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from hvd import _hvd
from hvd.ray.discovery import Blacklist, alive_hosts
from hvd.ray.failure import WorkerFailedError, describe
from hvd.ray.worker import Worker

POLL_S = 0.05
# How long after a round's first failure the driver waits for the other members'
# reports before it judges (peers of a dead worker fail within milliseconds).
SETTLE_S = 1.0
# Changes this close together (workers started, nodes found) make one round.
JOIN_WINDOW_S = 0.5
DISCOVERY_INTERVAL_S = 1.0
# How much longer than the elastic timeout a worker waits for a round: the driver,
# which knows why none comes, ends the job first.
WORKER_PATIENCE_S = 30


@dataclass
class ElasticSettings:
    """Horovod's elastic arguments of ``RayExecutor``: at least ``min_workers``, at most
    ``max_workers`` (else as many as the nodes have slots); at most ``reset_limit`` new
    rounds; a failed node kept out for good, or for ``cooldown_range=(least, most)``
    seconds, doubling; ``elastic_timeout`` seconds below ``min_workers`` before the job
    fails."""
    min_workers: int
    max_workers: Optional[int] = None
    reset_limit: Optional[int] = None
    cooldown_range: Optional[Tuple[float, float]] = None
    elastic_timeout: float = 600

    def __post_init__(self):
        if self.min_workers is None or self.min_workers < 1:
            raise ValueError(f"RayExecutor: min_workers must be 1 or more; got "
                             f"{self.min_workers}")
        if self.max_workers is not None and self.max_workers < self.min_workers:
            raise ValueError(f"RayExecutor: max_workers ({self.max_workers}) is below "
                             f"min_workers ({self.min_workers})")


class _Worker:
    """One actor on one slot of one node: ``key`` (``node:slot.N``, N counting the
    slot's workers) names it in the store for as long as it lives."""

    def __init__(self, key, slot, host, actor, ref):
        self.key, self.slot, self.host, self.actor, self.ref = key, slot, host, actor, ref
        self.done, self.result, self.error = False, None, None

    @property
    def alive(self):
        return not self.done

    @property
    def failed(self):
        return self.done and self.error is not None


class ElasticJob:
    """One run of ``fn(*args, **kwargs)`` on an elastic set of workers."""

    def __init__(self, elastic, settings, resources, fn, args, kwargs, extra_env):
        self.elastic = elastic
        self.settings = settings
        self.cpus, self.gpus = resources
        self.call = (fn, list(args or ()), dict(kwargs or {}))
        self.extra_env = dict(extra_env or {})
        self.secret = secrets.token_hex(16)
        self.rounds = _hvd.ElasticRounds(ray.util.get_node_ip_address(), self.secret)
        self.blacklist = Blacklist(elastic.cooldown_range)
        self.workers = []
        self.hosts = []
        self.members = []
        self.phase = "forming"
        self.failed_at = self.forming_since = self.changed_at = time.monotonic()
        self.below_min_since = None
        self.discovered_at = -float("inf")
        self.resets = 0

    @property
    def max_workers(self):
        return self.elastic.max_workers or sys.maxsize

    def say(self, message):
        print(f"hvd.ray: {message}", file=sys.stderr, flush=True)

    def run(self):
        """The results of the last round's ranks, in rank order; WorkerFailedError for
        an error no round cures, TimeoutError or RuntimeError when the job cannot go
        on."""
        try:
            while True:
                self.reap()
                self.check_fatal()
                self.rediscover()
                if self.phase == "running":
                    members = [self.workers[m] for m in self.members]
                    if all(w.done and not w.failed for w in members):
                        return [w.result for w in members]
                    if self.round_failed():
                        self.phase, self.failed_at = "failing", time.monotonic()
                    elif all(self.left(m) for m in self.members):
                        self.forming()
                elif self.phase == "failing":
                    settled = time.monotonic() - self.failed_at >= SETTLE_S
                    if settled or all(self.left(m) for m in self.members):
                        self.blame()
                        self.forming()
                else:
                    self.form()
                time.sleep(POLL_S)
        finally:
            self.stop()

    def forming(self):
        self.phase = "forming"
        self.forming_since = self.changed_at = time.monotonic()

    def reap(self):
        """Notes the workers whose function returned, raised, or whose actor died. One
        that failed outside the current round (it could not join) charges its node, as
        a member's failure would."""
        running = {w.ref: w for w in self.workers if w.alive}
        if not running:
            return
        ready, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
        for ref in ready:
            worker = running[ref]
            try:
                worker.result = ray.get(ref)
            except RayError as e:
                # Its function raised (RayTaskError), its actor died or could never be
                # placed (its node gone first).
                worker.error = e
            worker.done = True
            index = self.workers.index(worker)
            if worker.failed and index not in self.members \
                    and not self.blacklist.blocks(worker.host.node_id):
                self.charge(worker.host, f"worker {worker.slot} on node {worker.host.ip} "
                            f"{describe(worker.error)} before joining a round")

    def rank_of(self, worker):
        index = self.workers.index(worker)
        return self.members.index(index) if index in self.members else None

    def check_fatal(self):
        """Ends the job on an error a worker reported that no new round cures."""
        for worker in self.workers:
            message = self.rounds.fatal(worker.key)
            if message is None:
                continue
            # It raises once it has reported: its error is the cause.
            ray.wait([worker.ref], timeout=5)
            self.reap()
            rank = self.rank_of(worker)
            where = f"rank {rank} (worker {worker.slot})" if rank is not None \
                else f"worker {worker.slot}"
            raise WorkerFailedError(
                f"hvd.ray: {where} on node {worker.host.ip} failed with an error no new "
                f"round can cure, which ends the job: {message}",
                rank, worker.host.ip, worker.error)

    def leaving(self, index):
        return self.rounds.leaving(self.rounds.round, self.workers[index].key)

    def left(self, index):
        """Whether a member is done with the current round: left it, or ended."""
        return self.workers[index].done or self.leaving(index) is not None

    def round_failed(self):
        round = self.rounds.round
        return any(self.workers[m].failed or self.leaving(m) == "failed"
                   or self.rounds.lost_by(round, rank) is not None
                   for rank, m in enumerate(self.members))

    def blame(self):
        """Judges the failed round: the worker that failed first is the one whose actor
        died (Ray knows), else the one the others said they lost (following a chain of
        losses), else one that neither failed nor left; its node alone is charged."""
        round = self.rounds.round
        workers = [self.workers[m] for m in self.members]
        died = [r for r, w in enumerate(workers) if isinstance(w.error, RayActorError)]
        lost = [self.rounds.lost_by(round, r) for r in range(len(workers))]
        named = next((r for r in lost if r is not None), None)
        seen = set()
        while named is not None and lost[named] is not None and named not in seen:
            seen.add(named)
            named = lost[named]
        silent = [r for r in range(len(workers)) if not self.left(self.members[r])]
        failed = [r for r, w in enumerate(workers) if w.failed]
        root = (died or ([named] if named is not None else []) or silent or failed
                or [0])[0]
        worker = workers[root]
        status = describe(worker.error) if worker.failed else \
            "stopped answering its peers (dead, frozen or cut off)"
        witnesses = [r for r, n in enumerate(lost) if n is not None]
        said = f"; rank(s) {', '.join(map(str, witnesses))} lost it" if witnesses else ""
        self.charge(worker.host, f"round {round} failed: rank {root} (worker "
                    f"{worker.slot}) on node {worker.host.ip} {status}{said}")

    def charge(self, host, why):
        cooldown = self.blacklist.charge(host.node_id)
        kept = "for the rest of the job" if cooldown == float("inf") else \
            f"for {cooldown:g}s"
        self.say(f"{why}; node {host.name} is kept out {kept}")
        for worker in self.workers:
            if worker.host.node_id == host.node_id and worker.alive:
                ray.kill(worker.actor, no_restart=True)

    def candidates(self):
        """The workers the next round may include: alive, on a node still listed and
        not kept out."""
        listed = {h.node_id for h in self.hosts}
        return [i for i, w in enumerate(self.workers)
                if w.alive and w.host.node_id in listed
                and not self.blacklist.blocks(w.host.node_id)]

    def form(self):
        """Forms the next round once every survivor has left the current one and enough
        workers are there."""
        now = time.monotonic()
        candidates = self.candidates()
        survivors = [m for m in self.members if m in candidates]
        waiting = [r for r, m in enumerate(self.members)
                   if m in survivors and self.leaving(m) is None]
        if waiting:
            if now - self.forming_since > self.settings.timeout_s:
                raise TimeoutError(
                    f"hvd.ray: rank(s) {', '.join(map(str, waiting))} of round "
                    f"{self.rounds.round} did not leave it within "
                    f"{self.settings.timeout_s}s for the next round: stuck?")
            return
        count = min(len(candidates), self.max_workers)
        if count < self.elastic.min_workers:
            self.below_min_since = self.below_min_since or now
            if now - self.below_min_since >= self.elastic.elastic_timeout:
                raise TimeoutError(self.too_few(count))
            return
        self.below_min_since = None
        if now - self.changed_at < JOIN_WINDOW_S:
            return
        if self.rounds.round > 0:
            self.resets += 1
            limit = self.elastic.reset_limit
            if limit is not None and self.resets > limit:
                raise RuntimeError(
                    f"hvd.ray: the job would need a new round (reset {self.resets}) after "
                    f"round {self.rounds.round}, more than reset_limit {limit} allows")
        newcomers = [c for c in candidates if c not in survivors]
        self.members = (survivors + newcomers)[:self.max_workers]
        chosen = [self.workers[m] for m in self.members]
        round = self.rounds.form([(w.key, w.host.node_id) for w in chosen])
        nodes = list(dict.fromkeys(w.host.name for w in chosen))
        self.say(f"round {round}: {len(chosen)} ranks on {len(nodes)} node(s): "
                 f"{', '.join(nodes)}")
        self.phase = "running"

    def too_few(self, count):
        states = []
        for host in self.hosts:
            alive = sum(1 for w in self.workers if w.host == host and w.alive)
            kept = " (kept out after a failure)" if self.blacklist.blocks(host.node_id) \
                else ""
            states.append(f"\n  {host.name} ({host.ip}): {host.slots} slot(s), {alive} "
                          f"worker(s) running{kept}")
        return (f"hvd.ray: only {count} worker(s) were available for "
                f"{self.elastic.elastic_timeout:g}s, fewer than min_workers "
                f"{self.elastic.min_workers}; Ray's nodes:{''.join(states) or ' none'}")

    def rediscover(self):
        """Asks Ray for its alive nodes when it is time: nodes gone are dropped (the
        current round told to leave at its next commit if it had workers there), and
        free slots get workers."""
        now = time.monotonic()
        if now - self.discovered_at < DISCOVERY_INTERVAL_S:
            return
        self.discovered_at = now
        found = alive_hosts(self.cpus, self.gpus)
        ids = {h.node_id for h in found}
        known = {h.node_id for h in self.hosts}
        removed = [h for h in self.hosts if h.node_id not in ids]
        added = [h for h in found if h.node_id not in known]
        if removed:
            self.say(f"node(s) {', '.join(h.name for h in removed)} gone from Ray")
            gone = {h.node_id for h in removed}
            if any(self.workers[m].host.node_id in gone for m in self.members):
                self.rounds.announce_update()
                self.changed_at = now
        if added and self.workers:
            self.say(f"node(s) {', '.join(h.name for h in added)} joined Ray")
        self.hosts = [h for h in self.hosts if h.node_id in ids] + added
        self.fill()

    def fill(self):
        """Starts a worker on each slot of the listed nodes not kept out that has none
        running and whose last one did not end well (up to ``max_workers`` running, the
        workers of nodes kept out, being stopped, not counted), and tells the current
        round, if any, to make room. A slot whose worker returned (the job's end, or no
        place in a round) gets no other."""
        blocked = self.blacklist.blocks
        running = sum(1 for w in self.workers if w.alive and not blocked(w.host.node_id))
        started = False
        for host in self.hosts:
            if blocked(host.node_id):
                continue
            for slot in range(host.slots):
                name = f"{host.name}:{slot}"
                if running >= self.max_workers or any(
                        not w.failed for w in self.workers if w.slot == name):
                    continue
                self.start_worker(host, name)
                running += 1
                started = True
        if started:
            self.changed_at = time.monotonic()
            if self.phase == "running":
                self.rounds.announce_update()

    def start_worker(self, host, slot):
        incarnation = sum(1 for w in self.workers if w.slot == slot)
        key = f"{slot}.{incarnation}"
        env = {
            **self.extra_env,
            "HVD_ELASTIC_WORKER": key,
            "HVD_ELASTIC_AFTER": str(self.rounds.round),
            "HVD_ELASTIC_TIMEOUT": str(self.elastic.elastic_timeout + WORKER_PATIENCE_S),
            "HVD_HOSTNAME": host.name,
            "HOROVOD_HOSTNAME": host.name,
            "HVD_STORE_ADDR": self.rounds.address,
            "HVD_SECRET": self.secret,
            "HVD_START_TIMEOUT": str(self.settings.timeout_s),
        }
        if self.settings.nics:
            env["HVD_IFACE"] = ",".join(sorted(self.settings.nics))
        actor = ray.remote(Worker).options(
            num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(host.node_id, soft=False),
        ).remote()
        # An actor runs its caller's calls in order: the variables are set first.
        actor.update_env_vars.remote(env)
        ref = actor.run.remote(*self.call)
        self.workers.append(_Worker(key, slot, host, actor, ref))

    def stop(self):
        for worker in self.workers:
            ray.kill(worker.actor, no_restart=True)
