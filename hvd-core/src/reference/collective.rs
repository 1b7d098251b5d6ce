//! The reference `Collective`: every operation is one exchange on the shared board.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::board::{Board, Caller, Post};
use crate::{
    Collective, DType, Device, Error, Reduction, Result, Tensor, TensorMut, Topology, batch_name,
    kernels, validate,
};

/// Builds the collectives of one in-process group.
#[derive(Debug, Clone)]
pub struct LocalGroup {
    hosts: Vec<u32>,
    timeout: Duration,
}

impl LocalGroup {
    /// A group of `size` ranks on one (simulated) host, with a 60 s timeout on every wait.
    pub fn new(size: usize) -> Self {
        LocalGroup {
            hosts: vec![0; size],
            timeout: Duration::from_secs(60),
        }
    }

    /// Simulates a multi-host topology: rank `r` runs on host `hosts[r]`.
    pub fn hosts(mut self, hosts: Vec<u32>) -> Self {
        self.hosts = hosts;
        self
    }

    /// How long a rank waits for the others before it fails with a timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// One collective per rank, in rank order; hand each to its own thread.
    pub fn build(self) -> Vec<LocalCollective> {
        let board = Arc::new(Board::new(self.hosts.len()));
        (0..self.hosts.len())
            .map(|rank| LocalCollective {
                topology: Topology::from_hosts(rank, self.hosts.clone()),
                board: board.clone(),
                seq: AtomicU64::new(0),
                timeout: self.timeout,
            })
            .collect()
    }
}

/// One rank's member of a [`LocalGroup`].
#[derive(Debug)]
pub struct LocalCollective {
    topology: Topology,
    board: Arc<Board>,
    seq: AtomicU64,
    timeout: Duration,
}

impl Drop for LocalCollective {
    fn drop(&mut self) {
        self.board.depart(self.topology.rank());
    }
}

fn describe(tensors: impl Iterator<Item = (DType, usize)>) -> String {
    let parts: Vec<String> = tensors.map(|(d, n)| format!("{d} x {n}")).collect();
    format!("[{}]", parts.join(", "))
}

fn host<'t>(rank: usize, op: &'static str, t: &'t Tensor<'_>) -> Result<&'t [u8]> {
    t.host_for("local", rank, op)
}

fn host_mut<'t>(rank: usize, op: &'static str, t: &'t mut TensorMut<'_>) -> Result<&'t mut [u8]> {
    t.host_mut_for("local", rank, op)
}

fn reduction_words(r: Reduction) -> String {
    format!("{} prescale {} postscale {}", r.op, r.prescale, r.postscale)
}

impl LocalCollective {
    fn rank(&self) -> usize {
        self.topology.rank()
    }

    fn exchange(
        &self,
        op: &'static str,
        tensor: &str,
        agreement: String,
        counts: Vec<usize>,
        data: Vec<u8>,
    ) -> Result<Vec<Arc<Post>>> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let caller = Caller {
            rank: self.rank(),
            op,
            tensor,
            timeout: self.timeout,
        };
        let post = Post {
            agreement: format!("{op} {agreement}"),
            counts,
            data,
        };
        self.board.exchange(seq, &caller, post)
    }

    /// Reduces `width` bytes at `offset` of every post, in rank order.
    fn reduce_posts(
        posts: &[Arc<Post>],
        dtype: DType,
        r: Reduction,
        offset: usize,
        width: usize,
    ) -> Vec<u8> {
        let mut acc = posts[0].data[offset..offset + width].to_vec();
        for p in &posts[1..] {
            kernels::reduce_into(dtype, r.op, &mut acc, &p.data[offset..offset + width]);
        }
        kernels::finish(dtype, r, posts.len(), &mut acc);
        acc
    }
}

impl Collective for LocalCollective {
    fn topology(&self) -> &Topology {
        &self.topology
    }

