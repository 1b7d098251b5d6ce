//! [`MpiCollective`]: the `Collective` trait over one MPI communicator.

use std::os::raw::c_int;

use hvd_core::{
    Collective, Device, Error, Reduction, Result, Tensor, TensorMut, Topology, batch_name, kernels,
    validate,
};
use mpi::ffi;

use crate::comm::{Comm, address, address_mut, in_place};
use crate::config::MpiConfig;
use crate::library::{Library, ThreadLevel};
use crate::types::{datatype, operation};
use crate::watchdog::Watch;

/// One rank's member of a group of ranks connected by MPI (backend name `"mpi"`).
pub struct MpiCollective {
    comm: Comm,
    topology: Topology,
}

impl std::fmt::Debug for MpiCollective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiCollective")
            .field("rank", &self.comm.rank)
            .field("size", &self.comm.size)
            .field("thread_level", &self.comm.library.level)
            .finish_non_exhaustive()
    }
}

impl MpiCollective {
    /// Every process of the MPI job (`MPI_COMM_WORLD`, duplicated so that hvd's traffic
    /// never mixes with the program's own). Initialises MPI unless the program has.
    pub fn world(config: MpiConfig) -> Result<MpiCollective> {
        let library = Library::get()?;
        // The duplicate is collective over the world: a rank that never starts hvd would
        // leave the others in it for ever, so it is watched like every later call.
        let mut world_rank: c_int = 0;
        {
            let _serial = library.serialize();
            // SAFETY: MPI is initialised; COMM_WORLD is predefined; a local query.
            unsafe { ffi::MPI_Comm_rank(ffi::RSMPI_COMM_WORLD, &mut world_rank) };
        }
        let watch = Watch::register(usize::try_from(world_rank).unwrap_or(0), config.timeout)?;
        // SAFETY: as in Comm::split.
        let mut dup: ffi::MPI_Comm = unsafe { std::mem::zeroed() };
        let code = {
            let _running = watch.begin("connect", "MPI_COMM_WORLD");
            let _serial = library.serialize();
            // SAFETY: MPI is initialised; COMM_WORLD is predefined; `dup` receives the copy.
            unsafe { ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut dup) }
        };
        if code != 0 {
            return Err(crate::error::setup_error("MPI_Comm_dup", code));
        }
        let comm = Comm::adopt(dup, library, config.timeout)?;
        let topology = Topology::from_hosts(comm.rank, comm.hosts()?);
        Ok(MpiCollective { comm, topology })
    }

    /// The thread level MPI provides to this process.
    pub fn thread_level(&self) -> ThreadLevel {
        self.comm.library.level
    }

    fn rank(&self) -> usize {
        self.comm.rank
    }

    fn host<'a>(&self, op: &str, t: &Tensor<'a>) -> Result<&'a [u8]> {
        t.host_for("mpi", self.rank(), op)
    }

    fn host_mut<'s>(&self, op: &str, t: &'s mut TensorMut<'_>) -> Result<&'s mut [u8]> {
        t.host_mut_for("mpi", self.rank(), op)
    }

    /// MPI's counts and displacements for per-rank `counts` of one call.
    fn layout(
        &self,
        op: &'static str,
        tensor: &str,
        counts: &[usize],
    ) -> Result<(Vec<c_int>, Vec<c_int>)> {
        let total: usize = counts.iter().sum();
        self.comm.count(op, tensor, total)?;
        let mut displs = Vec::with_capacity(counts.len());
        let mut offset = 0;
        for c in counts {
            displs.push(offset as c_int);
            offset += c;
        }
        Ok((counts.iter().map(|c| *c as c_int).collect(), displs))
    }
}

impl Collective for MpiCollective {
    fn topology(&self) -> &Topology {
        &self.topology
    }

