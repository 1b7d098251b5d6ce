//! What tests use from Rust: where the built library is, the names of its settings, and
//! its call trace read back.

use std::path::{Path, PathBuf};

/// Devices per process (default 8).
pub const DEVICES_VAR: &str = "HVD_GPU_DOUBLE_DEVICES";
/// Bytes of memory per device, with an optional K, M or G suffix (default `8G`).
pub const MEMORY_VAR: &str = "HVD_GPU_DOUBLE_MEMORY";
/// `1`: streams run a task only once something waits for it (default `0`).
pub const LAZY_VAR: &str = "HVD_GPU_DOUBLE_LAZY";
/// Faults to inject; see the [crate docs](crate).
pub const FAULTS_VAR: &str = "HVD_GPU_DOUBLE_FAULTS";
/// File the call trace is appended to.
pub const TRACE_VAR: &str = "HVD_GPU_DOUBLE_TRACE";

const FILE_NAME: &str = "libhvd_gpu_double.so";

/// The shared library cargo built next to the running test or example: in its own
/// folder, or the `deps` folder beside it (where cargo puts a dependency's cdylib).
pub fn library_path() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [
        dir.join(FILE_NAME),
        dir.join("deps").join(FILE_NAME),
        dir.join("..").join("deps").join(FILE_NAME),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "{FILE_NAME} is not built: add hvd-gpu-double as a dev-dependency (looked in {})",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// One call of the trace: the process, the entry point and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLine {
    pub pid: u32,
    pub function: String,
    pub args: Vec<(String, String)>,
}

impl TraceLine {
    /// The value of argument `key`, if the call had it.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn parse(line: &str) -> Option<TraceLine> {
        let mut words = line.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        let function = words.next()?.to_owned();
        let args = words
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Some(TraceLine {
            pid,
            function,
            args,
        })
    }
}

/// A call trace written under [`TRACE_VAR`], read back.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub lines: Vec<TraceLine>,
}

impl Trace {
    /// Reads the trace at `path` (empty when no call was traced).
    pub fn read(path: &Path) -> Trace {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        Trace {
            lines: text.lines().filter_map(TraceLine::parse).collect(),
        }
    }

    /// The calls of `function`.
    pub fn calls<'t>(&'t self, function: &'t str) -> impl Iterator<Item = &'t TraceLine> + 't {
        self.lines.iter().filter(move |l| l.function == function)
    }

    /// How many calls of `function` there were.
    pub fn count(&self, function: &str) -> usize {
        self.calls(function).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines_parse_into_function_and_arguments() {
        let line = TraceLine::parse("42 ncclAllReduce rank=1 count=7 dtype=7").unwrap();
        assert_eq!((line.pid, line.function.as_str()), (42, "ncclAllReduce"));
        assert_eq!((line.arg("rank"), line.arg("op")), (Some("1"), None));
        assert_eq!(TraceLine::parse("garbage"), None);
    }
}
