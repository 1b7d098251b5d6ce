"""Horovod's SyncBatchNorm: batch normalisation whose statistics are those of the whole
job's batch, on CPU and CUDA tensors alike."""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from hvd.common.basics import size
from hvd.torch.mpi_ops import Sum, allreduce


def _per_channel(x):
    """``x`` (N, C, ...) as (C, everything else), for sums per channel."""
    return x.transpose(0, 1).reshape(x.shape[1], -1)


class SyncBatchNorm(_BatchNorm):
    """Applies batch normalisation over the batches of every rank together.

    In training, the mean and variance of each channel are those of the job's whole
    batch: every rank's count, sum and sum of squares are summed with one allreduce
    (accumulated in f64), so each rank's output, running statistics and input gradients
    are what one process would compute on the concatenated batch. The weight and bias
    gradients are this rank's, which DistributedOptimizer then averages. In evaluation
    with running statistics, each rank normalises alone.

    Arguments are torch's ``BatchNorm``'s: ``num_features`` (C of an (N, C, ...) input),
    ``eps``, ``momentum`` (None: cumulative average), ``affine``,
    ``track_running_stats``.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _momentum(self):
        if self.momentum is not None:
            return self.momentum
        # A cumulative moving average, as torch's BatchNorm with momentum=None.
        return 1.0 / float(self.num_batches_tracked)

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
        if not self.training and self.track_running_stats:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, False, 0.0, self.eps)
        if size() == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, True, self._momentum() if
                                self.track_running_stats else 0.0, self.eps)
        running = (self.running_mean, self.running_var, self._momentum()) \
            if self.track_running_stats else None
        return _SyncBatchNorm.apply(input, self.weight, self.bias, running, self.eps)


class _SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running, eps):
        x = _per_channel(input).double()
        local = torch.cat([torch.tensor([float(x.shape[1])], dtype=torch.float64),
                           x.sum(1), (x * x).sum(1)])
        total = allreduce(local, op=Sum, name=None)
        channels = input.shape[1]
        count = total[0]
        mean = total[1:1 + channels] / count
        var = (total[1 + channels:] / count - mean * mean).clamp_min(0)
        if running is not None:
            running_mean, running_var, momentum = running
            unbiased = var * count / max(float(count) - 1, 1.0)
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype) * momentum)
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
        invstd = (var + eps).rsqrt()
        shape = [1, channels] + [1] * (input.dim() - 2)
        dtype = input.dtype
        xhat = (input - mean.to(dtype).view(shape)) * invstd.to(dtype).view(shape)
        ctx.save_for_backward(xhat, weight, invstd.to(dtype), count)
        out = xhat if weight is None else xhat * weight.view(shape)
        return out if bias is None else out + bias.view(shape)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, weight, invstd, count = ctx.saved_tensors
        channels = grad_output.shape[1]
        shape = [1, channels] + [1] * (grad_output.dim() - 2)
        dy = _per_channel(grad_output)
        sum_dy = dy.sum(1)
        sum_dy_xhat = (dy * _per_channel(xhat)).sum(1)
        grad_weight = sum_dy_xhat if weight is not None and ctx.needs_input_grad[1] else None
        grad_bias = sum_dy if ctx.needs_input_grad[2] else None
        grad_input = None
        if ctx.needs_input_grad[0]:
            sums = allreduce(torch.cat([sum_dy, sum_dy_xhat]).double(), op=Sum, name=None)
            mean_dy = (sums[:channels] / count).to(grad_output.dtype)
            mean_dy_xhat = (sums[channels:] / count).to(grad_output.dtype)
            scale = invstd if weight is None else invstd * weight
            grad_input = scale.view(shape) * (grad_output - mean_dy.view(shape)
                                              - xhat * mean_dy_xhat.view(shape))
        return grad_input, grad_weight, grad_bias, None, None
