//! The state of one rank's run through the suite, and the helpers checks use.

use std::cell::RefCell;
use std::sync::Arc;

use super::{Failure, Options, Report, values};
use crate::{Collective, DType, DeviceBlock, DeviceMemory, Tensor, TensorMut};

/// The start of the detail of a failure reported by a rank whose own check passed.
pub(super) const OTHER_RANK_FAILED: &str = "another rank failed this check";

/// The body of a check: runs collectively on every rank; `Err` only for errors that end
/// the check at once (see [`Context::verify`] for wrong results).
type Body = Box<dyn Fn(&Context<'_>) -> Result<(), String>>;

/// One check of the suite: a name and a body.
pub struct Check {
    pub name: String,
    pub body: Body,
}

impl Check {
    pub fn new(
        name: impl Into<String>,
        body: impl Fn(&Context<'_>) -> Result<(), String> + 'static,
    ) -> Self {
        Check {
            name: name.into(),
            body: Box::new(body),
        }
    }
}

/// A check's buffer: host bytes, or device memory holding them when the suite runs on a
/// device.
#[derive(Debug)]
pub enum Buffer {
    Host(Vec<u8>),
    Device(DeviceBlock),
}

/// What a check sees: the collective under test, the options, and the device memory the
/// tensors live in (host memory when there is none).
pub struct Context<'a> {
    group: &'a dyn Collective,
    options: &'a Options,
    memory: Option<Arc<dyn DeviceMemory>>,
    passed: Vec<String>,
    /// The first wrong result of the running check. A wrong result does not stop the
    /// check: every rank must go on making the same collective calls, or they desync.
    wrong: RefCell<Option<String>>,
}

impl<'a> Context<'a> {
    pub(super) fn new(
        group: &'a dyn Collective,
        options: &'a Options,
        memory: Option<Arc<dyn DeviceMemory>>,
    ) -> Self {
        Context {
            group,
            options,
            memory,
            passed: Vec::new(),
            wrong: RefCell::new(None),
        }
    }

    pub fn group(&self) -> &dyn Collective {
        self.group
    }

    pub fn options(&self) -> &Options {
        self.options
    }

    pub fn rank(&self) -> usize {
        self.group.topology().rank()
    }

    pub fn size(&self) -> usize {
        self.group.topology().size()
    }

    /// Whether the suite runs on device memory (a device transport's).
    pub fn on_device(&self) -> bool {
        self.memory.is_some()
    }

    /// A buffer holding `bytes`: on the device under test (copied there on its memory's
    /// stream, so the transport must wait for it), or in host memory.
    pub fn buffer(&self, bytes: Vec<u8>) -> Result<Buffer, String> {
        match &self.memory {
            None => Ok(Buffer::Host(bytes)),
            Some(memory) => DeviceBlock::with_contents(memory, &bytes)
                .map(Buffer::Device)
                .map_err(|e| format!("putting {} bytes on the device: {e}", bytes.len())),
        }
    }

    /// A writable view of `buffer` as a tensor.
    pub fn view_mut<'b>(
        &self,
        buffer: &'b mut Buffer,
        name: &'b str,
        dtype: DType,
        shape: Vec<usize>,
    ) -> Result<TensorMut<'b>, String> {
        match buffer {
            Buffer::Host(bytes) => TensorMut::from_bytes(name, dtype, shape, bytes),
            Buffer::Device(block) => TensorMut::from_device(name, dtype, shape, block.buffer()),
        }
        .map_err(|e| e.to_string())
    }

    /// A read-only view of `buffer` as a tensor.
    pub fn view<'b>(
        &self,
        buffer: &'b mut Buffer,
        name: &'b str,
        dtype: DType,
        shape: Vec<usize>,
    ) -> Result<Tensor<'b>, String> {
        match buffer {
            Buffer::Host(bytes) => Tensor::from_bytes(name, dtype, shape, bytes),
            Buffer::Device(block) => Tensor::from_device(name, dtype, shape, block.buffer()),
        }
        .map_err(|e| e.to_string())
    }

    /// What `buffer` holds now, read back from the device when it is there.
    pub fn contents(&self, buffer: &mut Buffer) -> Result<Vec<u8>, String> {
        match buffer {
            Buffer::Host(bytes) => Ok(bytes.clone()),
            Buffer::Device(block) => block
                .contents()
                .map_err(|e| format!("reading {} bytes back from the device: {e}", block.len())),
        }
    }

    /// Records a wrong result (the first one counts) and lets the check go on.
    pub fn verify(&self, outcome: Result<(), String>) {
        if let Err(detail) = outcome {
            self.wrong.borrow_mut().get_or_insert(detail);
        }
    }

    /// Runs `check` on this rank, then agrees with the other ranks whether it passed
    /// everywhere.
    pub(super) fn run(&mut self, check: Check) -> Result<(), Failure> {
        let outcome = (check.body)(self).and_then(|()| match self.wrong.take() {
            Some(detail) => Err(detail),
            None => Ok(()),
        });
        self.wrong.take();
        let failure = |detail: String| Failure {
            check: check.name.clone(),
            rank: self.rank(),
            detail,
        };
        let failed_ranks = match self.failed_ranks(outcome.is_err()) {
            Ok(ranks) => ranks,
            Err(e) => {
                let own = outcome
                    .err()
                    .map(|d| format!("{d}; then "))
                    .unwrap_or_default();
                return Err(failure(format!("{own}agreeing on the outcome failed: {e}")));
            }
        };
        match outcome {
            Err(detail) => Err(failure(detail)),
            Ok(()) if !failed_ranks.is_empty() => Err(failure(format!(
                "{OTHER_RANK_FAILED} (ranks {failed_ranks:?})"
            ))),
            Ok(()) => {
                self.passed.push(check.name);
                Ok(())
            }
        }
    }

    fn failed_ranks(&self, failed: bool) -> Result<Vec<usize>, String> {
        let size = self.size();
        let name = "conformance.outcome";
        let mut mine = self.buffer(vec![u8::from(failed)])?;
        let mut all = self.buffer(vec![0u8; size])?;
        call(
            "allgather",
            self.group.allgather(
                &self.view(&mut mine, name, DType::U8, vec![1])?,
                &mut self.view_mut(&mut all, name, DType::U8, vec![size])?,
                &vec![1; size],
            ),
        )?;
        let all = self.contents(&mut all)?;
        Ok((0..size).filter(|r| all[*r] != 0).collect())
    }

    pub(super) fn into_report(self) -> Report {
        Report {
            rank: self.rank(),
            size: self.size(),
            passed: self.passed,
        }
    }
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("backend", &self.group.backend())
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("passed", &self.passed.len())
            .finish()
    }
}

/// Compares a result with its expectation element by element; the error names the
/// tensor, the first differing element, both values, and how many differ.
pub fn compare(tensor: &str, dtype: DType, expected: &[u8], actual: &[u8]) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!(
            "tensor '{tensor}': expected {} bytes, got {}",
            expected.len(),
            actual.len()
        ));
    }
    let count = expected.len() / dtype.size();
    let differ = |i: &usize| {
        let (e, a) = (
            values::element(dtype, expected, *i),
            values::element(dtype, actual, *i),
        );
        !values::close(dtype, e, a)
    };
    let mut bad = (0..count).filter(differ);
    let Some(first) = bad.next() else {
        return Ok(());
    };
    Err(format!(
        "tensor '{tensor}' ({count} x {dtype}), element {first}: expected {}, got {} ({} element(s) differ)",
        values::element(dtype, expected, first),
        values::element(dtype, actual, first),
        1 + bad.count()
    ))
}

/// Turns a collective's error into a check failure. Unlike a wrong result, an error ends
/// the check at once: the transport has probably lost sync already.
pub fn call(what: &str, result: crate::Result<()>) -> Result<(), String> {
    result.map_err(|e| format!("{what} returned an error: {e}"))
}
