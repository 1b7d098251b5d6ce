"""An elastic PyTorch job: linear regression by SGD with momentum (so the optimizer has
state to keep), a fixed global batch whatever the job's size, a commit every 2 steps.
TorchState holds the model, the optimizer, the ElasticSampler and the log of every
example committed. ``ELASTIC_FAULT=kill-host:<host>:<step>`` kills that host's workers
after backward at that step, so the survivors fail inside ``optimizer.synchronize``;
``ELASTIC_STEP_MS`` slows the steps (until the file ``ELASTIC_SLOW_UNTIL`` names exists,
when it is set: a test's change of hosts lands mid-job on a loaded machine). Every reset callback appends the new size to
``ELASTIC_OUT/resets``. Rank 0 of the last round writes the final state to
``ELASTIC_OUT/final.json``; every worker appends how it ended to ``ELASTIC_OUT/workers``.
Run by test_elastic.py, which also computes the one-process reference with
``reference()``."""

import json
import os
import signal
import sys
import time

import torch

import hvd.torch as hvd

EXAMPLES = 480
GLOBAL_BATCH = 48
EPOCHS = 2
COMMIT_EVERY = 2
SEED = 5


def data():
    generator = torch.Generator().manual_seed(1234)
    x = torch.randn(EXAMPLES, 8, generator=generator, dtype=torch.float64)
    w = torch.arange(8, dtype=torch.float64) - 3.5
    return x, x @ w + 0.01 * torch.randn(EXAMPLES, generator=generator, dtype=torch.float64)


def model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1, bias=False).double()
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def order(epoch):
    generator = torch.Generator()
    generator.manual_seed(SEED + epoch)
    return torch.randperm(EXAMPLES, generator=generator).tolist()


def reference():
    """The weights the same job reaches in one process."""
    x, y = data()
    model, optimizer = model_and_optimizer()
    for epoch in range(EPOCHS):
        seen = order(epoch)
        for start in range(0, EXAMPLES, GLOBAL_BATCH):
            batch = seen[start:start + GLOBAL_BATCH]
            optimizer.zero_grad()
            loss = ((model(x[batch]).squeeze(1) - y[batch]) ** 2).mean()
            loss.backward()
            optimizer.step()
    return model.weight.detach().flatten().tolist()


def append(name, line):
    with open(os.path.join(os.environ["ELASTIC_OUT"], name), "a") as f:
        f.write(line + "\n")


def main():
    hvd.init()
    x, y = data()
    dataset = torch.utils.data.TensorDataset(x, y)
    model, optimizer = model_and_optimizer()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=SEED)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, steps=0,
                                   log=[])
    host = os.environ.get("HVD_HOSTNAME", "")
    state.register_reset_callbacks([lambda: append("resets", f"{hvd.size()} {host}")])
    fault = os.environ.get("ELASTIC_FAULT", "")
    pause = float(os.environ.get("ELASTIC_STEP_MS", "0")) / 1000
    slow_until = os.environ.get("ELASTIC_SLOW_UNTIL")
    executed = [0]

    @hvd.elastic.run
    def train(state):
        append("rounds", f"{hvd.size()} {hvd.rank()} {state.steps}")
        while state.epoch < EPOCHS:
            local = GLOBAL_BATCH // hvd.size()
            loader = torch.utils.data.DataLoader(dataset, batch_size=local,
                                                 sampler=state.sampler)
            for idx, (xb, yb) in enumerate(loader):
                if not (slow_until and os.path.exists(slow_until)):
                    time.sleep(pause)
                start = state.sampler.processed
                optimizer.zero_grad()
                loss = ((model(xb).squeeze(1) - yb) ** 2).mean()
                loss.backward()
                if fault == f"kill-host:{host}:{state.steps}":
                    os.kill(os.getpid(), signal.SIGKILL)
                optimizer.step()
                state.sampler.record_batch(idx, local)
                state.log.extend(order(state.epoch)[start:state.sampler.processed])
                state.steps += 1
                executed[0] += 1
                if state.steps % COMMIT_EVERY == 0:
                    state.commit()
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)
            state.commit()
        return hvd.rank()

    rank = train(state)
    if rank is None:
        append("workers", f"{host} removed executed {executed[0]}")
        return
    if rank == 0:
        with open(os.path.join(os.environ["ELASTIC_OUT"], "final.json"), "w") as f:
            json.dump({"w": model.weight.detach().flatten().tolist(), "log": state.log,
                       "steps": state.steps}, f)
    append("workers", f"{host} finished executed {executed[0]}")


if __name__ == "__main__":
    sys.exit(main())
