//! [`Router`]: the innermost layer of the stack, which sends each call to the transport
//! for its tensors' memory: host tensors to the job's transport (TCP, shared memory,
//! MPI, libfabric), device tensors to a device transport (NCCL) when the job has one, or
//! else through host memory over the job's transport (host staging) when it can reach
//! the device's memory.

use std::sync::Arc;

use crate::staging::{self, DeviceMemoryFor, Staging};
use hvd_core::layer::Layer;
use hvd_core::{Collective, Device, DeviceMemory, Error, Operation, Result};

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

    /// The backends of the device transports beside the host one (`["nccl"]`).
    pub fn device_backends(&self) -> Vec<&'static str> {
        self.transports[1..].iter().map(|t| t.backend()).collect()
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

    /// Whether device tensors can be copied to the host and back: a device transport
    /// offers its memory, or the router stages.
    pub(crate) fn copies_devices(&self) -> bool {
        self.staging.is_some() || self.transports.len() > 1
    }

    /// The memory that copies `device`'s tensors to the host and back (for Adasum, which
    /// combines on the host): the device transport's, or host staging's; or an error
    /// naming the tensor, the device and the transports there are.
    pub(crate) fn host_copies(
        &self,
        device: Device,
        op: &str,
        tensor: &str,
    ) -> Result<Arc<dyn DeviceMemory>> {
        match self.route(device, op, tensor)? {
            Route::Staged(memory) => Ok(memory),
            Route::Direct(transport) => {
                transport
                    .device_memory(device)
                    .ok_or_else(|| Error::Unsupported {
                        backend: transport.backend(),
                        what: format!(
                            "copying {device} memory to the host (rank {}, {op} of '{tensor}')",
                            self.topology().rank()
                        ),
                    })
            }
        }
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
}

impl Layer for Router {
    type Inner = dyn Collective;

    /// The host transport: negotiation, barriers and the topology run on it.
    fn inner(&self) -> &(dyn Collective + 'static) {
        self.host().as_ref()
    }

    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        let Some((device, tensor)) = op.first_tensor() else {
            return op.run(self.inner());
        };
        match self.route(device, op.kind().name(), tensor)? {
            Route::Direct(transport) => op.run(transport),
            Route::Staged(memory) => staging::run(memory.as_ref(), op, self.inner()),
        }
    }

    fn supports(this: &Self, device: Device) -> bool {
        this.transports.iter().any(|t| t.supports(device))
            || (this.staging.is_some() && device != Device::Cpu)
    }

    /// The transport that takes `device`; staged calls travel over the host one.
    fn backend_on(this: &Self, device: Device) -> &'static str {
        this.transports
            .iter()
            .find(|t| t.supports(device))
            .unwrap_or(this.host())
            .backend_on(device)
    }

    /// The memory of the transport that takes `device`.
    fn device_memory(this: &Self, device: Device) -> Option<Arc<dyn DeviceMemory>> {
        this.transports
            .iter()
            .find(|t| t.supports(device))
            .and_then(|t| t.device_memory(device))
    }

    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        Ok(this
            .split_router(members)?
            .map(|r| Box::new(r) as Box<dyn Collective>))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use hvd_core::reference::LocalGroup;
    use hvd_core::{DType, DeviceBuffer, ReduceOp, Reduction, TensorMut};

    use super::*;

    /// A one-rank transport that takes one device and records the calls it gets.
    struct Taking {
        device: Device,
        name: &'static str,
        inner: Box<dyn Collective>,
        calls: Arc<Mutex<Vec<(&'static str, String)>>>,
    }

    impl Layer for Taking {
        type Inner = dyn Collective;
        fn inner(&self) -> &(dyn Collective + 'static) {
            self.inner.as_ref()
        }
        /// Records the tensors of an allreduce; moves nothing.
        fn call(&self, op: Operation<'_, '_>) -> Result<()> {
            if let Operation::Allreduce { tensors, .. } = op {
                let names = tensors.iter().map(|t| t.name().to_owned());
                let mut calls = self.calls.lock().unwrap();
                calls.extend(names.map(|n| (self.name, n)));
            }
            Ok(())
        }
        fn split(_: &Self, _: &[usize]) -> Result<Option<Box<dyn Collective>>> {
            Ok(None)
        }
        fn backend(this: &Self) -> &'static str {
            this.name
        }
        fn supports(this: &Self, device: Device) -> bool {
            device == this.device
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
