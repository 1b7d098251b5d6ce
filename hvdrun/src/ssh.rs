//! Starting a rank on another host over ssh, so that it can never outlive the launcher.
//!
//! The remote side runs a small POSIX shell wrapper. It reads the job secret from the
//! first line of its standard input (so the secret never appears in a process list),
//! starts the rank in a session of its own, and watches standard input: when the
//! launcher closes it, or the launcher or its ssh dies and the connection drops, the
//! wrapper sends SIGTERM to the rank's whole process group and SIGKILL after the grace
//! period (as `kill -s SIG -- -PGID`, the form dash accepts). Once the rank has exited,
//! whatever it left running in its process group is killed: a stop can reach the rank
//! between `setsid` and its children, and they must not outlive it. The rank's exit
//! status comes back as ssh's (255 is ssh's own failure).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How to reach other hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ssh {
    /// `-p`: the port sshd listens on.
    pub port: Option<u16>,
    /// `-i`: the private key to log in with.
    pub identity: Option<PathBuf>,
    /// Extra `-o NAME=VALUE` options, such as `UserKnownHostsFile=...`.
    pub options: Vec<String>,
}

/// ssh's exit status when ssh itself failed (could not connect, refused, ...).
pub const SSH_FAILED: i32 = 255;

/// The remote wrapper; `$1` is the grace period in seconds, the rest is the command.
const WRAPPER: &str = r#"
grace=$1; shift
IFS= read -r HVD_SECRET || { echo "hvdrun: no job secret arrived on $(hostname)" >&2; exit 254; }
export HVD_SECRET
cd "$HVD_LAUNCH_DIR" 2>/dev/null
exec 3<&0
setsid "$@" </dev/null &
rank=$!
(
    while IFS= read -r _; do :; done
    kill -s TERM -- "-$rank" 2>/dev/null || kill -s TERM "$rank" 2>/dev/null
    sleep "$grace"
    kill -s KILL -- "-$rank" 2>/dev/null || kill -s KILL "$rank" 2>/dev/null
) <&3 >/dev/null 2>&1 &
watch=$!
exec 3<&-
wait "$rank"
status=$?
kill "$watch" 2>/dev/null
kill -s KILL -- "-$rank" 2>/dev/null
exit "$status"
"#;

/// Quotes `s` for a POSIX shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Ssh {
    /// The local `ssh` command that runs `program args` on `host` with `env` set, in the
    /// directory `dir` when the remote host has it.
    pub fn command(
        &self,
        host: &str,
        env: &[(String, String)],
        dir: &Path,
        program: &Path,
        args: &[String],
        grace: Duration,
    ) -> Command {
        self.remote(host, &self.remote_line(env, dir, program, args, grace))
    }

    /// The local `ssh` command that runs the shell line `line` on `host`: batch mode (a
    /// password prompt fails instead of hanging), a connect timeout, keep-alives that
    /// notice a dead connection.
    pub fn remote(&self, host: &str, line: &str) -> Command {
        let mut command = Command::new("ssh");
        command.args([
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
        ]);
        if let Some(port) = self.port {
            command.arg("-p").arg(port.to_string());
        }
        if let Some(identity) = &self.identity {
            command.arg("-i").arg(identity);
        }
        for option in &self.options {
            command.arg("-o").arg(option);
        }
        command.arg(host).arg(line);
        command
    }

    /// The shell line ssh hands to the remote login shell.
    fn remote_line(
        &self,
        env: &[(String, String)],
        dir: &Path,
        program: &Path,
        args: &[String],
        grace: Duration,
    ) -> String {
        let mut words = vec![
            "exec".to_string(),
            "env".into(),
            quote(&format!("HVD_LAUNCH_DIR={}", dir.display())),
            "/bin/sh".into(),
            "-c".into(),
            quote(WRAPPER),
            "hvd-rank".into(),
            grace.as_secs().max(1).to_string(),
            "env".into(),
        ];
        words.extend(env.iter().map(|(k, v)| quote(&format!("{k}={v}"))));
        words.push(quote(&program.display().to_string()));
        words.extend(args.iter().map(|a| quote(a)));
        words.join(" ")
    }
}

