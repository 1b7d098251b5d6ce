"""CUDA tensors handed to hvd's extension as hvd.torch hands torch's: by device pointer,
with an event recorded after the work that writes them. The memory is the GPU test
double's (it stands in for libcuda and libnccl, HVD_CUDA_LIBRARY and HVD_NCCL_LIBRARY),
written by a copy queued on a stream of the "framework"'s own, so a collective that
does not wait for the event reads stale bytes. Every result is checked; results of
another shape come back as CUDA DLPack capsules on the tensor's device. Between the
marks it writes into the double's trace, hvd's only copies are on the device. A host
tensor in the same job goes over the host transport. An out-of-place allreduce, between
marks of its own, reads its input and writes its output: the input is left as it was."""
import ctypes
import os
import struct

import torch

import hvd.torch as hvd
from hvd import _hvd

hvd.init()
rank, size, local = hvd.rank(), hvd.size(), hvd.local_rank()
assert size == 2, "written for 2 ranks"
path, why = _hvd.device_path()
print(f"rank {rank}: path {path}: {why}", flush=True)
assert hvd.cuda_built() and hvd.nccl_built() == int(os.environ.get("EXPECT_NCCL", "22809"))

cuda = ctypes.CDLL(os.environ["HVD_CUDA_LIBRARY"])
size_t, c_int = ctypes.c_size_t, ctypes.c_int


def ok(code, what):
    assert code == 0, f"{what} returned {code}"


count = c_int()
ok(cuda.cuInit(0), "cuInit")
ok(cuda.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
ordinal = local % count.value
context = size_t()
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), ordinal), "retain")
ok(cuda.cuCtxSetCurrent(context), "set current")
producer = size_t()
ok(cuda.cuStreamCreate(ctypes.byref(producer), 1), "cuStreamCreate")
kept = []


def tensor(values):
    """A float32 device tensor written by a copy queued on the producer's stream: its
    description for the extension, and its device address."""
    host = struct.pack(f"={len(values)}f", *values)
    ptr = ctypes.c_uint64()
    ok(cuda.cuMemAlloc_v2(ctypes.byref(ptr), size_t(max(len(host), 1))), "cuMemAlloc")
    buffer = ctypes.create_string_buffer(host, len(host))
    ok(cuda.cuMemcpyHtoDAsync_v2(ptr, buffer, size_t(len(host)), producer),
       "cuMemcpyHtoDAsync")
    event = size_t()
    ok(cuda.cuEventCreate(ctypes.byref(event), 0), "cuEventCreate")
    ok(cuda.cuEventRecord(event, producer), "cuEventRecord")
    kept.append(buffer)
    owner = (buffer, event.value)
    described = (ptr.value, len(host), _hvd.DTYPES["float32"], [len(values)], owner, ordinal,
                 event.value)
    return described, ptr.value


def read(ptr, n):
    out = ctypes.create_string_buffer(4 * n)
    ok(cuda.cuMemcpyDtoH_v2(out, ctypes.c_uint64(ptr), size_t(4 * n)), "cuMemcpyDtoH")
    return list(struct.unpack(f"={n}f", out.raw))


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
get_pointer.restype = ctypes.c_void_p
get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def from_capsule(capsule):
    """A result capsule's values, after checking it is float32 on this rank's device."""
    t = ctypes.cast(get_pointer(capsule, b"dltensor"), ctypes.POINTER(DLTensor)).contents
    assert (t.device.device_type, t.device.device_id) == (2, ordinal), \
        (t.device.device_type, t.device.device_id)
    assert (t.dtype.code, t.dtype.bits) == (2, 32)
    shape = [t.shape[i] for i in range(t.ndim)]
    n = 1
    for d in shape:
        n *= d
    return shape, read(t.data, n)


def mark(what):
    with open(os.environ["HVD_GPU_DOUBLE_TRACE"], "a") as trace:
        trace.write(f"{os.getpid()} mark {what}\n")


a, a_ptr = tensor([rank + 1.0] * 4)
b, b_ptr = tensor([10.0 * (rank + 1)] * 3)
c, c_ptr = tensor([float(rank)] * 2)
g, _ = tensor([float(rank)] * (2 * (rank + 1)))
t, _ = tensor([rank * 10.0 + i for i in range(3)])
s, _ = tensor([1.0, 2.0, 3.0, 4.0])
p, p_ptr = tensor([rank + 1.0] * 2)
i, i_ptr = tensor([rank + 1.0] * 5)
o, o_ptr = tensor([-1.0] * 5)
pair = hvd.add_process_set([0, 1])
mark("start")
# Two allreduces in flight together (fused), one with scale factors.
h1 = _hvd.allreduce_async("dev.a", a, _hvd.REDUCE_OPS["sum"])
h2 = _hvd.allreduce_async("dev.b", b, _hvd.REDUCE_OPS["average"], 0.5, 4.0)
h1.wait()
h2.wait()
_hvd.broadcast_async("dev.c", c, 1).wait()
gathered = _hvd.allgather_async("dev.g", g).wait()
# Rank 0 sends 1 row to rank 0 and 2 to rank 1; rank 1 sends 2 and 1.
splits = [1, 2] if rank == 0 else [2, 1]
swapped, received = _hvd.alltoall_async("dev.t", t, splits).wait()
scattered = _hvd.reducescatter_async("dev.s", s, _hvd.REDUCE_OPS["sum"]).wait()
_hvd.allreduce_async("dev.p", p, _hvd.REDUCE_OPS["max"], process_set=pair.process_set_id).wait()
# A host tensor in the same job goes over the host transport.
host = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="host.x")
mark("end")
assert torch.equal(host, torch.full((3,), 2.0)), host
mark("into.start")
_hvd.allreduce_async("dev.into", i, _hvd.REDUCE_OPS["sum"], output=o).wait()
mark("into.end")
assert read(i_ptr, 5) == [rank + 1.0] * 5, read(i_ptr, 5)
assert read(o_ptr, 5) == [3.0] * 5, read(o_ptr, 5)

assert read(a_ptr, 4) == [3.0] * 4, read(a_ptr, 4)
assert read(b_ptr, 3) == [30.0] * 3, read(b_ptr, 3)  # (10 * 0.5 + 20 * 0.5) / 2 * 4
assert read(c_ptr, 2) == [1.0, 1.0], read(c_ptr, 2)
assert from_capsule(gathered) == ([6], [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]), from_capsule(gathered)
want = [0.0, 10.0, 11.0] if rank == 0 else [1.0, 2.0, 12.0]
assert from_capsule(swapped) == ([3], want) and received == ([1, 2] if rank == 0 else [2, 1]), \
    (from_capsule(swapped), received)
assert from_capsule(scattered) == ([2], [2.0, 4.0] if rank == 0 else [6.0, 8.0]), \
    from_capsule(scattered)
assert read(p_ptr, 2) == [2.0, 2.0], read(p_ptr, 2)
print(f"rank {rank}: device ok", flush=True)
hvd.shutdown()
