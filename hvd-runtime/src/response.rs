//! Responses: what every rank agrees to do with a tensor once all ranks have asked, and
//! the consistency checks that decide it.

use hvd_core::{DType, Device, Error, Reduction};

use super::request::{OpKind, Request};

/// The agreed way to run one collective, identical on every rank.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    pub dtype: DType,
    /// The shape of the lowest-numbered rank that submitted (all agree but for the first
    /// dim of allgather and alltoall).
    pub shape: Vec<usize>,
    pub device: Device,
    pub reduction: Reduction,
    /// The dtype float tensors travel as, when an allreduce compresses them.
    pub wire: Option<DType>,
    pub root: usize,
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
    pub name: String,
    pub kind: OpKind,
    pub outcome: Result<Plan, Error>,
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

/// The dims ranks must agree on: all of them, or all but the first for ops that gather
/// along the first dim. Shown whole in messages.
struct AgreedDims<'a>(&'a Request);

impl PartialEq for AgreedDims<'_> {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0.shape, &other.0.shape);
        if self.0.kind.first_dim_varies() {
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
    same("operations", name, (ra, &a.kind), (rb, &b.kind))?;
    same("data types", name, (ra, &a.dtype), (rb, &b.dtype))?;
    same("devices", name, (ra, &a.device), (rb, &b.device))?;
    let shapes = if a.kind.first_dim_varies() {
        "shapes (all dims but the first must match)"
    } else {
        "shapes"
    };
    same(shapes, name, (ra, &AgreedDims(a)), (rb, &AgreedDims(b)))?;
    if matches!(a.kind, OpKind::Allreduce | OpKind::Reducescatter) {
        let (x, y) = (a.reduction, b.reduction);
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
        )?;
        same(
            "compressions",
            name,
            (ra, &a.compression),
            (rb, &b.compression),
        )?;
    }
    match a.kind {
        OpKind::Broadcast => same("root ranks", name, (ra, &a.root), (rb, &b.root))?,
        OpKind::RemoveProcessSet => same("process set ids", name, (ra, &a.root), (rb, &b.root))?,
        OpKind::AddProcessSet => same(
            "process set members",
            name,
            (ra, &Shape(&a.splits)),
            (rb, &Shape(&b.splits)),
        )?,
        _ => {}
    }
    Ok(())
}

/// Decides the response for `name` from every rank's request (`None` for joined ranks).
pub(crate) fn decide(name: &str, requests: &[Option<Request>], last_joined: usize) -> Response {
    let present: Vec<(usize, &Request)> = requests
        .iter()
        .enumerate()
        .filter_map(|(rank, r)| r.as_ref().map(|r| (rank, r)))
        .collect();
    let kind = present
        .first()
        .map(|(_, r)| r.kind)
        .unwrap_or(OpKind::Barrier);
    let respond = |outcome| Response {
        name: name.into(),
        kind,
        outcome,
    };
    let Some(&first) = present.first() else {
        return respond(Err(Error::Shutdown {
            cause: format!("internal error: no rank requested '{name}'"),
        }));
    };
    if let Some(err) = present[1..]
        .iter()
        .find_map(|other| agree(name, first, *other).err())
    {
        return respond(Err(err));
    }
    let joined: Vec<bool> = requests.iter().map(Option::is_none).collect();
    if let Some(rank) = joined.iter().position(|j| *j)
        && !kind.allowed_while_joined()
    {
        return respond(Err(Error::InvalidArgument {
            rank: first.0,
            op: kind.name(),
            tensor: name.into(),
            reason: format!(
                "rank {rank} has joined; only allreduce can run while ranks have joined"
            ),
        }));
    }
    let request = first.1;
    respond(Ok(Plan {
        dtype: request.dtype,
        shape: request.shape.clone(),
        device: request.device,
        reduction: request.reduction,
        wire: match kind {
            OpKind::Allreduce => request.compression.wire_dtype(request.dtype),
            _ => None,
        },
        root: request.root,
        rows: requests
            .iter()
            .map(|r| r.as_ref().map_or(0, Request::rows))
            .collect(),
        splits: requests
            .iter()
            .map(|r| r.as_ref().map_or_else(Vec::new, |r| r.splits.clone()))
            .collect(),
        joined,
        last_joined,
    }))
}
