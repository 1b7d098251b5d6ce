//! `hvd._hvd`: the native half of hvd's Python front. Tensors arrive as pointers into
//! their own memory (host memory, or a CUDA device's with the event their producer's
//! work was recorded before) and go through hvd's runtime without a copy, or as DLPack capsules
//! (TensorFlow's), copied once into aligned memory that goes back as a capsule; the
//! Python package (`hvd.torch`, `hvd.tensorflow`, `hvd.keras`) holds what must be
//! Python. No framework library is linked.

mod aligned;
mod codes;
mod collectives;
mod device;
mod dlpack;
mod elastic;
mod errors;
mod handle;
mod job;
mod loader;
mod memory;
mod rounds;
mod running;
mod stall;

use pyo3::prelude::*;

#[pymodule]
fn _hvd(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add(
        "HorovodInternalError",
        py.get_type::<errors::HorovodInternalError>(),
    )?;
    m.add("MismatchError", py.get_type::<errors::MismatchError>())?;
    m.add("RankLostError", py.get_type::<errors::RankLostError>())?;
    m.add(
        "HorovodTimeoutError",
        py.get_type::<errors::HorovodTimeoutError>(),
    )?;
    m.add_class::<handle::PyHandle>()?;
    codes::export(m)?;
    m.add_function(wrap_pyfunction!(job::init, m)?)?;
    m.add_function(wrap_pyfunction!(job::shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(job::is_initialized, m)?)?;
    m.add_function(wrap_pyfunction!(job::topology, m)?)?;
    m.add_function(wrap_pyfunction!(job::add_process_set, m)?)?;
    m.add_function(wrap_pyfunction!(job::remove_process_set, m)?)?;
    m.add_function(wrap_pyfunction!(job::process_set_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(job::start_timeline, m)?)?;
    m.add_function(wrap_pyfunction!(job::stop_timeline, m)?)?;
    m.add_function(wrap_pyfunction!(job::transport, m)?)?;
    m.add_function(wrap_pyfunction!(job::is_homogeneous, m)?)?;
    m.add_function(wrap_pyfunction!(job::built_transports, m)?)?;
    m.add_function(wrap_pyfunction!(device::device_path, m)?)?;
    m.add_function(wrap_pyfunction!(device::nccl_version, m)?)?;
    m.add_function(wrap_pyfunction!(device::cuda_device_count, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(elastic::elastic_worker, m)?)?;
    m.add_function(wrap_pyfunction!(elastic::elastic_join, m)?)?;
    m.add_function(wrap_pyfunction!(elastic::elastic_leave, m)?)?;
    m.add_function(wrap_pyfunction!(elastic::elastic_hosts_updated, m)?)?;
    m.add_function(wrap_pyfunction!(elastic::elastic_newest_root, m)?)?;
    m.add_function(wrap_pyfunction!(elastic::elastic_report_fatal, m)?)?;
    m.add_class::<rounds::ElasticRounds>()?;
    m.add_function(wrap_pyfunction!(collectives::allreduce_async, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::broadcast_async, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::allgather_async, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::alltoall_async, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::reducescatter_async, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::barrier, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::join, m)?)?;
    m.add_class::<loader::PyLoader>()?;
    m.add_function(wrap_pyfunction!(stall::comm_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(stall::data_wait_begin, m)?)?;
    m.add_function(wrap_pyfunction!(stall::data_wait_end, m)?)?;
    m.add_function(wrap_pyfunction!(stall::stall_report, m)?)?;
    Ok(())
}
