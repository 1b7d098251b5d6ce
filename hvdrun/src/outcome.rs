//! How a job ended, and the summary a user reads.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// Every rank exited with status 0.
    Success,
    /// `rank`'s failure ended the job: the root cause, not the first rank to exit
    /// because of it. The ranks still running were stopped.
    Failed {
        rank: usize,
        /// The host it ran on, for a job of several hosts.
        host: Option<String>,
        /// "exit code 3", "killed by signal 9", or that it was still running when its
        /// peers lost it.
        status: String,
        /// The exit code, 128 + the signal for a rank killed by a signal; 1 for a rank
        /// that was still running.
        exit_code: i32,
        /// The last lines (up to 10) of the rank's standard error.
        stderr_tail: Vec<String>,
        /// Ranks that failed because they lost this one.
        lost_by: Vec<usize>,
        /// How many other ranks were still running and were stopped.
        stopped: usize,
    },
    /// SIGINT or SIGTERM reached the launcher; `stopped` ranks were still running.
    Interrupted { stopped: usize },
    /// Not every rank connected within the start timeout; the job was stopped.
    StartTimeout {
        timeout: Duration,
        missing: Vec<MissingRank>,
    },
    /// An elastic job could not go on: too few slots for longer than its elastic
    /// timeout, or more resets than its limit. `reason` says which, with the numbers.
    Elastic { reason: String },
}

/// A rank that did not check in before the start timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingRank {
    pub rank: usize,
    /// The host it ran on, for a job of several hosts.
    pub host: Option<String>,
    /// How it had ended, if it had ("exit code 2"); None: it was still running.
    pub exited: Option<String>,
    pub stderr_tail: Vec<String>,
}

impl JobOutcome {
    /// The exit status a launcher should end with: 0, the failed rank's code, 130 when
    /// interrupted, 1 when the job did not start.
    pub fn exit_code(&self) -> i32 {
        match self {
            JobOutcome::Success => 0,
            JobOutcome::Failed { exit_code, .. } => *exit_code,
            JobOutcome::Interrupted { .. } => 130,
            JobOutcome::StartTimeout { .. } | JobOutcome::Elastic { .. } => 1,
        }
    }
}

fn write_tail(f: &mut std::fmt::Formatter<'_>, intro: &str, tail: &[String]) -> std::fmt::Result {
    if tail.is_empty() {
        return write!(f, " It wrote nothing to stderr.");
    }
    write!(f, " {intro}")?;
    for line in tail {
        write!(f, "\n    {line}")?;
    }
    Ok(())
}

/// The summary a user reads, without a program-name prefix.
impl std::fmt::Display for JobOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobOutcome::Success => write!(f, "every rank exited successfully"),
            JobOutcome::Failed {
                rank,
                host,
                status,
                stderr_tail,
                lost_by,
                stopped,
                ..
            } => {
                write!(f, "rank {rank}{} failed first ({status})", on(host))?;
                if !lost_by.is_empty() {
                    let (noun, verb) = if lost_by.len() == 1 {
                        ("rank", "it")
                    } else {
                        ("ranks", "they")
                    };
                    write!(
                        f,
                        "; {noun} {} failed because {verb} lost rank {rank}",
                        list(lost_by)
                    )?;
                }
                match stopped {
                    0 => write!(f, ".")?,
                    1 => write!(f, "; the other rank was stopped.")?,
                    _ => write!(f, "; the other ranks were stopped.")?,
                }
                write_tail(f, "Last lines of its stderr:", stderr_tail)
            }
            JobOutcome::Interrupted { stopped } => {
                write!(f, "interrupted; stopped {stopped} ranks")
            }
            JobOutcome::Elastic { reason } => write!(f, "{reason}"),
            JobOutcome::StartTimeout { timeout, missing } => {
                let ranks: Vec<usize> = missing.iter().map(|m| m.rank).collect();
                let noun = if ranks.len() == 1 { "rank" } else { "ranks" };
                write!(
                    f,
                    "{noun} {} did not connect within {}s; the job was stopped.",
                    list(&ranks),
                    timeout.as_secs_f64(),
                )?;
                for m in missing {
                    match &m.exited {
                        None => write!(
                            f,
                            "\n  rank {}{}: still running, never reached the rendezvous (did it call hvd::init()?)",
                            m.rank,
                            on(&m.host)
                        )?,
                        Some(status) => {
                            write!(f, "\n  rank {}{}: exited ({status}).", m.rank, on(&m.host))?;
                            write_tail(f, "Last lines of its stderr:", &m.stderr_tail)?;
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

fn list(ranks: &[usize]) -> String {
    let ranks: Vec<String> = ranks.iter().map(usize::to_string).collect();
    ranks.join(", ")
}

fn on(host: &Option<String>) -> String {
    host.as_ref()
        .map_or_else(String::new, |h| format!(" on {h}"))
}

/// How a rank's process ended, in words, and the exit code a launcher passes on (128 + the
/// signal for a rank killed by one). Over ssh a signal arrives as the remote shell's
/// 128 + N, and 255 is ssh's own failure.
pub(crate) fn ended(status: ExitStatus, over_ssh: bool) -> (String, i32) {
    if let Some(signal) = status.signal() {
        return (format!("killed by signal {signal}"), 128 + signal);
    }
    let Some(code) = status.code() else {
        return (status.to_string(), 1);
    };
    let text = match code {
        127 => "exit code 127: command not found".to_string(),
        super::ssh::SSH_FAILED if over_ssh => {
            "exit code 255: ssh failed (host unreachable, login refused, or the rank exited 255)"
                .to_string()
        }
        129..=192 if over_ssh => format!("killed by signal {}", code - 128),
        _ => format!("exit code {code}"),
    };
    (text, code)
}
