"""One rank's PyTorch DataLoader for `hvd-bench data-gap`, driven over stdin/stdout.

The benchmark's rank (a Rust process) asks for each batch with `next` and this process
answers `batch N` once the DataLoader handed it one: the DataLoader's own workers and
prefetch, not a pipe buffer, decide how far ahead it works. `epoch E` starts an epoch.
"""

import sys

import torch
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms


def main():
    root, rank, size, batch, workers, prefetch, seed = sys.argv[1:8]
    rank, size, batch = int(rank), int(size), int(batch)
    workers, prefetch, seed = int(workers), int(prefetch), int(seed)
    # The main process only collates and hands over; the workers decode.
    torch.set_num_threads(1)
    augment = transforms.Compose(
        [
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )
    dataset = datasets.ImageFolder(root, augment)
    sampler = DistributedSampler(dataset, num_replicas=size, rank=rank, shuffle=True, seed=seed)
    loader = DataLoader(
        dataset,
        batch_size=batch,
        sampler=sampler,
        num_workers=workers,
        prefetch_factor=prefetch,
        persistent_workers=True,
    )
    print(f"ready {len(dataset)}", flush=True)
    batches = None
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["epoch"]:
            sampler.set_epoch(int(words[1]))
            batches = iter(loader)
            print("ok", flush=True)
        elif words[:1] == ["next"] and batches is not None:
            images, _labels = next(batches)
            print(f"batch {images.shape[0]}", flush=True)
        elif words[:1] == ["quit"]:
            break
        else:
            print(f"error: unknown request {line.strip()!r}", flush=True)


if __name__ == "__main__":
    main()
