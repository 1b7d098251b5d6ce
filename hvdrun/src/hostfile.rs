//! Hostfiles: Open MPI's `host slots=N` lines, MPICH's `host:N`, and which file an MPI
//! launcher's environment names.
//!
//! Kubeflow's MPI Operator (and Kubeflow Trainer's MPI runtime) mounts a hostfile in the
//! launcher pod and names it in the variable its MPI flavour reads, so that a bare
//! `mpirun` finds the workers; hvdrun reads the same variables, so a bare `hvdrun` does.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use hvd_core::{Error, Result};

use crate::hosts::{Host, split_slots};

/// The variables that name a hostfile for mpirun, in the order they are looked at: Open
/// MPI's, Intel MPI's and MPICH's (those the MPI Operator sets for each flavour).
pub const HOSTFILE_VARIABLES: [&str; 3] = [
    "OMPI_MCA_orte_default_hostfile",
    "I_MPI_HYDRA_HOST_FILE",
    "HYDRA_HOST_FILE",
];

/// What the lines of a hostfile may look like, for errors.
const EXPECTED: &str = "`host slots=N` or `host:N`";

/// The first of [`HOSTFILE_VARIABLES`] that `lookup` finds set and not empty, with the
/// path it names.
pub fn hostfile_named_by(
    lookup: impl Fn(&str) -> Option<OsString>,
) -> Option<(&'static str, PathBuf)> {
    HOSTFILE_VARIABLES.iter().find_map(|&name| {
        lookup(name)
            .filter(|value| !value.is_empty())
            .map(|value| (name, PathBuf::from(value)))
    })
}

/// The lines of a hostfile or of a discovery script's output that say something, with
/// their numbers from 1: `#` starts a comment, blank lines are skipped.
pub(crate) fn host_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(index, line)| {
        let line = line.split('#').next().unwrap_or("").trim();
        (!line.is_empty()).then_some((index + 1, line))
    })
}

/// One line: `host`, `host slots=N`, or `host:N` (`[v6 address]:N`). The slots are None
/// when the line gives none; the error says what is wrong with it.
pub(crate) fn parse_host_line(line: &str) -> std::result::Result<(&str, Option<usize>), String> {
    let count = |value: &str| {
        value
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("the slots {value:?} are not a whole number, 1 or more"))
    };
    let mut words = line.split_whitespace();
    let first = words.next().ok_or("no host")?;
    if first.contains(',') {
        return Err("one host per line".into());
    }
    let (name, mut slots) = match split_slots(first) {
        (name, Some(value)) => (name, Some(count(value)?)),
        (name, None) => (name, None),
    };
    if name.is_empty() {
        return Err("no host before the slots".into());
    }
    for word in words {
        match word.split_once('=') {
            Some(("slots", value)) => slots = Some(count(value)?),
            // A cap on oversubscription, which hvdrun never does: nothing to obey.
            Some(("max_slots" | "max-slots", value)) => {
                count(value)?;
            }
            _ => return Err(format!("only slots=N may follow the host, not {word:?}")),
        }
    }
    Ok((name, slots))
}

