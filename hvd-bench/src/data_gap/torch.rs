//! PyTorch's `DataLoader` as the benchmark's input: a Python process per rank runs it
//! (Pillow decoding, torchvision's augmentation, worker processes and prefetch as its
//! users run it), and hands over each batch when the rank asks for it.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

/// The script a rank's Python process runs.
const SCRIPT: &str = include_str!("torch_loader.py");

use super::python::MODULES;
pub use super::python::candidate;

/// `python` if it imports torch, torchvision and Pillow, else why not.
pub fn check(python: &Path) -> Result<PathBuf, String> {
    let out = Command::new(python)
        .args(["-c", &format!("import {}", MODULES.join(", "))])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot run: {e}", python.display()))?;
    if out.status.success() {
        Ok(python.to_path_buf())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or("no message");
        Err(format!(
            "{} cannot import torch, torchvision and PIL ({last})",
            python.display()
        ))
    }
}

/// One rank's DataLoader process.
pub struct TorchLoader {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<std::io::Result<String>>,
    rank: usize,
    timeout: Duration,
}

impl TorchLoader {
    /// Starts the DataLoader of rank `rank` of `size` over the image folder `root`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        python: &Path,
        root: &Path,
        rank: usize,
        size: usize,
        batch: usize,
        workers: usize,
        prefetch: usize,
        seed: u64,
        timeout: Duration,
    ) -> Result<Self, String> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(SCRIPT)
            .arg(root)
            .args([rank, size, batch, workers, prefetch].map(|n| n.to_string()))
            .arg(seed.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("rank {rank}: {} cannot start: {e}", python.display()))?;
        let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => return Err(format!("rank {rank}: the DataLoader process has no pipes")),
        };
        let (send, lines) = channel();
        // A thread reads the answers, so that every wait for one can be bounded.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut loader = TorchLoader {
            child,
            stdin,
            lines,
            rank,
            timeout,
        };
        let ready = loader.answer("start")?;
        if !ready.starts_with("ready") {
            return Err(format!(
                "rank {rank}: the DataLoader said {ready:?} at start"
            ));
        }
        Ok(loader)
    }

    fn answer(&mut self, request: &str) -> Result<String, String> {
        let rank = self.rank;
        match self.lines.recv_timeout(self.timeout) {
            Ok(Ok(line)) if line.starts_with("error") => {
                Err(format!("rank {rank}: the DataLoader's {request}: {line}"))
            }
            Ok(Ok(line)) => Ok(line),
            Ok(Err(e)) => Err(format!(
                "rank {rank}: reading the DataLoader's {request}: {e}"
            )),
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "rank {rank}: the DataLoader gave no answer to {request} in {:?}",
                self.timeout
            )),
            Err(RecvTimeoutError::Disconnected) => Err(format!(
                "rank {rank}: the DataLoader process ended during {request} (see its error above)"
            )),
        }
    }

    fn ask(&mut self, request: &str) -> Result<String, String> {
        writeln!(self.stdin, "{request}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("rank {}: asking the DataLoader {request}: {e}", self.rank))?;
        self.answer(request)
    }

    /// Starts epoch `epoch` (DistributedSampler's shuffle of it).
    pub fn epoch(&mut self, epoch: u64) -> Result<(), String> {
        self.ask(&format!("epoch {epoch}")).map(drop)
    }

    /// The next batch's number of images.
    pub fn next_batch(&mut self) -> Result<usize, String> {
        let line = self.ask("next")?;
        line.strip_prefix("batch ")
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| format!("rank {}: the DataLoader answered {line:?}", self.rank))
    }
}

impl Drop for TorchLoader {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit").and_then(|()| self.stdin.flush());
        // Bounded: the process exits once its workers have; past that it is killed.
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
