"""The ImageFolder recipe (examples/pytorch/train_imagefolder.py) trains on a folder of
JPEGs through hvd's native loader, two ranks under hvdrun: each rank trains on its half
of every epoch, no image twice, and the model learns an easy three-class folder."""
import os
import re
import subprocess

import numpy as np
import pytest

from conftest import two_ranks

try:
    from PIL import Image
except ImportError:
    # Pillow writes the test's JPEGs; CI installs it, a local environment may lack it.
    if os.environ.get("CI"):
        raise
    pytest.skip("Pillow is not installed (pip install pillow): it writes the test's JPEGs",
                allow_module_level=True)

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch",
                       "train_imagefolder.py")
CLASSES = ("blue", "green", "red")  # sorted: labels 0, 1, 2
TRAIN, VAL, SIDE, EPOCHS = 24, 8, 32, 4
EPOCH = re.compile(r"epoch (\d+)/\d+  loss ([0-9.]+)  accuracy ([0-9.]+)%  \d+ images/s  "
                   r"images per rank \[(\d+), (\d+)\] \((\d+) distinct\)  "
                   r"val loss ([0-9.]+)  val accuracy ([0-9.]+)%")


def write_folder(root, per_class, seed):
    """`per_class` noisy JPEGs a class, each mostly its class's colour at a random
    brightness: learnable in a few steps, but not from one pixel."""
    rng = np.random.default_rng(seed)
    for name in CLASSES:
        channel = {"red": 0, "green": 1, "blue": 2}[name]
        os.makedirs(os.path.join(root, name))
        for i in range(per_class):
            image = rng.uniform(0, 120, (SIDE, SIDE, 3))
            image[..., channel] += rng.uniform(80, 135)
            pixels = image.clip(0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(os.path.join(root, name, f"{i:03}.jpg"), quality=90)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    data = tmp_path_factory.mktemp("imagefolder")
    write_folder(data / "train", TRAIN, seed=1)
    write_folder(data / "val", VAL, seed=2)
    command = [*two_ranks("hvdrun"), EXAMPLE, "--data-dir", str(data / "train"),
               "--val-dir", str(data / "val"), "--epochs", str(EPOCHS), "--batch-size", "8",
               "--image-size", str(SIDE), "--lr", "0.05", "--threads", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    epochs = EPOCH.findall(output)
    assert len(epochs) == EPOCHS, f"expected one line an epoch from rank 0:\n{output}"
    return epochs, output


def test_every_rank_trains_on_its_half_once_per_epoch(trained):
    epochs, output = trained
    images = TRAIN * len(CLASSES)
    for epoch, _, _, first, second, distinct, _, _ in epochs:
        assert (int(first), int(second), int(distinct)) == (images // 2, images // 2, images), \
            output
    # Rank 0's verdict on the input pipeline, once an epoch.
    assert output.count("  input: ") == EPOCHS, output


def test_the_model_learns_the_folder(trained):
    epochs, output = trained
    losses = [float(e[1]) for e in epochs]
    val_accuracy = float(epochs[-1][7])
    assert all(np.isfinite(losses)), output
    assert losses[-1] < losses[0], output
    assert val_accuracy >= 80.0, output  # chance is 33 %
