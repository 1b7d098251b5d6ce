"""The driver's view of a job on Ray: every rank's result, or one error that names the
rank that failed first, its node and Ray's own error, as hvdrun's summary does."""

import ray
from ray.exceptions import RayActorError, RayTaskError

# How long, after the first failure, the driver waits for the other ranks' outcomes to
# tell the root cause from the ranks that failed because they lost it (hvd's transports
# see a dead peer's sockets close at once, so they fail within this).
GRACE_S = 5.0


class WorkerFailedError(RuntimeError):
    """A rank of the job failed: ``rank``, ``node`` (the address of its Ray node) and
    ``cause`` (Ray's error: ``RayActorError`` when the worker died, ``RayTaskError``
    when the function raised, or for a rank still running when its peers lost it, the
    first peer's)."""

    def __init__(self, message, rank, node, cause):
        super().__init__(message)
        self.rank = rank
        self.node = node
        self.cause = cause


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _lost_a_peer(error):
    # hvd marks the errors of a rank that lost a peer (dead, silent or shut down) as
    # ``recoverable``, the ones an elastic job survives.
    return isinstance(error, RayTaskError) and getattr(error.cause, "recoverable", False)


def describe(error):
    """``died: <Ray's reason>`` for a worker whose actor died, ``failed: <error>`` for a
    function that raised."""
    if isinstance(error, RayActorError):
        # Ray's first line, and its sentence on why the actor is dead.
        lines = str(error).splitlines()
        why = [line.split(". ")[0].rstrip(".") + "." for line in lines
               if line.startswith("The actor is dead")]
        return "died: " + " ".join([_first_line(error), *why[:1]])
    cause = error.cause if isinstance(error, RayTaskError) else error
    return f"failed: {type(cause).__name__}: {_first_line(cause)}"


def _ranks(ranks, verb):
    """``rank 0 {verb}s``, ``ranks 0, 2 {verb}``."""
    if len(ranks) == 1:
        return f"rank {ranks[0]} {verb}"
    return f"ranks {', '.join(map(str, ranks))} {verb}"


def blame(errors, nodes, running=()):
    """The error to raise for ``errors`` (rank -> Ray's exception, in the order they
    came): the first rank that died, else the first that failed other than by losing a
    peer, else the first rank still ``running`` (the one its peers lost: frozen or
    stuck), else the first; ``nodes`` gives each rank's node address (``ip``) and
    process (``pid``)."""
    order = list(errors)
    died = [r for r in order if isinstance(errors[r], RayActorError)]
    own = [r for r in order if not _lost_a_peer(errors[r])]
    rank = (died or own or list(running) or order)[0]
    node = nodes[rank]
    where = f"hvd.ray: rank {rank} (pid {node['pid']}) on node {node['ip']}"
    if rank in errors:
        cause = errors[rank]
        message = f"{where} {describe(cause).rstrip('.')}"
    else:
        cause = errors[order[0]]
        message = (f"{where} was still running when its peers lost it: frozen, stopped "
                   "or stuck?")
    others = [r for r in sorted(errors) if r != rank]
    lost = [r for r in others if _lost_a_peer(errors[r])]
    if lost:
        message += f"; {_ranks(lost, 'failed on losing a peer')}"
    if len(lost) < len(others):
        message += f"; {_ranks([r for r in others if r not in lost], 'failed too')}"
    return WorkerFailedError(message, rank, node["ip"], cause)


def gather(refs, nodes, grace_s=GRACE_S):
    """The results of ``refs`` (one per rank, in rank order), or ``blame``'s error once a
    rank fails (after up to ``grace_s`` for the others to report)."""
    rank_of = {ref: rank for rank, ref in enumerate(refs)}
    results, errors = {}, {}
    pending = list(refs)

    def collect(ready):
        for ref in ready:
            try:
                results[rank_of[ref]] = ray.get(ref)
            except (RayActorError, RayTaskError) as e:
                errors[rank_of[ref]] = e

    while pending and not errors:
        ready, pending = ray.wait(pending, num_returns=1)
        collect(ready)
    if errors:
        if pending:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=grace_s)
            collect(ready)
        error = blame(errors, nodes, sorted(rank_of[ref] for ref in pending))
        raise error from error.cause
    return [results[rank] for rank in range(len(refs))]