/// Whether a variable of the launcher's environment travels to remote ranks. Never the
/// secret: the job's own goes over stdin, and one from the launcher's environment would
/// both show in a process list and replace it.
pub fn travels(name: &str) -> bool {
    name != "HVD_SECRET" && name.starts_with("HVD_")
        || name.starts_with("HOROVOD_")
        || matches!(
            name,
            "PATH" | "LD_LIBRARY_PATH" | "RUST_LOG" | "RUST_BACKTRACE"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(quote("it's"), r"'it'\''s'");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote("a 'b' $c \"d\"")))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "a 'b' $c \"d\"");
    }

    #[test]
    fn what_travels() {
        assert!(travels("HVD_TIMELINE") && travels("HOROVOD_FUSION_THRESHOLD"));
        assert!(travels("PATH") && travels("LD_LIBRARY_PATH") && travels("RUST_LOG"));
        assert!(!travels("HOME") && !travels("SSH_AUTH_SOCK"));
        assert!(!travels("HVD_SECRET"));
    }

    /// Starts the remote line for `command` through a local `sh -c`, as the remote login
    /// shell would, and sends it the secret; returns it with its stdin still open.
    fn start_line(
        command: &str,
        grace: Duration,
    ) -> (std::process::Child, std::process::ChildStdin) {
        use std::io::Write;
        let line = Ssh::default().remote_line(
            &[("HVD_RANK".into(), "3".into())],
            Path::new("/"),
            Path::new("sh"),
            &["-c".into(), command.into()],
            grace,
        );
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(line)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"s3cret\n").unwrap();
        (child, stdin)
    }

    /// Runs `command` to its end, with stdin left open or closed at once.
    fn run_line(command: &str, stdin_open: bool) -> (String, Option<i32>, Duration) {
        use std::io::Read;
        let started = std::time::Instant::now();
        let (mut child, stdin) = start_line(command, Duration::from_secs(1));
        let stdin = stdin_open.then_some(stdin);
        let mut out = String::new();
        let mut stdout = child.stdout.take().unwrap();
        stdout.read_to_string(&mut out).unwrap();
        let status = child.wait().unwrap();
        drop(stdin);
        (out, status.code(), started.elapsed())
    }

    #[test]
    fn the_remote_line_runs_the_command_with_secret_env_dir_and_status() {
        let (out, code, _) = run_line(
            "echo rank=$HVD_RANK secret=$HVD_SECRET dir=$(pwd); exit 7",
            true,
        );
        assert_eq!(out, "rank=3 secret=s3cret dir=/\n");
        assert_eq!(code, Some(7));
    }

    #[test]
    fn a_running_rank_and_its_children_get_sigterm_first() {
        use std::io::{BufRead, BufReader, Read};
        let started = std::time::Instant::now();
        // The child says it is ready once its trap is set (the rank's was set before it
        // started the child), so SIGTERM cannot arrive before the traps, however slow
        // the machine; the rank's trap waits for the child, so the child has spoken
        // before the rank's exit ends the group.
        let (mut child, stdin) = start_line(
            "trap 'echo stopping; wait; exit 3' TERM; \
             sh -c \"trap 'echo child stopping; exit 4' TERM; echo ready; sleep 30 & wait\" & \
             wait",
            Duration::from_secs(20),
        );
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        stdout.read_line(&mut ready).unwrap();
        assert_eq!(ready, "ready\n");
        drop(stdin);
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        // Both traps ran: SIGTERM reached the whole group, not the SIGKILL 20 s later.
        let mut lines: Vec<&str> = rest.lines().collect();
        lines.sort();
        assert_eq!(lines, ["child stopping", "stopping"]);
        assert_eq!(child.wait().unwrap().code(), Some(3));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn closing_stdin_stops_the_rank_and_what_it_started() {
        let (_, code, took) = run_line("sleep 30 & sleep 30; wait", false);
        assert_eq!(code, Some(128 + libc::SIGTERM));
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
}
