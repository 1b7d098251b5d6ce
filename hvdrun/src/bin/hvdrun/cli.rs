//! hvdrun's command line.

use std::path::PathBuf;

use clap::{ArgAction, CommandFactory, Parser};

use crate::horovod::HorovodFlags;

/// Runs N ranks of a command as one hvd job, on this host or on several.
///
/// Ranks on this host are started directly; ranks on other hosts over ssh (which must log
/// in without a password, and find the command at the same path). Each rank gets
/// HVD_RANK, HVD_SIZE, HVD_LOCAL_RANK, HVD_LOCAL_SIZE, HVD_CROSS_RANK, HVD_CROSS_SIZE, the
/// address of hvdrun's rendezvous server (HVD_STORE_ADDR) and a secret made for this job
/// (HVD_SECRET). HVD_*, HOROVOD_*, PATH, LD_LIBRARY_PATH, RUST_LOG and -x variables
/// travel to other hosts. Every line a rank writes is tagged like `[1]<stdout>: text`.
/// When a rank fails, the others are stopped, the first failure is summarised with the
/// last lines of its stderr, and hvdrun exits with that rank's exit code (128 + the
/// signal for a rank killed by a signal); 130 when interrupted. Each rank also gets
/// HOROVOD_RANK, HOROVOD_SIZE, ... (Horovod's names), and Horovod's launcher flags are
/// accepted (installed as `horovodrun` with the Python wheel).
#[derive(Debug, Parser)]
#[command(
    name = "hvdrun",
    version,
    disable_version_flag = true,
    after_help = "Examples:\n  hvdrun -np 2 train_mnist --epochs 1\n  hvdrun -np 8 -H node1:4,node2:4 --network-interface eth0 train_mnist\n  hvdrun --check -H node1:4,node2:4\n  hvdrun --check-build"
)]
pub struct Cli {
    /// Number of ranks to start (`-np N`, as with mpirun and horovodrun). Default, given
    /// hosts: every slot they have.
    #[arg(short = 'n', long = "np", alias = "num-proc", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub np: Option<u32>,

    /// Prints hvdrun's version.
    #[arg(short = 'v', long = "version", action = ArgAction::Version)]
    pub version: Option<bool>,

