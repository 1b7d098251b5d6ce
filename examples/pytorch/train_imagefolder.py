"""A Horovod-style PyTorch recipe that trains on a folder of JPEGs through hvd's own
input pipeline (``hvd.torch.data.DataLoader``) instead of torchvision's.

    hvdrun -np 2 python examples/pytorch/train_imagefolder.py --data-dir photos/train \\
        --val-dir photos/val --epochs 5

``--data-dir`` is an ImageFolder: one sub-folder per class (sorted names are labels 0,
1, ...), ``.jpg``/``.jpeg`` files in each. The native loader decodes and augments them
(random resized crop, flip) on its own threads; every rank gets its share of each step,
and every image is seen once per epoch across the ranks, reshuffled each epoch by
``set_epoch``. The model is a small CNN, so the recipe runs on CPUs; swap in your own.

After each epoch rank 0 prints one line: the epoch's mean training loss and accuracy
over all ranks, images a second, how many images each rank trained on (and how many
distinct images they were together: the folder's count), and the input
pipeline's verdict (``hvd.torch.data.instrument``): how much of the epoch the job lost
waiting for some rank's data, and which rank. With ``--val-dir`` it also prints the
validation loss and accuracy (centre crops, in order).
"""
import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import hvd.torch as hvd


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="training ImageFolder of JPEGs")
    p.add_argument("--val-dir", help="validation ImageFolder (same classes)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32, help="images per rank and step")
    p.add_argument("--image-size", type=int, default=64, help="side of the crops trained on")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate for one rank")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--threads", type=int, default=None,
                   help="decode threads per rank (default: chosen and tuned by the loader)")
    return p.parse_args()


def count_classes(root):
    if not os.path.isdir(root):
        raise SystemExit(f"{root}: no such folder (expected {root}/<class>/<image>.jpg)")
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    if not classes:
        raise SystemExit(f"{root}: no class folders (expected {root}/<class>/<image>.jpg)")
    return len(classes)


class Net(nn.Module):
    """Three strided convolutions and a global average: small enough for CPUs, and any
    image size fits."""

    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.features(x))


def summed(values, name):
    """The sum over the ranks of this rank's ``values`` (float64)."""
    return hvd.allreduce(torch.tensor(values, dtype=torch.float64), op=hvd.Sum, name=name)


def train_epoch(epoch, model, optimizer, loader):
    model.train()
    loader.set_epoch(epoch)
    loss_sum, correct, seen, indices = 0.0, 0, 0, []
    started = time.perf_counter()
    for images, labels in loader:
        optimizer.zero_grad()
        output = model(images)
        loss = F.cross_entropy(output, labels)
        loss.backward()
        optimizer.step()
        loss_sum += loss.item() * len(labels)
        correct += (output.argmax(1) == labels).sum().item()
        seen += len(labels)
        indices += loader.indices  # the samples of this batch, as the loader numbers them
    seconds = time.perf_counter() - started
    total_loss, total_correct, total = summed([loss_sum, correct, seen], "train.metrics").tolist()
    # Which images each rank trained on: none twice across the ranks, whatever their number.
    everyone = sum(hvd.allgather_object(indices, name="train.indices"), [])
    per_rank = hvd.allgather_object(seen, name="train.seen")
    return {"loss": total_loss / total, "accuracy": total_correct / total,
            "images_per_s": total / seconds, "per_rank": per_rank,
            "distinct": len(set(everyone)), "repeated": len(everyone) - len(set(everyone)),
            "stall": loader.report["line"]}


def evaluate(model, loader):
    model.eval()
    loss_sum, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for images, labels in loader:
            output = model(images)
            loss_sum += F.cross_entropy(output, labels, reduction="sum").item()
            correct += (output.argmax(1) == labels).sum().item()
            seen += len(labels)
    total_loss, total_correct, total = summed([loss_sum, correct, seen], "val.metrics").tolist()
    return total_loss / total, total_correct / total


def main():
    args = parse_args()
    hvd.init()
    # Horovod: one compute thread a rank, so ranks sharing a host do not oversubscribe it;
    # the loader's decode threads take the rest.
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    classes = count_classes(args.data_dir)

    loader = hvd.data.DataLoader(args.data_dir, image_size=args.image_size,
                                 batch_size=args.batch_size, shuffle_seed=args.seed,
                                 seed=args.seed, threads=args.threads)
    # Times each step and says, at the end of each epoch, whether the job was data-bound.
    train_loader = hvd.data.instrument(loader, log=False)
    val_loader = None
    if args.val_dir:
        val_loader = hvd.data.DataLoader(args.val_dir, image_size=args.image_size,
                                         batch_size=args.batch_size, train=False,
                                         shuffle_seed=None, threads=args.threads)

    model = Net(classes)
    # Horovod: scale the learning rate by the number of ranks (the global batch grows).
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    # Horovod: every rank starts from rank 0's weights and optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    for epoch in range(args.epochs):
        r = train_epoch(epoch, model, optimizer, train_loader)
        line = (f"epoch {epoch + 1}/{args.epochs}  loss {r['loss']:.4f}  "
                f"accuracy {100 * r['accuracy']:.2f}%  {r['images_per_s']:.0f} images/s  "
                f"images per rank {r['per_rank']} ({r['distinct']} distinct)")
        if val_loader is not None:
            val_loss, val_accuracy = evaluate(model, val_loader)
            line += f"  val loss {val_loss:.4f}  val accuracy {100 * val_accuracy:.2f}%"
        if hvd.rank() == 0:
            print(line, flush=True)
            print(f"  input: {r['stall']}", flush=True)
        if r["repeated"]:
            raise SystemExit(f"rank {hvd.rank()}: epoch {epoch + 1} trained on "
                             f"{r['repeated']} images more than once")


if __name__ == "__main__":
    main()
