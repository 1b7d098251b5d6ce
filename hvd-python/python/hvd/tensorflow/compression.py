"""Gradient compression for the wire, as Horovod's ``hvd.Compression``."""

import tensorflow as tf

from hvd.common.compression import Compressor, NoneCompressor, cast_compressor  # noqa: F401


def _cast(wire_dtype):
    return cast_compressor(wire_dtype, lambda t: t.dtype, lambda d: d.is_floating, tf.cast)


FP16Compressor = _cast(tf.float16)
BF16Compressor = _cast(tf.bfloat16)


class Compression:
    """``none`` sends gradients as they are; ``fp16`` and ``bf16`` halve the bytes."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