    fn backend(&self) -> &'static str {
        "local"
    }

    fn supports(&self, device: Device) -> bool {
        device == Device::Cpu
    }

    fn allreduce(&self, tensors: &mut [TensorMut<'_>], reduction: Reduction) -> Result<()> {
        let op = "allreduce";
        let rank = self.rank();
        validate::allreduce(rank, tensors, reduction)?;
        let mut data = Vec::new();
        for t in tensors.iter() {
            let start = data.len();
            data.extend_from_slice(host(rank, op, &t.as_tensor())?);
            kernels::prescale(t.dtype(), reduction, &mut data[start..]);
        }
        let agreement = format!(
            "{} {}",
            reduction_words(reduction),
            describe(tensors.iter().map(|t| (t.dtype(), t.len())))
        );
        let posts = self.exchange(op, &batch_name(tensors), agreement, vec![], data)?;
        let mut offset = 0;
        for t in tensors.iter_mut() {
            let width = t.byte_len();
            let reduced = Self::reduce_posts(&posts, t.dtype(), reduction, offset, width);
            host_mut(rank, op, t)?.copy_from_slice(&reduced);
            offset += width;
        }
        Ok(())
    }

    fn broadcast(&self, tensors: &mut [TensorMut<'_>], root: usize) -> Result<()> {
        let op = "broadcast";
        let rank = self.rank();
        let name = batch_name(tensors);
        validate::root(rank, self.topology.size(), root, &name)?;
        let mut data = Vec::new();
        if rank == root {
            for t in tensors.iter() {
                data.extend_from_slice(host(rank, op, &t.as_tensor())?);
            }
        }
        let agreement = format!(
            "root {root} {}",
            describe(tensors.iter().map(|t| (t.dtype(), t.len())))
        );
        let posts = self.exchange(op, &name, agreement, vec![], data)?;
        let mut offset = 0;
        for t in tensors.iter_mut() {
            let width = t.byte_len();
            host_mut(rank, op, t)?.copy_from_slice(&posts[root].data[offset..offset + width]);
            offset += width;
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
        let rank = self.rank();
        validate::allgather(rank, self.topology.size(), input, output, counts)?;
        let agreement = format!("{} counts {counts:?}", input.dtype());
        let data = host(rank, op, input)?.to_vec();
        let posts = self.exchange(op, input.name(), agreement, vec![], data)?;
        let out = host_mut(rank, op, output)?;
        let mut offset = 0;
        for p in &posts {
            out[offset..offset + p.data.len()].copy_from_slice(&p.data);
            offset += p.data.len();
        }
        Ok(())
    }

    fn alltoall(
        &self,
        input: &Tensor<'_>,
        send_counts: &[usize],
        output: &mut TensorMut<'_>,
        recv_counts: &[usize],
    ) -> Result<()> {
        let op = "alltoall";
        let rank = self.rank();
        let width = input.dtype().size();
        validate::alltoall(
            rank,
            self.topology.size(),
            input,
            send_counts,
            output,
            recv_counts,
        )?;
        let data = host(rank, op, input)?.to_vec();
        let posts = self.exchange(
            op,
            input.name(),
            input.dtype().to_string(),
            send_counts.to_vec(),
            data,
        )?;
        let out = host_mut(rank, op, output)?;
        let mut offset = 0;
        for (peer, p) in posts.iter().enumerate() {
            if p.counts[rank] != recv_counts[peer] {
                return Err(Error::Mismatch {
                    property: "alltoall counts",
                    tensor: input.name().into(),
                    rank_a: rank,
                    value_a: format!("{} elements expected from rank {peer}", recv_counts[peer]),
                    rank_b: peer,
                    value_b: format!("{} elements sent to rank {rank}", p.counts[rank]),
                });
            }
            let start = p.counts[..rank].iter().sum::<usize>() * width;
            let len = p.counts[rank] * width;
            out[offset..offset + len].copy_from_slice(&p.data[start..start + len]);
            offset += len;
        }
        Ok(())
    }

    fn reducescatter(
        &self,
        input: &Tensor<'_>,
        output: &mut TensorMut<'_>,
        counts: &[usize],
        reduction: Reduction,
    ) -> Result<()> {
        let op = "reducescatter";
        let rank = self.rank();
        let dtype = input.dtype();
        validate::reducescatter(rank, self.topology.size(), input, output, counts, reduction)?;
        let mut data = host(rank, op, input)?.to_vec();
        kernels::prescale(dtype, reduction, &mut data);
        let agreement = format!("{dtype} {} counts {counts:?}", reduction_words(reduction));
        let posts = self.exchange(op, input.name(), agreement, vec![], data)?;
        let offset = counts[..rank].iter().sum::<usize>() * dtype.size();
        let reduced = Self::reduce_posts(
            &posts,
            dtype,
            reduction,
            offset,
            counts[rank] * dtype.size(),
        );
        host_mut(rank, op, output)?.copy_from_slice(&reduced);
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        self.exchange("barrier", "barrier", String::new(), vec![], vec![])
            .map(|_| ())
    }

    fn split(&self, members: &[usize]) -> Result<Option<Box<dyn Collective>>> {
        let rank = self.rank();
        validate::members(rank, self.topology.size(), members)?;
        let seq = self.seq.load(Ordering::Relaxed);
        self.exchange(
            "split",
            "process set",
            format!("members {members:?}"),
            vec![],
            vec![],
        )?;
        let Some(topology) = self.topology.subgroup(members) else {
            return Ok(None);
        };
        let board = self
            .board
            .subgroups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(seq)
            .or_insert_with(|| Arc::new(Board::new(members.len())))
            .clone();
        Ok(Some(Box::new(LocalCollective {
            topology,
            board,
            seq: AtomicU64::new(0),
            timeout: self.timeout,
        })))
    }
}
