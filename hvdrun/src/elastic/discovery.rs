//! Which hosts an elastic job may use: a fixed list, or what a discovery script prints.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hvd_core::{Error, Result};

use crate::hosts::{Host, parse_hosts};

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
                parse_discovered(&output, *slots_per_host).map_err(|why| Error::Config {
                    name: format!("--host-discovery-script {}", path.display()),
                    value: output.trim().to_owned(),
                    expected: why,
                })
            }
        }
    }
}

/// Runs the script and returns what it printed; a failure names the script.
fn run_script(path: &PathBuf) -> Result<String> {
    let what = || format!("running the host discovery script {}", path.display());
    let mut child = Command::new(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::io(what(), &e))?;
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
    let mut output = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout
            .read_to_string(&mut output)
            .map_err(|e| Error::io(what(), &e))?;
    }
    if !status.success() {
        return Err(Error::Io {
            context: what(),
            message: format!("it exited with {status}"),
            kind: std::io::ErrorKind::Other,
        });
    }
    Ok(output)
}

/// Hosts from a discovery script's output: one per line, `host:slots` or `host`
/// (`slots_per_host` slots). Blank lines and `#` comments are skipped; a host listed
/// twice is an error, and so is a bare host without `slots_per_host`.
fn parse_discovered(
    output: &str,
    slots_per_host: Option<usize>,
) -> std::result::Result<Vec<Host>, String> {
    let mut hosts: Vec<Host> = Vec::new();
    for line in output.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parsed = parse_hosts(line).map_err(|e| e.to_string())?;
        let [host] = parsed.as_mut_slice() else {
            return Err(format!("one host per line, got {line:?}"));
        };
        if !line.contains(':') || line.ends_with(']') {
            host.slots = slots_per_host.ok_or_else(|| {
                format!("{line:?} gives no slot count: print host:slots, or pass --slots-per-host")
            })?;
        }
        if hosts.iter().any(|h| h.name == host.name) {
            return Err(format!("host {} listed twice", host.name));
        }
        hosts.push(host.clone());
    }
    Ok(hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, slots: usize) -> Host {
        Host {
            name: name.into(),
            slots,
        }
    }

    #[test]
    fn lines_give_hosts_with_their_slots_or_the_default() {
        let out = "a:4\n# a comment\n\n b \n[fd00::2]\n";
        assert_eq!(
            parse_discovered(out, Some(2)).unwrap(),
            [host("a", 4), host("b", 2), host("fd00::2", 2)]
        );
        assert_eq!(
            parse_discovered("b\n", None).unwrap_err(),
            "\"b\" gives no slot count: print host:slots, or pass --slots-per-host"
        );
        assert_eq!(
            parse_discovered("a:2\na:3\n", None).unwrap_err(),
            "host a listed twice"
        );
        assert_eq!(parse_discovered("", None).unwrap(), []);
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
    }
}
