"""hvd.torch.data.DataLoader over hvd's native loader: every sample once per epoch across
the ranks, tensors of the loader's own reused buffers (no copy), a small model trained
on it with DistributedOptimizer, and bad settings refused by name."""
import os

import numpy as np
import torch

import hvd.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
SAMPLES, BATCH, SIDE, THREADS, PREFETCH = 42, 4, 16, 2, 2

loader = hvd.data.DataLoader(synthetic=(SAMPLES, 24, 20, 3), image_size=SIDE,
                             batch_size=BATCH, threads=THREADS, prefetch=PREFETCH,
                             shuffle_seed=7)
steps = -(-SAMPLES // (BATCH * size))
assert len(loader) == steps, (len(loader), steps)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * SIDE * SIDE, 3))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                     named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)

pointers, orders = set(), []
for epoch in range(2):
    loader.set_epoch(epoch)
    seen, batches = [], 0
    for images, labels in hvd.data.instrument(loader, log=False):
        assert images.dtype == torch.float32 and labels.dtype == torch.int64
        assert images.shape[1:] == (3, SIDE, SIDE) and images.shape[0] == labels.shape[0]
        assert bool(torch.isfinite(images).all()) and bool(((0 <= labels) & (labels < 3)).all())
        pointers.add(images.data_ptr())
        seen += loader.indices
        batches += 1
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        assert torch.isfinite(loss)
    assert batches == steps, (batches, steps)
    everyone = sum(hvd.allgather_object(seen), [])
    assert sorted(everyone) == list(range(SAMPLES)), sorted(everyone)
    orders.append(everyone)
assert orders[0] != orders[1], "each epoch has its own shuffle"
# A rollback to a commit: a new loader loaded with the committed place goes on with
# exactly the batches the first one gave after it.
loader.set_epoch(5)
after_commit, committed = [], None
for step, _ in enumerate(loader):
    if step == 1:
        committed = loader.state_dict()
    elif step > 1:
        after_commit.append(list(loader.indices))
assert committed == {"epoch": 5, "consumed": 2 * BATCH * size}, committed
again = hvd.data.DataLoader(synthetic=(SAMPLES, 24, 20, 3), image_size=SIDE,
                            batch_size=BATCH, threads=1, shuffle_seed=7)
again.load_state_dict(committed)
assert [list(again.indices) for _ in again] == after_commit
# threads given: no tuning. A loader left to choose tunes itself after an epoch.
assert loader.tuning is None
# The tuning happens as an iteration starts, from the steps the previous one timed,
# even one left before its end (as Keras leaves tf.data's).
tuned = hvd.data.DataLoader(synthetic=(16, 24, 20, 3), image_size=SIDE, batch_size=BATCH)
for step, _ in enumerate(tuned):
    if step == len(tuned) - 1:
        break
assert tuned.tuning is None, "nothing was measured when the first iteration started"
assert sum(1 for _ in tuned) == 0, "the rest of the epoch: its last step was taken"
t = tuned.tuning
assert t is not None and 1 <= t["threads"] <= t["share"], t
assert t["prefetch"] >= 1 and t["capacity"] > 0 and t["demand"] > 0, t
assert t["priority"] == "10", t  # the default: 10 nice steps down, tuned or not
# The ranks split the host's cores between them (every rank of this job is on one host).
shares = hvd.allgather_object(t["share"])
assert sum(shares) <= max(len(os.sched_getaffinity(0)), hvd.local_size()), shares
# Every batch was a view of one of the loader's few buffers, not a copy of its own: one
# buffer each (threads + prefetch), and one more for the epoch's last batch, which the
# loop's variables still hold when the next epoch starts.
assert len(pointers) <= THREADS + PREFETCH + 1, pointers

# A dataset held in memory (MNIST's shape, small): grey bytes taken as they are, scaled
# to v / 255 and normalised, every sample once across the ranks, labels with their images.
N = 30
grey = np.arange(N * 8 * 8, dtype=np.int64).reshape(N, 8, 8).astype(np.uint8)
classes = np.arange(N) % 5
held = hvd.data.DataLoader(arrays=(grey, classes), batch_size=4, mean=0.5, std=0.25,
                           shuffle_seed=3, threads=1)