/// Parses a hostfile: one host per line as `host slots=N` (Open MPI, and Horovod) or
/// `host:N` (MPICH, Intel MPI); `#` starts a comment. A line without a count is one slot
/// (MPICH's rule: Open MPI would count the cores of that host, which hvdrun cannot know
/// before it runs anything there), and a host on several lines has the sum of their
/// slots, as both count them.
pub fn parse_hostfile(path: &Path) -> Result<Vec<Host>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading hostfile {}", path.display()), &e))?;
    let mut hosts: Vec<Host> = Vec::new();
    for (number, line) in host_lines(&text) {
        let (name, slots) = parse_host_line(line).map_err(|why| Error::Config {
            name: format!("hostfile {} line {number}", path.display()),
            value: line.into(),
            expected: format!("{EXPECTED} ({why})"),
        })?;
        let slots = slots.unwrap_or(1);
        match hosts.iter_mut().find(|h| h.name == name) {
            // Saturates: a sum past any machine is refused by -np's check, not a panic.
            Some(host) => host.slots = host.slots.saturating_add(slots),
            None => hosts.push(Host {
                name: name.into(),
                slots,
            }),
        }
    }
    if hosts.is_empty() {
        return Err(Error::Config {
            name: "hostfile".into(),
            value: path.display().to_string(),
            expected: format!("at least one line {EXPECTED}"),
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

    fn parsed(text: &str) -> Result<Vec<Host>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hostfile");
        std::fs::write(&path, text).unwrap();
        parse_hostfile(&path).map_err(|e| match e {
            // The temporary path, for errors the tests can spell.
            Error::Config {
                name,
                value,
                expected,
            } => Error::Config {
                name: name.replace(&path.display().to_string(), "HOSTFILE"),
                value: value.replace(&path.display().to_string(), "HOSTFILE"),
                expected,
            },
            other => other,
        })
    }

    #[test]
    fn open_mpi_lines_comments_and_bare_hosts() {
        let text = "# cluster\nnode1 slots=4\n\nnode2   # one slot\nnode3 slots=2 max_slots=8\n";
        assert_eq!(
            parsed(text).unwrap(),
            [host("node1", 4), host("node2", 1), host("node3", 2)]
        );
    }

    #[test]
    fn mpich_lines_and_ipv6_addresses() {
        let text = "worker-0.svc:8\nworker-1.svc:8\n[fd00::2]:2\nfd00::3\n";
        assert_eq!(
            parsed(text).unwrap(),
            [
                host("worker-0.svc", 8),
                host("worker-1.svc", 8),
                host("fd00::2", 2),
                host("fd00::3", 1)
            ]
        );
    }

    #[test]
    fn a_host_on_several_lines_has_their_slots_together() {
        assert_eq!(
            parsed("a\nb slots=2\na\na:3\n").unwrap(),
            [host("a", 5), host("b", 2)]
        );
    }

    #[test]
    fn a_bad_line_is_named_with_its_number_and_what_was_expected() {
        let cases = [
            (
                "a slots=4\nnode1 slots=x\n",
                "invalid value \"node1 slots=x\" for hostfile HOSTFILE line 2: expected `host slots=N` or `host:N` (the slots \"x\" are not a whole number, 1 or more)",
            ),
            (
                "node1:0\n",
                "invalid value \"node1:0\" for hostfile HOSTFILE line 1: expected `host slots=N` or `host:N` (the slots \"0\" are not a whole number, 1 or more)",
            ),
            (
                "\n# c\nnode1 cpus=4\n",
                "invalid value \"node1 cpus=4\" for hostfile HOSTFILE line 3: expected `host slots=N` or `host:N` (only slots=N may follow the host, not \"cpus=4\")",
            ),
            (
                "a:2,b:2\n",
                "invalid value \"a:2,b:2\" for hostfile HOSTFILE line 1: expected `host slots=N` or `host:N` (one host per line)",
            ),
            (
                ":4\n",
                "invalid value \":4\" for hostfile HOSTFILE line 1: expected `host slots=N` or `host:N` (no host before the slots)",
            ),
            (
                "# nothing\n",
                "invalid value \"HOSTFILE\" for hostfile: expected at least one line `host slots=N` or `host:N`",
            ),
        ];
        for (text, error) in cases {
            assert_eq!(parsed(text).unwrap_err().to_string(), error, "{text:?}");
        }
    }

    #[test]
    fn an_unreadable_hostfile_is_named() {
        let error = parse_hostfile(Path::new("/nonexistent/hostfile")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "reading hostfile /nonexistent/hostfile: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn the_first_variable_set_and_not_empty_names_the_hostfile() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(hostfile_named_by(env(&[])), None);
        assert_eq!(
            hostfile_named_by(env(&[
                ("HYDRA_HOST_FILE", "/etc/mpi/hydra"),
                ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
            ])),
            Some((
                "OMPI_MCA_orte_default_hostfile",
                PathBuf::from("/etc/mpi/hostfile")
            ))
        );
        assert_eq!(
            hostfile_named_by(env(&[
                ("OMPI_MCA_orte_default_hostfile", ""),
                ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
            ])),
            Some(("I_MPI_HYDRA_HOST_FILE", PathBuf::from("/etc/mpi/hostfile")))
        );
    }
}
