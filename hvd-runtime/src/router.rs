//! [`Router`]: the innermost layer of the stack, which sends each call to the transport
//! for its tensors' memory: host tensors to the job's transport (TCP, shared memory,
//! MPI, libfabric), device tensors to a device transport (NCCL) when the job has one, or
//! else through host memory over the job's transport (host staging) when it can reach
//! the device's memory.

use std::sync::Arc;

use crate::staging::{self, DeviceMemoryFor, Staging};
use hvd_core::{
    Collective, Device, DeviceMemory, Error, Reduction, Result, Tensor, TensorMut, Topology,
};

/// A collective over several transports of one group of ranks, each call going to the
/// first that [`supports`](Collective::supports) its tensors' device.
///
/// Every transport must span the same ranks in the same order. A call names one device
/// for all its tensors (the engine batches tensors of one device only); barriers and the
/// topology come from the first transport, the host one. Device tensors no transport
/// takes are staged through host memory when the router has
/// [staging](Router::with_staging).
#[derive(Clone)]
pub struct Router {
    transports: Vec<Arc<dyn Collective>>,
    staging: Option<Staging>,
}

/// Where one call goes.
enum Route<'a> {
    Direct(&'a dyn Collective),
    /// Through host memory, over the host transport.
    Staged(Arc<dyn DeviceMemory>),
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.transports.iter().map(|t| t.backend()).collect();
        f.debug_struct("Router")
            .field("transports", &names)
            .finish()
    }
}

impl Router {
    /// A router over the job's host transport alone.
    pub fn new(host: Arc<dyn Collective>) -> Router {
        Router {
            transports: vec![host],
            staging: None,
        }
    }

    /// Stages device tensors that no transport takes through host memory, copying them
    /// with the memory `memory_for` gives for their device.
    pub fn with_staging(mut self, memory_for: DeviceMemoryFor) -> Router {
        self.staging = Some(Staging::new(memory_for));
        self
    }

    /// Adds a transport for device memory, asked after the ones before it.
    pub fn with(mut self, transport: Arc<dyn Collective>) -> Router {
        self.transports.push(transport);
        self
    }

    /// The host transport: negotiation runs on it.
    pub fn host(&self) -> &Arc<dyn Collective> {
        &self.transports[0]
    }

    /// Splits every transport; a rank is a member of all the sub-groups or of none.
    pub fn split_router(&self, members: &[usize]) -> Result<Option<Router>> {
        let mut subs = Vec::with_capacity(self.transports.len());
        for transport in &self.transports {
            subs.extend(transport.split(members)?.map(Arc::from));
        }
        Ok((subs.len() == self.transports.len()).then_some(Router {
            transports: subs,
            staging: self.staging.clone(),
        }))
    }