    /// Hosts and their slots (ranks each may run): `host1:4,host2:4`. Default: the
    /// hostfile that OMPI_MCA_orte_default_hostfile, I_MPI_HYDRA_HOST_FILE or
    /// HYDRA_HOST_FILE names, as mpirun reads it (Kubeflow's MPI Operator sets them);
    /// else this host.
    #[arg(
        short = 'H',
        long = "hosts",
        value_name = "HOST:SLOTS,...",
        conflicts_with = "hostfile"
    )]
    pub hosts: Option<String>,

    /// A file of hosts, one `host slots=N` (Open MPI) or `host:N` (MPICH) per line; a
    /// bare `host` is one slot.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,

    /// The port sshd listens on, on the other hosts.
    #[arg(short = 'p', long = "ssh-port", value_name = "PORT")]
    pub ssh_port: Option<u16>,

    /// The private key ssh logs in with.
    #[arg(short = 'i', long = "ssh-identity-file", value_name = "FILE")]
    pub ssh_identity: Option<PathBuf>,

    /// An option for ssh, as ssh's `-o NAME=VALUE` (repeatable).
    #[arg(long = "ssh-option", value_name = "NAME=VALUE")]
    pub ssh_options: Vec<String>,

    /// The network interfaces to use, the first each host has: `eth0` or `eth0,ib0`.
    /// Default: an automatic choice that skips container bridges (and loopback when the
    /// job spans hosts).
    #[arg(long, alias = "network-interfaces", value_name = "IFACE[,IFACE]")]
    pub network_interface: Option<String>,

    /// Prints what hvdrun starts: the ranks, hosts, command and the variables the flags
    /// set.
    #[arg(long)]
    pub verbose: bool,

    /// Checks the hosts instead of running a command: ssh reachability, the interface each
    /// host would use, and that every host can open a TCP connection to every other.
    #[arg(long, conflicts_with = "check_build")]
    pub check: bool,

    /// Prints the transports compiled into this build and the libraries they use
    /// (`-cb`, as horovodrun).
    #[arg(long)]
    pub check_build: bool,

    /// Runs this host's part of `--check` (started by hvdrun itself on each host).
    #[arg(long, hide = true)]
    pub probe: bool,

    /// Write each rank's output to DIR/rank.N/stdout and DIR/rank.N/stderr instead of
    /// tagging it onto hvdrun's own.
    #[arg(long, value_name = "DIR")]
    pub output_filename: Option<PathBuf>,

    /// Seconds every rank has to call hvd::init() and connect before the job is stopped.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub start_timeout: f64,

    /// Seconds stopped ranks get between SIGTERM and SIGKILL.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub grace: f64,

    /// Runs the job elastically on the hosts of -H or --hostfile: a failed host is left
    /// behind and the job goes on with the others (let back in after a cooldown).
    #[arg(long, help_heading = "Elastic jobs")]
    pub elastic: bool,

    /// Runs the job elastically on the hosts this program prints, one `host:slots` (or
    /// `host`, with --slots-per-host) per line, asked every second: the job grows when a
    /// host appears and shrinks when one goes.
    #[arg(long, value_name = "FILE", help_heading = "Elastic jobs", conflicts_with_all = ["hosts", "hostfile"])]
    pub host_discovery_script: Option<PathBuf>,

    /// The slots of a host the discovery script prints without a count.
    #[arg(long, alias = "slots", value_name = "N", help_heading = "Elastic jobs", value_parser = clap::value_parser!(u32).range(1..))]
    pub slots_per_host: Option<u32>,

    /// The fewest workers an elastic round may have; fewer for longer than
    /// --elastic-timeout fails the job (default: -np).
    #[arg(long, alias = "min-num-proc", value_name = "N", help_heading = "Elastic jobs", value_parser = clap::value_parser!(u32).range(1..))]
    pub min_np: Option<u32>,

    /// The most workers an elastic round may have (default: every slot).
    #[arg(long, alias = "max-num-proc", value_name = "N", help_heading = "Elastic jobs", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_np: Option<u32>,

    /// Seconds an elastic job waits for enough slots before it fails.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 600.0,
        help_heading = "Elastic jobs"
    )]
    pub elastic_timeout: f64,

    /// How many new rounds (after failures or host changes) an elastic job may form
    /// before it fails (default: no limit).
    #[arg(long, value_name = "N", help_heading = "Elastic jobs")]
    pub reset_limit: Option<usize>,

    /// Seconds a failed host is kept out: MIN after its first failure, doubling with
    /// each further one, at most MAX.
    #[arg(long, num_args = 2, value_names = ["MIN", "MAX"], help_heading = "Elastic jobs")]
    pub blacklist_cooldown_range: Option<Vec<f64>>,

    /// Sets NAME=VALUE for every rank, or with NAME alone passes on hvdrun's own value
    /// (repeatable). Every rank inherits hvdrun's environment anyway.
    #[arg(short = 'x', value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,

    #[command(flatten)]
    pub horovod: HorovodFlags,

    /// The command each rank runs, and its arguments (anything after it is the
    /// command's, even when it looks like an option).
    #[arg(
        required_unless_present_any = ["check", "check_build", "probe"],
        trailing_var_arg = true
    )]
    pub command: Vec<String>,
}

/// mpirun's and horovodrun's single-dash spellings of long options.
const SINGLE_DASH: [(&str, &str); 4] = [
    ("-np", "--np"),
    ("-cb", "--check-build"),
    ("-hostfile", "--hostfile"),
    ("-prefix-timestamp", "--prefix-output-with-timestamp"),
];

