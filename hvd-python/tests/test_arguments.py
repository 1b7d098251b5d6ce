"""Bad arguments give clear Python errors, not crashes (a job of one rank)."""

import pytest
import torch

import hvd.torch as hvd
from hvd import _hvd
from hvd.common import ops


@pytest.fixture(scope="module", autouse=True)
def job():
    hvd.init()
    yield


def test_one_rank_job_without_a_launcher():
    assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)
    assert hvd.is_initialized()


def test_non_contiguous_tensor_is_refused_in_place_and_copied_otherwise():
    t = torch.arange(12.0).reshape(3, 4).t()
    with pytest.raises(ValueError, match="not contiguous"):
        hvd.allreduce_(t, name="noncontig")
    assert torch.equal(hvd.allreduce(t, name="noncontig.copy"), t)
    assert torch.equal(hvd.allgather(t, name="noncontig.gather"), t)


def test_a_group_on_two_devices_is_refused_as_horovod_does():
    # Horovod's test mixes CPU and CUDA tensors; "meta" stands in for a second device.
    for group in (hvd.grouped_allreduce, hvd.grouped_allgather, hvd.grouped_reducescatter):
        with pytest.raises(RuntimeError) as e:
            group([torch.ones(2), torch.ones(2, device="meta")])
        assert str(e.value) == (f"{group.__name__}: the tensors are on cpu, meta; a group's "
                                "tensors must all be on one device")


def test_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="does not support dtype torch.complex64"):
        hvd.allreduce(torch.ones(3, dtype=torch.complex64), name="complex")


def test_wrong_device_is_refused():
    with pytest.raises(ValueError, match="device meta"):
        hvd.allreduce(torch.ones(3, device="meta"), name="meta")


def test_not_a_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="expected a torch.Tensor"):
        hvd.allreduce([1.0, 2.0], name="list")


def test_unknown_ops_are_refused_and_adasum_of_one_rank_is_the_tensor():
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Adasum), torch.ones(2))
    with pytest.raises(ValueError) as e:
        hvd.allreduce(torch.ones(2), op="sum")
    assert str(e.value) == ("op must be one of hvd.Average, Sum, Min, Max, Product, Adasum; "
                            "got 'sum'")
    with pytest.raises(ValueError) as e:
        hvd.allreduce(torch.ones(2), op=hvd.Sum, average=True)
    assert str(e.value) == ("The op parameter supersedes average. Please provide only one of "
                            "them.")


def torch_nccl():
    """The version code of the NCCL torch loaded into this process; 0 without one."""
    try:
        major, minor, patch = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return 0
    return major * 10000 + minor * 100 + patch


def test_build_probes_say_what_this_build_and_machine_have():
    # NCCL: the one this process loads, which is torch's when torch brought one (a
    # CUDA wheel of torch loads it even on a machine without a GPU); no CUDA driver here.
    assert (hvd.gloo_built(), hvd.mpi_built(), hvd.nccl_built(), hvd.cuda_built(),
            hvd.rocm_built(), hvd.ddl_built(), hvd.ccl_built()) == (
                True, False, torch_nccl(), False, False, False, False)
    assert hvd.gloo_enabled() and not hvd.mpi_enabled() and hvd.is_homogeneous()
    assert hvd.transport() == "shm"
    with pytest.raises(ValueError) as e:
        hvd.mpi_threads_supported()
    assert str(e.value) == ("MPI is not enabled: this build of hvd's Python front has no MPI "
                            "transport (hvd.mpi_built() is False), and the job's transport is "
                            "shm")


def test_version_and_init_arguments_hvd_does_not_take():
    import hvd as top
    assert top.__version__ == "0.1.0"
    with pytest.raises(ValueError) as e:
        hvd.init(comm=[0])
    assert str(e.value).startswith("hvd.init(comm=...) is not supported")
    with pytest.raises(ValueError) as e:
        hvd.init(process_sets="static")
    assert str(e.value) == ("process_sets must be a list of ProcessSet objects or 'dynamic', "
                            "not 'static'")


def test_runtime_refusals_carry_hvds_message():
    with pytest.raises(ValueError, match="root"):
        hvd.broadcast(torch.ones(2), root_rank=5, name="badroot")
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(torch.ones(4), splits=[3], name="badsplits")


def test_waiting_twice_is_an_error():
    handle = hvd.allreduce_async_(torch.ones(2), name="twice")
    handle._native.wait()
    with pytest.raises(ValueError, match="already waited"):
        handle._native.wait()


def test_unregistered_process_set_is_named():
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0]))