    /// Where a call on `device` goes, or an error naming the tensor, the device and the
    /// transports there are.
    fn route(&self, device: Device, op: &str, tensor: &str) -> Result<Route<'_>> {
        if let Some(transport) = self.transports.iter().find(|t| t.supports(device)) {
            return Ok(Route::Direct(transport.as_ref()));
        }
        if let Some(staging) = &self.staging {
            return staging.memory(device).map(Route::Staged);
        }
        let names: Vec<&str> = self.transports.iter().map(|t| t.backend()).collect();
        Err(Error::Unsupported {
            backend: self.host().backend(),
            what: format!(
                "{device} memory (rank {}, {op} of '{tensor}'): no transport of this job \
                 ({}) takes it; a job with device tensors needs a device transport such \
                 as NCCL (HVD_BACKEND=nccl), or host staging (hvd built with the nccl \
                 feature)",
                self.topology().rank(),
                names.join(", ")
            ),
        })
    }

    fn route_batch(&self, op: &str, tensors: &[TensorMut<'_>]) -> Result<Route<'_>> {
        match tensors.first() {
            Some(first) => self.route(first.device(), op, first.name()),
            None => Ok(Route::Direct(self.host().as_ref())),
        }
    }
}

impl Collective for Router {
    fn topology(&self) -> &Topology {
        self.host().topology()
    }

    fn backend(&self) -> &'static str {
        self.host().backend()
    }

    fn supports(&self, device: Device) -> bool {
        self.transports.iter().any(|t| t.supports(device))
            || (self.staging.is_some() && device != Device::Cpu)
    }

    /// The transport that takes `device`; staged calls travel over the host one.
    fn backend_on(&self, device: Device) -> &'static str {
        self.transports
            .iter()
            .find(|t| t.supports(device))
            .unwrap_or(self.host())
            .backend_on(device)
    }

    /// The host transport's answer: Fusion packs host tensors only, and device tensors
    /// pass it unpacked whatever the answer.
    fn fuses_batches(&self) -> bool {
        self.host().fuses_batches()
    }

    /// The memory of the transport that takes `device`.
    fn device_memory(&self, device: Device) -> Option<Arc<dyn DeviceMemory>> {
        self.transports
            .iter()
            .find(|t| t.supports(device))
            .and_then(|t| t.device_memory(device))
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        match self.route_batch("allreduce", tensors)? {
            Route::Direct(t) => t.allreduce(tensors, reduction),
            Route::Staged(memory) => staging::batch(memory.as_ref(), tensors, |host| {
                self.host().allreduce(host, reduction)
            }),
        }
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        match self.route_batch("broadcast", tensors)? {
            Route::Direct(t) => t.broadcast(tensors, root),
            Route::Staged(memory) => staging::batch(memory.as_ref(), tensors, |host| {
                self.host().broadcast(host, root)
            }),
        }
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        match self.route(input.device(), "allgather", input.name())? {
            Route::Direct(t) => t.allgather(input, output, counts),
            Route::Staged(memory) => staging::resized(memory.as_ref(), input, output, |i, o| {
                self.host().allgather(i, o, counts)
            }),
        }
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        match self.route(input.device(), "alltoall", input.name())? {
            Route::Direct(t) => t.alltoall(input, send_counts, output, recv_counts),
            Route::Staged(memory) => staging::resized(memory.as_ref(), input, output, |i, o| {
                self.host().alltoall(i, send_counts, o, recv_counts)
            }),
        }
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        match self.route(input.device(), "reducescatter", input.name())? {
            Route::Direct(t) => t.reducescatter(input, output, counts, reduction),
            Route::Staged(memory) => staging::resized(memory.as_ref(), input, output, |i, o| {
                self.host().reducescatter(i, o, counts, reduction)
            }),
        }
    }

    fn barrier(&self) -> Result<()> {
        self.host().barrier()
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        Ok(self
            .split_router(members)?
            .map(|r| Box::new(r) as Box<dyn Collective>))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use hvd_core::reference::LocalGroup;
    use hvd_core::{DType, DeviceBuffer, ReduceOp};

    use super::*;

    /// A one-rank transport that takes one device and records the calls it gets.
    struct Taking {
        device: Device,
        name: &'static str,
        inner: Box<dyn Collective>,
        calls: Arc<Mutex<Vec<(&'static str, String)>>>,
    }

    impl Collective for Taking {
        fn topology(&self) -> &Topology {
            self.inner.topology()
        }
        fn backend(&self) -> &'static str {
            self.name
        }
        fn supports(&self, device: Device) -> bool {
            device == self.device
        }
        fn allreduce(&self, tensors: &mut [TensorMut<'_>], _: Reduction) -> Result<()> {
            let names = tensors.iter().map(|t| t.name().to_owned());
            let mut calls = self.calls.lock().unwrap();
            calls.extend(names.map(|n| (self.name, n)));
            Ok(())
        }
        fn broadcast(&self, _: &mut [TensorMut<'_>], _: usize) -> Result<()> {
            Ok(())
        }
        fn allgather(&self, _: &Tensor<'_>, _: &mut TensorMut<'_>, _: &[usize]) -> Result<()> {
            Ok(())
        }
        fn alltoall(
            &self,
            _: &Tensor<'_>,
            _: &[usize],
            _: &mut TensorMut<'_>,
            _: &[usize],
        ) -> Result<()> {
            Ok(())
        }
        fn reducescatter(
            &self,
            _: &Tensor<'_>,
            _: &mut TensorMut<'_>,
            _: &[usize],
            _: Reduction,
        ) -> Result<()> {
            Ok(())
        }
        fn barrier(&self) -> Result<()> {
            Ok(())
        }
        fn split(&self, _: &[usize]) -> Result<Option<Box<dyn Collective>>> {
            Ok(None)
        }
    }

    fn taking(
        device: Device,
        name: &'static str,
        calls: &Arc<Mutex<Vec<(&'static str, String)>>>,
    ) -> Arc<dyn Collective> {
        Arc::new(Taking {
            device,
            name,
            inner: Box::new(LocalGroup::new(1).build().remove(0)),
            calls: calls.clone(),
        })
    }

    const SUM: Reduction = Reduction::new(ReduceOp::Sum);

    #[test]
    fn host_batches_go_to_the_host_transport_and_device_batches_to_the_device_one() {
        let calls = Arc::default();
        let router = Router::new(taking(Device::Cpu, "tcp", &calls)).with(taking(
            Device::Cuda(0),
            "nccl",
            &calls,
        ));
        let mut host = vec![1.0f32; 4];
        router
            .allreduce(&mut [TensorMut::from_slice("h", &mut host)], SUM)
            .unwrap();
        // SAFETY: nothing dereferences the address: the recording transport only reads
        // the name.
        let gpu = unsafe { DeviceBuffer::cuda(0, 0x1000, 16) };
        let device = TensorMut::from_device("d", DType::F32, vec![4], gpu).unwrap();
        router.allreduce(&mut [device], SUM).unwrap();
        assert_eq!(
            *calls.lock().unwrap(),
            [("tcp", "h".to_owned()), ("nccl", "d".to_owned())]
        );
        assert!(router.supports(Device::Cuda(0)) && !router.supports(Device::Cuda(1)));
    }

    #[test]
    fn a_device_no_transport_takes_is_an_error_naming_tensor_device_and_transports() {
        let calls = Arc::default();
        let router = Router::new(taking(Device::Cpu, "tcp", &calls));
        // SAFETY: as above; the router refuses it before any transport sees it.
        let gpu = unsafe { DeviceBuffer::cuda(1, 0x1000, 16) };
        let device = TensorMut::from_device("grad.3", DType::F32, vec![4], gpu).unwrap();
        let err = router.allreduce(&mut [device], SUM).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tcp transport does not support cuda:1 memory (rank 0, allreduce of 'grad.3'): \
             no transport of this job (tcp) takes it; a job with device tensors needs a \
             device transport such as NCCL (HVD_BACKEND=nccl), or host staging (hvd built \
             with the nccl feature)"
        );
        assert!(calls.lock().unwrap().is_empty());
    }
}
