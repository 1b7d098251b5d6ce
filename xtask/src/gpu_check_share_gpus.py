"""Runs a Python program with CUDA device indices taken modulo the GPUs there are, so that
Horovod's own programs, which pin `cuda:<local rank>`, run more ranks than the machine
has GPUs: the ranks beyond share them, as in the rest of the GPU checks. The program
itself is not changed; with enough GPUs every index is its own.

    python3 -m share_gpus script.py ARGS...
    python3 -m share_gpus -m pytest ARGS...
"""
import os
import runpy
import sys

import torch


def shared(device):
    """`device` (an index, "cuda:N" or a torch.device) with its index modulo the GPUs."""
    count = torch.cuda.device_count()
    if count == 0 or device is None:
        return device
    if isinstance(device, int):
        return device % count
    device = torch.device(device)
    if device.type != "cuda" or device.index is None:
        return device
    return torch.device("cuda", device.index % count)


_set_device = torch.cuda.set_device
_tensor_cuda = torch.Tensor.cuda


def set_device(device):
    _set_device(shared(device))


def tensor_cuda(self, device=None, *args, **kwargs):
    # nn.Module.cuda(device) moves its tensors through this method too.
    return _tensor_cuda(self, shared(device), *args, **kwargs)


torch.cuda.set_device = set_device
torch.Tensor.cuda = tensor_cuda

if __name__ == "__main__":
    if sys.argv[1:2] == ["-m"]:
        sys.argv = sys.argv[2:]
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = sys.argv[1:]
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
        runpy.run_path(sys.argv[0], run_name="__main__")
