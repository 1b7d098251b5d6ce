//! Responses: what every rank agrees to do with a tensor once all ranks have asked, and
//! the consistency checks that decide it.

use std::sync::Arc;

use hvd_core::{DType, Device, Error, Reduction};

use super::request::{Name, Op, OpKind, Request};

/// The agreed way to run one collective, identical on every rank.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// The operation with its agreed fields (every rank's request has the same).
    pub op: Op,
    pub dtype: DType,
    /// The shape of the lowest-numbered rank that submitted (all agree but for the first
    /// dim of allgather and alltoall).
    pub shape: Vec<usize>,
    pub device: Device,
    /// The dtype float tensors travel as, when an allreduce compresses them.
    pub wire: Option<DType>,
    /// Every rank's first dim (0 for joined ranks).
    pub rows: Vec<usize>,
    /// Alltoall: every rank's splits (rows sent to each rank).
    pub splits: Vec<Vec<usize>>,
    /// Ranks that had joined and contribute zeros.
    pub joined: Vec<bool>,
    /// Join: the last rank to join.
    pub last_joined: usize,
}

impl Plan {
    pub fn row_elements(&self) -> usize {
        self.shape.iter().skip(1).product()
    }
}

/// What the ranks agreed for one named tensor: a plan, or an error every rank reports.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub name: Name,
    pub kind: OpKind,
    /// Shared, not copied, between the response cache and each cycle that reuses it.
    pub outcome: Result<Arc<Plan>, Error>,
}

fn mismatch<T: std::fmt::Display + ?Sized>(
    property: &'static str,
    name: &str,
    (rank_a, a): (usize, &T),
    (rank_b, b): (usize, &T),
) -> Error {
    Error::Mismatch {
        property,
        tensor: name.into(),
        rank_a,
        value_a: a.to_string(),
        rank_b,
        value_b: b.to_string(),
    }
}

#[derive(PartialEq)]
struct Shape<'a>(&'a [usize]);

impl std::fmt::Display for Shape<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Fails with a mismatch when `a` (from rank `ra`) and `b` (from rank `rb`) differ.
fn same<T: PartialEq + std::fmt::Display + ?Sized>(
    property: &'static str,
    name: &str,
    (ra, a): (usize, &T),
    (rb, b): (usize, &T),
) -> Result<(), Error> {
    if a == b {
        Ok(())
    } else {
        Err(mismatch(property, name, (ra, a), (rb, b)))
    }
}

/// A tensor's device as ranks must agree on it: its kind (every rank has its own GPU),
/// shown whole in messages.
struct Placement(Device);

impl PartialEq for Placement {
    fn eq(&self, other: &Self) -> bool {
        self.0.same_kind(other.0)
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The dims ranks must agree on: all of them, or all but the first for ops that gather
/// along the first dim. Shown whole in messages.
struct AgreedDims<'a>(&'a Request);

impl PartialEq for AgreedDims<'_> {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0.shape, &other.0.shape);
        if self.0.kind().first_dim_varies() {
            a.len() == b.len() && a.iter().skip(1).eq(b.iter().skip(1))
        } else {
            a == b
        }
    }
}

impl std::fmt::Display for AgreedDims<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Shape(&self.0.shape).fmt(f)
    }
}

/// Checks that request `b` (from `rank_b`) agrees with `a` (from `rank_a`).
fn agree(name: &str, (ra, a): (usize, &Request), (rb, b): (usize, &Request)) -> Result<(), Error> {
    same("operations", name, (ra, &a.kind()), (rb, &b.kind()))?;
    same("data types", name, (ra, &a.dtype), (rb, &b.dtype))?;
    same(
        "devices",
        name,
        (ra, &Placement(a.device)),
        (rb, &Placement(b.device)),
    )?;
    let shapes = if a.kind().first_dim_varies() {
        "shapes (all dims but the first must match)"
    } else {
        "shapes"
    };
    same(shapes, name, (ra, &AgreedDims(a)), (rb, &AgreedDims(b)))?;
    match (&a.op, &b.op) {
        (
            Op::Allreduce {
                reduction: x,
                compression: cx,
            },
            Op::Allreduce {
                reduction: y,
                compression: cy,
            },
        ) => {
            reductions(name, (ra, x), (rb, y))?;
            same("compressions", name, (ra, cx), (rb, cy))
        }
        (Op::Reducescatter { reduction: x }, Op::Reducescatter { reduction: y }) => {
            reductions(name, (ra, x), (rb, y))
        }
        (Op::Broadcast { root: x }, Op::Broadcast { root: y }) => {
            same("root ranks", name, (ra, x), (rb, y))
        }
        (Op::RemoveProcessSet { id: x }, Op::RemoveProcessSet { id: y }) => {
            same("process set ids", name, (ra, x), (rb, y))
        }
        (Op::AddProcessSet { members: x }, Op::AddProcessSet { members: y }) => same(
            "process set members",
            name,
            (ra, &Shape(x)),
            (rb, &Shape(y)),
        ),
        // The kinds are equal (checked first), and these have no fields of their own.
        _ => Ok(()),
    }
}

fn reductions(
    name: &str,
    (ra, x): (usize, &Reduction),
    (rb, y): (usize, &Reduction),
) -> Result<(), Error> {
    same("reduce ops", name, (ra, &x.op), (rb, &y.op))?;
    same(
        "prescale factors",
        name,
        (ra, &x.prescale),
        (rb, &y.prescale),
    )?;
    same(
        "postscale factors",
        name,
        (ra, &x.postscale),
        (rb, &y.postscale),
    )
}

/// Decides the response for `name` from every rank's request (`None` for joined ranks),
/// given the lowest-numbered rank that asked and its request.
pub(crate) fn decide(
    name: &str,
    first: (usize, &Request),
    requests: &[Option<Request>],
    last_joined: usize,
) -> Response {
    let kind = first.1.kind();
    let respond = |outcome| Response {
        name: name.into(),
        kind,
        outcome,
    };
    if let Some(err) = requests
        .iter()
        .enumerate()
        .filter_map(|(rank, r)| r.as_ref().map(|r| (rank, r)))
        .find_map(|other| agree(name, first, other).err())
    {
        return respond(Err(err));
    }
    let joined: Vec<bool> = requests.iter().map(Option::is_none).collect();
    if let Some(rank) = joined.iter().position(|j| *j) {
        let reason = if !kind.allowed_while_joined() {
            Some("only allreduce can run while ranks have joined".to_owned())
        } else if kind != OpKind::Join && first.1.device != Device::Cpu {
            // Its zeros would have to be made on the device.
            Some(format!(
                "joined ranks contribute zeros to host tensors only, and this one is on {}",
                first.1.device
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return respond(Err(Error::Joined {
                rank: first.0,
                op: kind.name(),
                tensor: name.into(),
                joined: rank,
                reason,
            }));
        }
    }
    let request = first.1;
    respond(Ok(Arc::new(Plan {
        op: request.op.clone(),
        dtype: request.dtype,
        shape: request.shape.clone(),
        device: request.device,
        wire: match request.op {
            Op::Allreduce { compression, .. } => compression.wire_dtype(request.dtype),
            _ => None,
        },
        rows: requests
            .iter()
            .map(|r| r.as_ref().map_or(0, Request::rows))
            .collect(),
        splits: requests
            .iter()
            .map(|r| match r.as_ref().map(|r| &r.op) {
                Some(Op::Alltoall { splits }) => splits.clone(),
                _ => Vec::new(),
            })
            .collect(),
        joined,
        last_joined,
    })))
}
