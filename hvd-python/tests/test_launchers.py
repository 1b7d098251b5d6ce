"""Horovod's MNIST recipe (examples/pytorch/train_mnist.py, its import changed to hvd's)
trains under each launcher a Horovod user has: hvdrun, mpirun and torchrun. Two ranks
on the synthetic stand-in, one epoch: every launcher must give the same test loss and
accuracy (the job is deterministic and a sum of two is the same either way round), and
the model must have learnt."""
import os
import re
import subprocess
import sys

import pytest

from conftest import MPIRUN_ENV, two_ranks

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch",
                       "train_mnist.py")
ARGS = ["--epochs", "1", "--synthetic", "--synthetic-size", "6000", "--lr", "0.1",
        "--log-interval", "1000"]
RESULT = re.compile(r"Test set: Average loss: ([0-9.]+), Accuracy: ([0-9.]+)%")


LAUNCHERS = {
    "hvdrun": lambda: two_ranks("hvdrun"),
    "mpirun": lambda: two_ranks("mpirun"),
    # torchrun runs the script with its own Python.
    "torchrun": lambda: [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
                         "2"],
}


def train(launcher):
    command = [*LAUNCHERS[launcher](), EXAMPLE, *ARGS]
    env = {**os.environ, **MPIRUN_ENV}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{launcher} failed:\n{output}"
    # Each rank trains on its half: the sampler saw two replicas.
    assert "Train Epoch: 1 [0/3000 (0%)]" in output, output
    assert "Warning" not in output, output
    results = RESULT.findall(output)
    assert len(results) == 1, f"expected one test line from rank 0:\n{output}"
    return tuple(float(v) for v in results[0])


@pytest.fixture(scope="module")
def under_hvdrun():
    return train("hvdrun")


def test_recipe_learns_under_hvdrun(under_hvdrun):
    loss, accuracy = under_hvdrun
    assert accuracy >= 50.0 and loss < 2.0, under_hvdrun


@pytest.mark.parametrize("launcher", ["mpirun", "torchrun"])
def test_recipe_trains_the_same_under(launcher, under_hvdrun):
    assert train(launcher) == under_hvdrun



REINIT = """
import torch
import hvd.torch as hvd
for start in range(3):
    hvd.init()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == hvd.size()
    hvd.shutdown()
print("three starts")
"""


def test_init_after_shutdown_under_torchrun(tmp_path):
    # Rank 0 serves the store on MASTER_PORT; started again, it must serve the same one
    # (its first server still listens there) instead of failing on its own port.
    script = tmp_path / "reinit.py"
    script.write_text(REINIT)
    done = subprocess.run([*LAUNCHERS["torchrun"](), str(script)], capture_output=True,
                          text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert output.count("three starts") == 2, output