/// How many values follow `flag` among hvdrun's own options (0 for a switch or an
/// unknown option, which clap then refuses).
fn values_after(flag: &str) -> usize {
    let command = Cli::command();
    let found = command.get_arguments().find(|arg| {
        let long = flag.strip_prefix("--");
        let short = flag.strip_prefix('-').and_then(|s| {
            let mut chars = s.chars();
            chars.next().filter(|_| chars.next().is_none())
        });
        long.is_some_and(|l| {
            arg.get_long() == Some(l) || arg.get_all_aliases().is_some_and(|a| a.contains(&l))
        }) || short.is_some_and(|c| arg.get_short() == Some(c))
    });
    match found {
        Some(arg) if arg.get_action().takes_values() => arg
            .get_num_args()
            .map_or(1, |range| range.min_values().max(1)),
        _ => 0,
    }
}

/// Rewrites the single-dash long options of mpirun and horovodrun (`-np`, `-cb`,
/// `-hostfile`) to hvdrun's, only among hvdrun's own options: the command and its
/// arguments are left as they are.
pub fn mpirun_style(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut args = args.into_iter();
    let mut out: Vec<String> = args.next().into_iter().collect();
    while let Some(arg) = args.next() {
        let arg = SINGLE_DASH
            .iter()
            .find(|(single, _)| *single == arg)
            .map_or(arg, |(_, long)| long.to_string());
        let is_option = arg.starts_with('-') && arg != "--";
        let values = if arg.contains('=') {
            0
        } else {
            values_after(&arg)
        };
        out.push(arg);
        if !is_option {
            break;
        }
        out.extend(args.by_ref().take(values));
    }
    out.extend(args);
    out
}

