//! Which hosts an elastic job may use: a fixed list, or what a discovery script prints.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hvd_core::{Error, Result};

use crate::hostfile::{host_lines, parse_host_line};
use crate::hosts::Host;

/// How long a discovery script may run before its answer is taken as a failure.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the hosts of an elastic job come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSource {
    /// These hosts, for the whole job (`hvdrun --elastic -H ...`): hosts leave only by
    /// failing, and return after their cooldown.
    Fixed(Vec<Host>),
    /// The hosts a script prints, one per line (`host:slots`, or `host` with
    /// `slots_per_host` slots), asked again every discovery interval.
    Script {
        path: PathBuf,
        slots_per_host: Option<usize>,
    },
}

impl HostSource {
    /// The hosts available now.
    pub fn discover(&self) -> Result<Vec<Host>> {
        match self {
            HostSource::Fixed(hosts) => Ok(hosts.clone()),
            HostSource::Script {
                path,
                slots_per_host,
            } => {
                let output = run_script(path)?;
                parse_discovered(path, &output, *slots_per_host)
            }
        }
    }
}

/// Starts the script. "Text file busy" is tried again for a while: a script being
/// rewritten (by configuration management, or a test) is busy for as long as any process
/// forked meanwhile still holds the writer's descriptor, until that process execs.
fn spawn_script(path: &Path) -> std::io::Result<std::process::Child> {
    let mut tries = 0;
    loop {
        let started = Command::new(path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        match started {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// Runs the script and returns what it printed; a failure names the script.
fn run_script(path: &Path) -> Result<String> {
    let what = || format!("running the host discovery script {}", path.display());
    let mut child = spawn_script(path).map_err(|e| Error::io(what(), &e))?;
    // Read while it runs: a script that prints more than a pipe holds would otherwise
    // wait for a reader that waits for it to exit.
    let (printed, output) = std::sync::mpsc::channel();
    if let Some(mut stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = printed.send(stdout.read_to_string(&mut text).map(|_| text));
        });
    }
    let deadline = Instant::now() + SCRIPT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| Error::io(what(), &e))? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Io {
                context: what(),
                message: format!("it ran longer than {SCRIPT_TIMEOUT:?}"),
                kind: std::io::ErrorKind::TimedOut,
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Its output ends when every process holding it has closed it, which one it left
    // running in the background may never do.
    let output = match output.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(read) => read.map_err(|e| Error::io(what(), &e))?,
        Err(_) => {
            return Err(Error::Io {
                context: what(),
                message: format!(
                    "it exited, but a process it left running still held its output open {SCRIPT_TIMEOUT:?} after it started (redirect a background command's output)"
                ),
                kind: std::io::ErrorKind::TimedOut,
            });
        }
    };
    if !status.success() {
        return Err(Error::Io {
            context: what(),
            message: format!("it exited with {status}"),
            kind: std::io::ErrorKind::Other,
        });
    }
    Ok(output)
}

/// Hosts from a discovery script's output, read as hostfile lines (`host:slots`, or
/// `host` with `slots_per_host` slots; blank lines and `#` comments are skipped). A
/// host listed twice is an error, and so is a bare host without `slots_per_host`; an
/// error names the script and the line.
fn parse_discovered(
    script: &Path,
    output: &str,
    slots_per_host: Option<usize>,
) -> Result<Vec<Host>> {
    let mut hosts: Vec<Host> = Vec::new();
    for (number, line) in host_lines(output) {
        let bad = |why: String| Error::Config {
            name: format!(
                "line {number} of what --host-discovery-script {} printed",
                script.display()
            ),
            value: line.into(),
            expected: format!("`host:slots`, or `host` with --slots-per-host N ({why})"),
        };
        let (name, slots) = parse_host_line(line).map_err(bad)?;
        let slots = slots
            .or(slots_per_host)
            .ok_or_else(|| bad("no slot count, and no --slots-per-host".into()))?;
        if hosts.iter().any(|h| h.name == name) {
            return Err(bad(format!("host {name} is listed twice")));
        }
        hosts.push(Host {
            name: name.into(),
            slots,
        });
    }
    Ok(hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, slots: usize) -> Host {
        Host::new(name, slots)
    }

    fn discovered(output: &str, slots_per_host: Option<usize>) -> Result<Vec<Host>> {
        parse_discovered(Path::new("find-hosts.sh"), output, slots_per_host)
    }

    #[test]
    fn lines_give_hosts_with_their_slots_or_the_default() {
        let out = "a:4\n# a comment\n\n b \n[fd00::2]\nc slots=3\n";
        assert_eq!(
            discovered(out, Some(2)).unwrap(),
            [host("a", 4), host("b", 2), host("fd00::2", 2), host("c", 3)]
        );
        assert_eq!(discovered("", None).unwrap(), []);
    }

    #[test]
    fn a_bad_line_is_named_with_the_script_and_its_number() {
        let cases = [
            (
                "a:2\nb\n",
                None,
                "invalid value \"b\" for line 2 of what --host-discovery-script find-hosts.sh printed: expected `host:slots`, or `host` with --slots-per-host N (no slot count, and no --slots-per-host)",
            ),
            (
                "a:2\n\na:3\n",
                None,
                "invalid value \"a:3\" for line 3 of what --host-discovery-script find-hosts.sh printed: expected `host:slots`, or `host` with --slots-per-host N (host a is listed twice)",
            ),
            (
                "a:x\n",
                Some(2),
                "invalid value \"a:x\" for line 1 of what --host-discovery-script find-hosts.sh printed: expected `host:slots`, or `host` with --slots-per-host N (the slots \"x\" are not a whole number, 1 or more)",
            ),
            (
                "a b\n",
                Some(2),
                "invalid value \"a b\" for line 1 of what --host-discovery-script find-hosts.sh printed: expected `host:slots`, or `host` with --slots-per-host N (only slots=N may follow the host, not \"b\")",
            ),
        ];
        for (output, slots_per_host, error) in cases {
            assert_eq!(
                discovered(output, slots_per_host).unwrap_err().to_string(),
                error
            );
        }
    }

    #[test]
    fn a_script_is_run_and_a_failing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("hosts.sh");
        std::fs::write(&script, "#!/bin/sh\necho localhost:2\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let source = HostSource::Script {
            path: script.clone(),
            slots_per_host: None,
        };
        assert_eq!(source.discover().unwrap(), [host("localhost", 2)]);
        std::fs::write(&script, "#!/bin/sh\nexit 3\n").unwrap();
        assert_eq!(
            source.discover().unwrap_err().to_string(),
            format!(
                "running the host discovery script {}: it exited with exit status: 3",
                script.display()
            )
        );
        // More than a pipe holds: read while it runs, not after.
        std::fs::write(&script, "#!/bin/sh\nseq 20000 | sed 's/.*/host-&:1/'\n").unwrap();
        assert_eq!(source.discover().unwrap().len(), 20000);
    }

    #[test]
    fn a_script_whose_background_process_holds_its_output_is_named_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("hosts.sh");
        // The sleep holds the script's output, not the test's own stderr.
        std::fs::write(
            &script,
            "#!/bin/sh\nsleep 12.0707 2>/dev/null &\necho localhost:2\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let source = HostSource::Script {
            path: script.clone(),
            slots_per_host: None,
        };
        let started = Instant::now();
        let error = source.discover().unwrap_err().to_string();
        assert!(started.elapsed() < SCRIPT_TIMEOUT + Duration::from_secs(1));
        assert_eq!(
            error,
            format!(
                "running the host discovery script {}: it exited, but a process it left running still held its output open 10s after it started (redirect a background command's output)",
                script.display()
            )
        );
    }
}
