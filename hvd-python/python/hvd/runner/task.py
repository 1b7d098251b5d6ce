"""One rank of an ``hvd.run`` job (``python -m hvd.runner.task TASK DIR``): loads the
function, calls it, and gathers every rank's return value through the job, so that the
launcher's host gets them all (``DIR`` exists there; other hosts may not have it)."""

import os
import pickle
import sys

RESULTS = "results.pkl"


def results(directory):
    """The ranks' return values, in rank order, as the job left them in ``directory``."""
    with open(os.path.join(directory, RESULTS), "rb") as f:
        return pickle.load(f)


def main(task, directory):
    import cloudpickle

    from hvd.common import basics, ops

    with open(task, "rb") as f:
        func, args, kwargs = cloudpickle.load(f)
    value = cloudpickle.dumps(func(*args, **kwargs))
    # The job may have been shut down by the function: every rank starts it again alike.
    basics.init()
    values = [pickle.loads(v) for v in ops.allgather_bytes(value, "hvd.run.results")]
    if os.path.isdir(directory):
        mine = os.path.join(directory, f"{RESULTS}.{basics.rank()}")
        with open(mine, "wb") as f:
            pickle.dump(values, f)
        os.replace(mine, os.path.join(directory, RESULTS))


if __name__ == "__main__":
    main(*sys.argv[1:3])
