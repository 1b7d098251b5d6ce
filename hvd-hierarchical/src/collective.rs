//! [`Hierarchical`]: allreduce within hosts and across them; every other call goes to
//! the flat group.

use hvd_core::layer::Layer;
use hvd_core::{
    Collective, Device, Error, Operation, Reduction, Result, Tensor, TensorMut, kernels, validate,
};

use crate::plan::{Scheme, shard_counts};
use crate::ranks::in_job;

/// A [`Collective`] whose allreduce runs in three stages: within each host over `L`
/// (shared memory), across hosts over cross groups split from the flat group `C`
/// (TCP, RDMA), within each host again. Every other operation runs on `C` as is. See
/// the [crate docs](crate).
pub struct Hierarchical<L: Collective, C: Collective> {
    flat: C,
    local: L,
    /// This rank's cross group; `None` for a rank that is not a leader under
    /// [`Scheme::Leaders`].
    cross: Option<Box<dyn Collective>>,
    scheme: Scheme,
    /// The job's rank of each rank of `local`, and of each rank of `cross`.
    local_members: Vec<usize>,
    cross_members: Vec<usize>,
}

impl<L: Collective, C: Collective> std::fmt::Debug for Hierarchical<L, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hierarchical")
            .field("flat", &self.flat.backend())
            .field("local", &self.local.backend())
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl<L: Collective, C: Collective> Hierarchical<L, C> {
    /// Builds the hierarchy over `flat` (every rank of the job) and `local` (the ranks
    /// of this host, in the order of their job ranks). Collective over `flat`: every
    /// rank calls it at the same point, since it splits the cross groups from it.
    pub fn new(flat: C, local: L) -> Result<Self> {
        let topology = flat.topology().clone();
        let (me, local_rank, local_size) = (
            topology.rank(),
            topology.local_rank(),
            topology.local_size(),
        );
        let inner = local.topology();
        if (inner.rank(), inner.size()) != (local_rank, local_size) {
            return Err(Error::Config {
                name: "the local group of a hierarchical collective".into(),
                value: format!("rank {} of {}", inner.rank(), inner.size()),
                expected: format!(
                    "this host's ranks, as the flat group sees them: local rank {local_rank} of {local_size} (rank {me})"
                ),
            });
        }
        let host = topology.hosts()[me];
        let local_members = (0..topology.size())
            .filter(|r| topology.hosts()[*r] == host)
            .collect();
        let scheme = Scheme::of(&topology);
        let (mut cross, mut cross_members) = (None, Vec::new());
        for members in scheme.cross_groups(&topology) {
            if let Some(group) = flat.split(&members)? {
                cross = Some(group);
                cross_members = members;
            }
        }
        Ok(Hierarchical {
            flat,
            local,
            cross,
            scheme,
            local_members,
            cross_members,
        })
    }

    fn local<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|e| in_job(e, &self.local_members))
    }

    fn cross<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|e| in_job(e, &self.cross_members))
    }

    /// Reducescatter within the host, allreduce of this rank's shard across hosts,
    /// allgather within the host.
    fn uniform(
        &self,
        tensor: &mut TensorMut<'_>,
        reduction: Reduction,
        local_size: usize,
    ) -> Result<()> {
        let (name, dtype, count) = (tensor.name(), tensor.dtype(), tensor.len());
        let bytes =
            tensor.host_mut_for("hierarchical", self.flat.topology().rank(), "allreduce")?;
        let counts = shard_counts(count, local_size);
        let mine = counts[self.local.topology().rank()];
        let mut shard = vec![0u8; mine * dtype.size()];
        let combine = Reduction {
            op: reduction.op.combining_op(),
            prescale: reduction.prescale,
            postscale: 1.0,
        };
        self.local(self.local.reducescatter(
            &Tensor::from_bytes(name, dtype, vec![count], bytes)?,
            &mut TensorMut::from_bytes(name, dtype, vec![mine], &mut shard)?,
            &counts,
            combine,
        ))?;
        if let Some(cross) = &self.cross {
            self.cross(cross.allreduce(
                &mut [TensorMut::from_bytes(name, dtype, vec![mine], &mut shard)?],
                Reduction::new(combine.op),
            ))?;
        }
        kernels::finish(dtype, reduction, self.flat.topology().size(), &mut shard);
        self.local(self.local.allgather(
            &Tensor::from_bytes(name, dtype, vec![mine], &shard)?,
            &mut TensorMut::from_bytes(name, dtype, vec![count], bytes)?,
            &counts,
        ))
    }

    /// Allreduce within the host, allreduce among the hosts' leaders, broadcast from
    /// each leader within its host.
    fn leaders(&self, tensor: &mut TensorMut<'_>, reduction: Reduction) -> Result<()> {
        let (name, dtype, count) = (tensor.name(), tensor.dtype(), tensor.len());
        let bytes =
            tensor.host_mut_for("hierarchical", self.flat.topology().rank(), "allreduce")?;
        let combine = Reduction {
            op: reduction.op.combining_op(),
            prescale: reduction.prescale,
            postscale: 1.0,
        };
        self.local(self.local.allreduce(
            &mut [TensorMut::from_bytes(name, dtype, vec![count], bytes)?],
            combine,
        ))?;
        if let Some(cross) = &self.cross {
            self.cross(cross.allreduce(
                &mut [TensorMut::from_bytes(name, dtype, vec![count], bytes)?],
                Reduction::new(combine.op),
            ))?;
            kernels::finish(dtype, reduction, self.flat.topology().size(), bytes);
        }
        self.local(self.local.broadcast(
            &mut [TensorMut::from_bytes(name, dtype, vec![count], bytes)?],
            0,
        ))
    }
}

impl<L: Collective, C: Collective> Layer for Hierarchical<L, C> {
    type Inner = C;

    fn inner(&self) -> &C {
        &self.flat
    }

    /// Allreduce runs in stages; every other call goes to the flat group as it is.
    fn call(&self, op: Operation<'_, '_>) -> Result<()> {
        let Operation::Allreduce { tensors, reduction } = op else {
            return op.run(&self.flat);
        };
        // The inner groups see Average as Sum; what the call may do is decided here.
        validate::allreduce(self.flat.topology().rank(), tensors, reduction)?;
        for tensor in tensors.iter_mut() {
            match self.scheme {
                Scheme::Uniform { local_size } => self.uniform(tensor, reduction, local_size)?,
                Scheme::Leaders => self.leaders(tensor, reduction)?,
            }
        }
        Ok(())
    }

    fn split(this: &Self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        this.flat.split(members)
    }

    fn backend(_: &Self) -> &'static str {
        "hierarchical"
    }

    fn supports(this: &Self, device: Device) -> bool {
        device == Device::Cpu && this.local.supports(device) && this.flat.supports(device)
    }

    /// Allreduce goes tensor by tensor: Tensor Fusion must pack a batch first.
    fn fuses_batches(_: &Self) -> bool {
        false
    }
}