/// The variables `-x` sets: NAME=VALUE as given, NAME alone with hvdrun's own value.
pub fn exported(specs: &[String]) -> Result<Vec<(String, String)>, String> {
    specs
        .iter()
        .map(|spec| {
            let (name, value) = match spec.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (spec.as_str(), None),
            };
            if name.is_empty() {
                return Err(format!("-x {spec}: expected NAME or NAME=VALUE"));
            }
            let value = match value {
                Some(value) => value,
                None => std::env::var(name).map_err(|_| {
                    format!(
                        "-x {name}: {name} is not set in hvdrun's environment (use -x {name}=VALUE to set it)"
                    )
                })?,
            };
            Ok((name.to_string(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn single_dash_np_is_rewritten_only_before_the_command() {
        assert_eq!(
            mpirun_style(strings(&[
                "hvdrun", "-np", "2", "-x", "A", "prog", "-np", "3"
            ])),
            strings(&["hvdrun", "--np", "2", "-x", "A", "prog", "-np", "3"])
        );
        assert_eq!(
            mpirun_style(strings(&["hvdrun", "-np", "2", "--", "prog", "-np"])),
            strings(&["hvdrun", "--np", "2", "--", "prog", "-np"])
        );
        let cooldown = [
            "hvdrun",
            "--blacklist-cooldown-range",
            "5",
            "60",
            "prog",
            "-np",
        ];
        assert_eq!(
            mpirun_style(strings(&cooldown)),
            strings(&cooldown),
            "both values are hvdrun's, the command starts after them"
        );
        assert_eq!(
            mpirun_style(strings(&[
                "hvdrun",
                "-hostfile",
                "hosts",
                "--timeline-filename",
                "-np",
                "prog",
                "-cb"
            ])),
            strings(&[
                "hvdrun",
                "--hostfile",
                "hosts",
                "--timeline-filename",
                "-np",
                "prog",
                "-cb"
            ])
        );
    }

    fn parse(args: &[&str]) -> Result<Cli, String> {
        Cli::try_parse_from(mpirun_style(strings(args))).map_err(|e| e.to_string())
    }

    #[test]
    fn horovods_ci_line_runs_the_command_with_its_own_options() {
        let cli = parse(&[
            "horovodrun",
            "-np",
            "2",
            "-H",
            "localhost:2",
            "--gloo",
            "pytest",
            "-v",
            "x.py",
        ])
        .unwrap();
        assert_eq!(cli.np, Some(2));
        assert!(cli.horovod.gloo);
        assert_eq!(cli.command, ["pytest", "-v", "x.py"]);
    }

    #[test]
    fn an_unknown_option_is_refused_not_run() {
        let err = parse(&["hvdrun", "-np", "2", "--glo", "python", "train.py"]).unwrap_err();
        assert!(
            err.starts_with("error: unexpected argument '--glo' found"),
            "{err}"
        );
    }

    #[test]
    fn horovods_tuning_flags_set_the_ranks_variables() {
        let cli = parse(&[
            "horovodrun",
            "-np",
            "2",
            "--fusion-threshold-mb",
            "32",
            "--cycle-time-ms",
            "2.5",
            "--cache-capacity",
            "0",
            "--no-hierarchical-allreduce",
            "--autotune",
            "--timeline-filename",
            "t.json",
            "--timeline-mark-cycles",
            "--stall-check-warning-time-seconds",
            "30",
            "--stall-check-shutdown-time-seconds",
            "60",
            "--gloo-timeout-seconds",
            "20",
            "--log-level",
            "WARNING",
            "--tcp",
            "--disable-cache",
            "--verbose",
            "--network-interfaces",
            "lo",
            "prog",
        ])
        .unwrap();
        let env = cli.horovod.environment().unwrap();
        let shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            shown,
            [
                "HVD_FUSION_THRESHOLD=32MiB",
                "HVD_CYCLE_TIME=2.5ms",
                "HVD_CACHE_CAPACITY=0",
                "HVD_HIERARCHICAL_ALLREDUCE=0",
                "HVD_AUTOTUNE=1",
                "HVD_TIMELINE=t.json",
                "HVD_TIMELINE_MARK_CYCLES=1",
                "HVD_STALL_CHECK_TIME=30s",
                "HVD_STALL_SHUTDOWN_TIME=60s",
                "HVD_TIMEOUT=20s",
                "HVD_LOG_LEVEL=WARNING",
                "HVD_BACKEND=tcp",
            ]
        );
        assert_eq!(cli.network_interface.as_deref(), Some("lo"));
        assert!(cli.verbose && cli.horovod.disable_cache);
    }

    #[test]
    fn flags_hvd_has_no_meaning_for_are_refused_with_the_reason() {
        let refused = |args: &[&str]| {
            let mut all = vec!["horovodrun", "-np", "2"];
            all.extend_from_slice(args);
            all.push("prog");
            parse(&all).unwrap().horovod.environment().unwrap_err()
        };
        assert_eq!(
            refused(&["--mpi"]),
            "--mpi is not supported: hvdrun starts its ranks itself; to use MPI, start the program with mpirun (hvd picks its MPI transport there when built with it)"
        );
        assert_eq!(
            refused(&["--hierarchical-allgather"]),
            "--hierarchical-allgather is not supported: hvd has no hierarchical allgather"
        );
        assert_eq!(
            refused(&["--mpi-args=--bind-to none"]),
            "--mpi-args is not supported: hvdrun starts its ranks itself; to use MPI, start the program with mpirun (hvd picks its MPI transport there when built with it)"
        );
    }

    #[test]
    fn x_with_a_value_sets_it_and_without_needs_it_set() {
        assert_eq!(
            exported(&strings(&["A=1=2"])).unwrap(),
            vec![("A".to_string(), "1=2".to_string())]
        );
        assert_eq!(
            exported(&strings(&["HVDRUN_SURELY_UNSET_VARIABLE"])).unwrap_err(),
            "-x HVDRUN_SURELY_UNSET_VARIABLE: HVDRUN_SURELY_UNSET_VARIABLE is not set in hvdrun's environment (use -x HVDRUN_SURELY_UNSET_VARIABLE=VALUE to set it)"
        );
    }
}
