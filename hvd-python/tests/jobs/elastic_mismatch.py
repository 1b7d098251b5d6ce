"""An elastic job whose ranks submit different shapes: a bug, which ends the job without
a new round."""

import torch

import hvd.torch as hvd

hvd.init()
state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=0)


@hvd.elastic.run
def train(state):
    hvd.allreduce(torch.zeros(1 + hvd.rank()), name="grad")


train(state)