def test_cuda_tensors_without_a_reachable_driver_are_refused_with_the_reason():
    """Without a CUDA driver hvd can load, a CUDA tensor's collective is refused with
    device_path()'s reason, before anything is submitted: hvd stages CUDA tensors in its
    runtime only, and the tensor is left as it was."""
    path, why = _hvd.device_path()
    if path != "unreachable":
        pytest.skip(f"hvd reaches CUDA memory on this machine ({path}: {why})")

    class PosingAsCuda(torch.Tensor):
        @property
        def device(self):
            return torch.device("cuda", 0)

    tensor = torch.full((3,), 2.0).as_subclass(PosingAsCuda)
    calls = {"allreduce": lambda: hvd.allreduce_(tensor, op=hvd.Sum, name="cuda.inplace"),
             "allreduce ": lambda: hvd.allreduce(tensor, op=hvd.Adasum, name="cuda.adasum"),
             "broadcast": lambda: hvd.broadcast_(tensor, 0, name="cuda.broadcast"),
             "allgather": lambda: hvd.allgather(tensor, name="cuda.allgather")}
    for op, call in calls.items():
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == f"{op.strip()}: CUDA tensors cannot be used in this job: {why}"
    assert why.startswith("hvd cannot reach CUDA memory: "), why
    assert torch.equal(torch.Tensor(tensor), torch.full((3,), 2.0))


def test_an_out_of_place_allreduce_leaves_its_input_and_writes_a_new_tensor():
    tensor = torch.arange(6.0).reshape(2, 3)
    out = hvd.allreduce(tensor, op=hvd.Sum, prescale_factor=2.0, name="into")
    assert out.data_ptr() != tensor.data_ptr() and out.shape == (2, 3)
    assert torch.equal(out, torch.arange(6.0).reshape(2, 3) * 2)
    assert torch.equal(tensor, torch.arange(6.0).reshape(2, 3))
    outs = hvd.grouped_allreduce([tensor, tensor.t()], op=hvd.Sum, name="into.group")
    assert torch.equal(outs[1], tensor.t()) and outs[1].is_contiguous()


def test_scalars_empty_tensors_join_and_timeline(tmp_path):
    assert torch.equal(hvd.allreduce(torch.tensor(3.0), name="scalar"), torch.tensor(3.0))
    assert hvd.allgather(torch.empty(0, 3), name="empty.gather").shape == (0, 3)
    assert hvd.allreduce(torch.empty(0), name="empty.reduce").shape == (0,)
    hvd.start_timeline(str(tmp_path / "timeline.json"))
    hvd.allreduce(torch.ones(2), name="traced")
    hvd.stop_timeline()
    assert (tmp_path / "timeline.json").exists()
    assert hvd.join() == 0


def test_hvd_errors_survive_pickling_with_their_class_and_recoverable_mark():
    # Ray, multiprocessing and concurrent.futures hand errors across processes by pickle.
    import pickle
    error = _hvd.RankLostError("rank 0: lost rank 1")
    error.recoverable = True
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is _hvd.RankLostError and isinstance(back, hvd.HorovodInternalError)
    assert (str(back), back.recoverable) == ("rank 0: lost rank 1", True)


def test_dtypes_and_reduce_ops_cross_as_the_extensions_codes():
    # One code per name, defined in the extension; torch's dtypes and hvd's ops use them.
    assert list(_hvd.DTYPES) == ["uint8", "int8", "uint16", "int16", "int32", "int64",
                                 "float16", "bfloat16", "float32", "float64", "bool"]
    assert sorted(_hvd.DTYPES.values()) == list(range(len(_hvd.DTYPES)))
    assert {op.name: op.code for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product,
                                        hvd.Adasum)} == _hvd.REDUCE_OPS
    assert len(set(_hvd.REDUCE_OPS.values())) == 6
    described = (0, 0, 99, [0], bytearray())
    with pytest.raises(ValueError) as e:
        _hvd.allreduce_async("badcode.dtype", described, hvd.Sum.code)
    assert str(e.value).startswith("allreduce: hvd cannot move tensors of dtype code 99; it "
                                   "supports uint8, int8, uint16,")
    with pytest.raises(ValueError) as e:
        _hvd.allreduce_async("badcode.op", (0, 0, _hvd.DTYPES["uint8"], [0], bytearray()), 77)
    assert str(e.value).startswith("unknown reduce op code 77")


def test_a_description_that_does_not_span_its_bytes_is_refused_by_the_runtime():
    # The runtime's entry is where a description is checked, an overflowing shape too.
    for shape, buffer in (([3], bytearray(2)), ([2 ** 40, 2 ** 40], bytearray())):
        with pytest.raises(ValueError) as e:
            _hvd.allreduce_async("span", ops._describe_bytes(buffer, "uint8", shape),
                                 hvd.Sum.code)
        assert str(e.value) == (f"rank 0: invalid allreduce of tensor 'span': shape {shape} "
                                f"does not match the {len(buffer)} bytes of the tensor")
