//! hvdrun in a Kubernetes launcher pod, as Kubeflow's MPI Operator makes it: no -np, no
//! hosts, only the hostfile the operator mounts and names in the variable its MPI
//! flavour reads. The "hosts" are `localhost` and `127.0.0.1`, both this machine
//! (started without ssh) but two hosts to hvdrun's placement.

use std::path::Path;
use std::process::{Command, Output};

use hvdrun::HOSTFILE_VARIABLES;

const HVDRUN: &str = env!("CARGO_BIN_EXE_hvdrun");

/// What each rank prints: its place and its host.
const PLACE: &str =
    "echo $HVD_RANK $HVD_SIZE $HVD_LOCAL_RANK $HVD_LOCAL_SIZE $HVD_CROSS_RANK $HVD_HOSTNAME";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// hvdrun `args` with `variable` (alone of the hostfile variables) naming `hostfile`.
fn hvdrun_in_pod(variable: &str, hostfile: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(HVDRUN);
    for name in HOSTFILE_VARIABLES {
        command.env_remove(name);
    }
    command
        .env(variable, hostfile)
        .env_remove("RUST_LOG")
        .args(args)
        .output()
        .unwrap()
}

fn sorted_stdout(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    lines.sort();
    lines
}

#[test]
fn a_bare_hvdrun_runs_a_rank_on_every_slot_of_the_hostfile_the_operator_names() {
    let dir = tempfile::tempdir().unwrap();
    // Open MPI's form under Open MPI's variable, MPICH's under Intel MPI's and MPICH's.
    let flavours = [
        (
            "OMPI_MCA_orte_default_hostfile",
            "localhost slots=2\n127.0.0.1 slots=1\n",
        ),
        (
            "I_MPI_HYDRA_HOST_FILE",
            "# workers\nlocalhost:2\n127.0.0.1:1\n",
        ),
        ("HYDRA_HOST_FILE", "localhost:2\n\n127.0.0.1\n"),
    ];
    for (variable, hostfile_text) in flavours {
        let hostfile = dir.path().join(variable);
        std::fs::write(&hostfile, hostfile_text).unwrap();
        let out = hvdrun_in_pod(variable, &hostfile, &["sh", "-c", PLACE]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{variable}: {stderr}");
        assert_eq!(
            sorted_stdout(&out),
            [
                "[0]<stdout>: 0 3 0 2 0 localhost",
                "[1]<stdout>: 1 3 1 2 0 localhost",
                "[2]<stdout>: 2 3 0 1 1 127.0.0.1",
            ],
            "{variable}"
        );
        assert!(
            stderr.starts_with(&format!(
                "hvdrun: hosts from {} (named by {variable}): localhost:2,127.0.0.1:1\n",
                hostfile.display()
            )),
            "{stderr}"
        );
    }
}

#[test]
fn np_and_hosts_given_on_the_command_line_win_over_the_operators_hostfile() {
    let dir = tempfile::tempdir().unwrap();
    let hostfile = dir.path().join("hostfile");
    std::fs::write(&hostfile, "localhost slots=2\n127.0.0.1 slots=2\n").unwrap();
    let variable = HOSTFILE_VARIABLES[0];
    // -np fills the file's hosts in order.
    let out = hvdrun_in_pod(variable, &hostfile, &["-np", "3", "sh", "-c", PLACE]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        sorted_stdout(&out),
        [
            "[0]<stdout>: 0 3 0 2 0 localhost",
            "[1]<stdout>: 1 3 1 2 0 localhost",
            "[2]<stdout>: 2 3 0 1 1 127.0.0.1",
        ]
    );
    // -H replaces the file, which is then not read at all.
    let missing = dir.path().join("missing");
    let out = hvdrun_in_pod(
        variable,
        &missing,
        &["-H", "localhost:1", "sh", "-c", PLACE],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(sorted_stdout(&out), ["[0]<stdout>: 0 1 0 1 0 localhost"]);
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn an_unreadable_or_bad_hostfile_is_named_with_the_variable_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let variable = HOSTFILE_VARIABLES[0];
    let missing = dir.path().join("missing");
    let out = hvdrun_in_pod(variable, &missing, &["true"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "hvdrun: reading hostfile {}: No such file or directory (os error 2) (the hostfile {variable} names)\n",
            missing.display()
        )
    );
    let bad = dir.path().join("hostfile");
    std::fs::write(&bad, "localhost slots=2\n127.0.0.1 slots=x\n").unwrap();
    let out = hvdrun_in_pod(variable, &bad, &["true"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "hvdrun: invalid value \"127.0.0.1 slots=x\" for hostfile {} line 2: expected `host slots=N` or `host:N` (the slots \"x\" are not a whole number, 1 or more) (the hostfile {variable} names)\n",
            bad.display()
        )
    );
}