    fn backend(&self) -> &'static str {
        "mpi"
    }

    fn supports(&self, device: Device) -> bool {
        device == Device::Cpu
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        let op = "allreduce";
        validate::allreduce(self.rank(), tensors, reduction)?;
        // Every tensor's datatype before any data changes: a refusal leaves the batch as
        // it was.
        for t in tensors.iter() {
            datatype(t.dtype())?;
        }
        for t in tensors.iter_mut() {
            let (name, dtype) = (t.name(), t.dtype());
            let count = self.comm.count(op, name, t.len())?;
            let (kind, combine) = (
                datatype(dtype)?,
                operation(&self.comm.library.ops, dtype, reduction.op),
            );
            let data = self.host_mut(op, t)?;
            kernels::prescale(dtype, reduction, data);
            let buffer = address_mut(data);
            self.comm.call(op, name, "MPI_Allreduce", |comm| {
                // SAFETY: `buffer` holds `count` elements of `kind`, in place.
                unsafe { ffi::MPI_Allreduce(in_place(), buffer, count, kind, combine, comm) }
            })?;
            kernels::finish(dtype, reduction, self.comm.size, data);
        }
        Ok(())
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        let op = "broadcast";
        validate::root(self.rank(), self.comm.size, root, &batch_name(tensors))?;
        for t in tensors.iter_mut() {
            let (name, kind) = (t.name(), datatype(t.dtype())?);
            let count = self.comm.count(op, name, t.len())?;
            let buffer = address_mut(self.host_mut(op, t)?);
            self.comm.call(op, name, "MPI_Bcast", |comm| {
                // SAFETY: `buffer` holds `count` elements of `kind`; root is in range.
                unsafe { ffi::MPI_Bcast(buffer, count, kind, root as c_int, comm) }
            })?;
        }
        Ok(())
    }

    fn allgather(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let op = "allgather";
        validate::allgather(self.rank(), self.comm.size, input, output, counts)?;
        let (name, kind) = (input.name(), datatype(input.dtype())?);
        let (recv_counts, displs) = self.layout(op, name, counts)?;
        let send = address(self.host(op, input)?);
        let recv = address_mut(self.host_mut(op, output)?);
        let sent = recv_counts[self.rank()];
        self.comm.call(op, name, "MPI_Allgatherv", |comm| {
            // SAFETY: validated: the input holds this rank's count, the output the sum of
            // the counts at the displacements.
            unsafe {
                ffi::MPI_Allgatherv(
                    send,
                    sent,
                    kind,
                    recv,
                    recv_counts.as_ptr(),
                    displs.as_ptr(),
                    kind,
                    comm,
                )
            }
        })
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        let op = "alltoall";
        validate::alltoall(
            self.rank(),
            self.comm.size,
            input,
            send_counts,
            output,
            recv_counts,
        )?;
        let (name, kind) = (input.name(), datatype(input.dtype())?);
        let (sends, send_displs) = self.layout(op, name, send_counts)?;
        let (recvs, recv_displs) = self.layout(op, name, recv_counts)?;
        let send = address(self.host(op, input)?);
        let recv = address_mut(self.host_mut(op, output)?);
        self.comm.call(op, name, "MPI_Alltoallv", |comm| {
            // SAFETY: validated: input and output hold the sums of their counts.
            unsafe {
                ffi::MPI_Alltoallv(
                    send,
                    sends.as_ptr(),
                    send_displs.as_ptr(),
                    kind,
                    recv,
                    recvs.as_ptr(),
                    recv_displs.as_ptr(),
                    kind,
                    comm,
                )
            }
        })
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        let op = "reducescatter";
        validate::reducescatter(
            self.rank(),
            self.comm.size,
            input,
            output,
            counts,
            reduction,
        )?;
        let (name, dtype) = (input.name(), input.dtype());
        let (blocks, _) = self.layout(op, name, counts)?;
        let source = self.host(op, input)?;
        // The prescale applies to this rank's contribution, which is read-only here.
        let scaled;
        let send = if reduction.prescale == 1.0 {
            source
        } else {
            let mut copy = source.to_vec();
            kernels::prescale(dtype, reduction, &mut copy);
            scaled = copy;
            &scaled
        };
        let (kind, combine) = (
            datatype(dtype)?,
            operation(&self.comm.library.ops, dtype, reduction.op),
        );
        let data = self.host_mut(op, output)?;
        let recv = address_mut(data);
        self.comm.call(op, name, "MPI_Reduce_scatter", |comm| {
            // SAFETY: validated: the input holds every block, the output this rank's.
            unsafe {
                ffi::MPI_Reduce_scatter(address(send), recv, blocks.as_ptr(), kind, combine, comm)
            }
        })?;
        kernels::finish(dtype, reduction, self.comm.size, data);
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        self.comm.call("barrier", "barrier", "MPI_Barrier", |comm| {
            // SAFETY: a valid communicator.
            unsafe { ffi::MPI_Barrier(comm) }
        })
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        validate::members(self.rank(), self.comm.size, members)?;
        if self.comm.library.level == ThreadLevel::Serialized {
            return Err(Error::Unsupported {
                backend: "mpi",
                what: "process sets when the MPI library provides only MPI_THREAD_SERIALIZED: their background threads would block each other (use an MPI built with MPI_THREAD_MULTIPLE)".into(),
            });
        }
        let position = members.iter().position(|m| *m == self.rank());
        let Some(sub) = self
            .comm
            .split(position.map(|_| 0), position.unwrap_or(0) as c_int)?
        else {
            return Ok(None);
        };
        let topology = self
            .topology
            .subgroup(members)
            .ok_or_else(|| Error::invalid(self.rank(), "split", "process set", "not a member"))?;
        Ok(Some(Box::new(MpiCollective {
            comm: sub,
            topology,
        })))
    }
}
