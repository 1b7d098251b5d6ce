"""Gradient compression for the wire, Horovod's ``hvd.Compression``: the compressors'
shape is shared, each framework front brings the casts of its own tensors."""


class Compressor:
    """Sends tensors as they are; subclasses narrow them on the wire."""

    @staticmethod
    def compress(tensor):
        """Returns the tensor to send and what decompress needs."""
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class NoneCompressor(Compressor):
    pass


def cast_compressor(wire_dtype, dtype_of, is_floating, cast):
    """A compressor that sends floating-point tensors as ``wire_dtype`` and casts the
    result back: ``dtype_of(tensor)``, ``is_floating(dtype)`` and ``cast(tensor, dtype)``
    are the framework's."""

    class Cast(Compressor):
        @staticmethod
        def compress(tensor):
            dtype = dtype_of(tensor)
            if is_floating(dtype) and dtype != wire_dtype:
                return cast(tensor, wire_dtype), dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else cast(tensor, ctx)

    return Cast
