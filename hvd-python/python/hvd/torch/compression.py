"""Gradient compression for the wire, as Horovod's ``hvd.Compression``."""

import torch


class Compressor:
    @staticmethod
    def compress(tensor):
        """Returns the tensor to send and what decompress needs."""
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class NoneCompressor(Compressor):
    pass


def _cast(wire_dtype):
    class Cast(Compressor):
        @staticmethod
        def compress(tensor):
            if tensor.dtype.is_floating_point and tensor.dtype != wire_dtype:
                return tensor.to(wire_dtype), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else tensor.to(ctx)

    return Cast


FP16Compressor = _cast(torch.float16)
BF16Compressor = _cast(torch.bfloat16)


class Compression:
    """``none`` sends gradients as they are; ``fp16`` and ``bf16`` halve the bytes."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