assert len(held) == -(-N // (4 * size)), len(held)
seen = []
for images, labels in held:
    assert images.shape[1:] == (1, 8, 8) and images.dtype == torch.float32, images.shape
    for k, i in enumerate(held.indices):
        expected = (torch.from_numpy(grey[i]).float() / 255 - 0.5) / 0.25
        assert torch.allclose(images[k, 0], expected), (i, images[k, 0], expected)
        assert int(labels[k]) == classes[i], (i, labels[k])
    seen += held.indices
assert sorted(sum(hvd.allgather_object(seen), [])) == list(range(N))
# float32 RGB as a torch tensor, channels last: channels first out, one mean and
# deviation a channel.
rgb = torch.rand(N, 6, 6, 3, generator=torch.Generator().manual_seed(1))
mean, std = torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1.0, 2.0, 4.0])
held = hvd.data.DataLoader(arrays=(rgb, list(range(N))), batch_size=3, mean=mean.tolist(),
                           std=std.tolist(), threads=2)
for images, labels in held:
    assert images.shape[1:] == (3, 6, 6), images.shape
    for k, i in enumerate(held.indices):
        expected = (rgb[i].permute(2, 0, 1) - mean[:, None, None]) / std[:, None, None]
        assert torch.allclose(images[k], expected), i
        assert int(labels[k]) == i
for bad, message in [
        (dict(arrays=(grey[:, :, :6], classes)), "8 x 6 images with image_size 8"),
        (dict(arrays=(grey, classes[:-1])), "and 29 labels are not 30 images of 8 x 8 x 1"),
        (dict(arrays=(grey.astype(np.int16), classes)), "format 'h': give uint8 or float32"),
        (dict(arrays=(grey, classes), image_size=28), "image_size 28"),
        (dict(arrays=(np.zeros((N, 8, 8, 4), np.uint8), classes)), "arrays of 4 channels"),
        (dict(arrays=(rgb, classes), mean=[0.1, 0.2]), "one value, or one a channel (3)"),
        (dict(arrays=(grey, classes), std=0.0), "std [0.0]: deviations must be above 0"),
        (dict(arrays=grey), "arrays is (images, labels)"),
        (dict(arrays=(grey, [0.5] * N)), "arrays' label 0.5: give one integer a sample"),
        (dict(synthetic=(8, 8, 8, 2), mean=0.5), "mean and std are for arrays"),
        (dict(synthetic=(8, 100000, 8, 2)), "synthetic images of 100000 x 8: at most 16384 a side")]:
    try:
        hvd.data.DataLoader(**bad)
    except ValueError as e:
        assert message in str(e), (message, str(e))
    else:
        raise AssertionError(f"{message}: accepted")

for bad, message in [(dict(batch_size=0), "batch_size 0"),
                     (dict(threads=0), "LoaderOptions::threads"),
                     (dict(timeout=-1), "timeout -1"),
                     (dict(timeout=1e20), "a number of seconds above 0, at most ten years"),
                     (dict(prefetch=10**12), "LoaderOptions::prefetch: 1000000000000: at most"),
                     (dict(priority=20), "priority nice 20: Linux's nice steps go from 0"),
                     (dict(priority=-1), 'priority "-1": expected auto, idle, or the nice'),
                     (dict(priority="low"), 'priority "low": expected auto, idle, or the'),
                     (dict(priority=1.5), "priority 1.5: expected \"auto\", \"idle\", or")]:
    try:
        hvd.data.DataLoader(synthetic=(8, 8, 8, 2), image_size=4, **bad)
    except ValueError as e:
        assert message in str(e), (message, str(e))
    else:
        raise AssertionError(f"{bad} was accepted")
for priority in ["idle", np.int64(3), 0]:
    lowered = hvd.data.DataLoader(synthetic=(8, 8, 8, 2), image_size=4, batch_size=2,
                                  priority=priority)
    assert sum(1 for _ in lowered) == len(lowered) == 8 // (2 * size), priority
try:
    hvd.data.DataLoader("/nonexistent/folder", image_size=4)
except RuntimeError as e:
    assert "/nonexistent/folder" in str(e), str(e)
else:
    raise AssertionError("a missing folder was accepted")
print(f"rank {rank}: data loader ok", flush=True)
