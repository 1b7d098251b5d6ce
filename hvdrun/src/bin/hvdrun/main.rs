//! hvdrun: runs N ranks of a command as one hvd job, on this host or over ssh on others,
//! with tagged output, one summary of the first failure, and that rank's exit code; and
//! checks hosts and builds. See `hvdrun --help`.

mod check;
mod cli;
mod horovod;
mod probe;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use hvd_core::units::MAX_DURATION;
use hvdrun::elastic::{Elastic, HostSource};
use hvdrun::{Host, Job, JobOutcome, Output, Ssh, hostfile_named_by, parse_hostfile, parse_hosts};

use cli::Cli;

fn main() -> ExitCode {
    if let Err(e) = hvd::logging::install() {
        eprintln!("hvdrun: {e}");
        return ExitCode::from(2);
    }
    let args = match text_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("hvdrun: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(cli::mpirun_style(args));
    if cli.check_build {
        print!("{}", check::build_report());
        return ExitCode::SUCCESS;
    }
    if cli.probe {
        return report(probe::run());
    }
    if cli.check {
        return report(check::hosts(&cli));
    }
    match run(&cli) {
        Ok(JobOutcome::Success) => ExitCode::SUCCESS,
        Ok(outcome) => {
            // The interruption was announced as it happened.
            if !matches!(outcome, JobOutcome::Interrupted { .. }) {
                eprintln!("hvdrun: {outcome}");
            }
            ExitCode::from(u8::try_from(outcome.exit_code()).unwrap_or(1))
        }
        Err(message) => {
            eprintln!("hvdrun: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Ends with success or the error, printed once.
fn report(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("hvdrun: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The hosts of `-H`, `--hostfile`, or else the hostfile an MPI launcher's environment
/// names (an MPI Operator's launcher pod), which one line says; None for this host
/// alone, and for a discovery script, which finds its own.
fn hosts(cli: &Cli) -> Result<Option<Vec<Host>>, String> {
    let hosts = match (&cli.hosts, &cli.hostfile) {
        (Some(spec), _) => parse_hosts(spec),
        (None, Some(file)) => parse_hostfile(file),
        (None, None) if cli.host_discovery_script.is_some() => return Ok(None),
        (None, None) => match hostfile_named_by(|name| std::env::var_os(name)) {
            Some((variable, file)) => {
                let hosts = parse_hostfile(&file)
                    .map_err(|e| format!("{e} (the hostfile {variable} names)"))?;
                eprintln!(
                    "hvdrun: hosts from {} (named by {variable}): {}",
                    file.display(),
                    listed(&hosts)
                );
                Ok(hosts)
            }
            None => return Ok(None),
        },
    };
    hosts.map(Some).map_err(|e| e.to_string())
}

/// `host1:4,host2:4`.
fn listed(hosts: &[Host]) -> String {
    hosts
        .iter()
        .map(|h| format!("{}:{}", h.name, h.slots))
        .collect::<Vec<_>>()
        .join(",")
}

fn ssh(cli: &Cli) -> Ssh {
    Ssh {
        port: cli.ssh_port,
        identity: cli.ssh_identity.clone(),
        options: cli.ssh_options.clone(),
    }
}

/// The command line, every argument as text: the ranks' command is passed on as text.
fn text_args() -> Result<Vec<String>, String> {
    std::env::args_os()
        .enumerate()
        .map(|(i, arg)| {
            arg.into_string().map_err(|arg| {
                format!(
                    "argument {i} ({}) is not UTF-8 text, which hvdrun cannot pass on to its ranks",
                    arg.to_string_lossy()
                )
            })
        })
        .collect()
}

fn seconds(flag: &str, secs: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| *d <= MAX_DURATION)
        .ok_or_else(|| format!("--{flag} {secs}: expected a number of seconds from 0 to ten years"))
}

fn run(cli: &Cli) -> Result<JobOutcome, String> {
    let (program, args) = cli
        .command
        .split_first()
        .ok_or("no command to run was given")?;
    let hosts = hosts(cli)?;
    let np = match (cli.np, &hosts) {
        (Some(np), _) => np,
        (None, _) if cli.elastic || cli.host_discovery_script.is_some() => 1,
        // As mpirun: every slot of the hosts, so a launcher pod needs no -np.
        (None, Some(hosts)) => u32::try_from(hosts.iter().map(|h| h.slots).sum::<usize>())
            .map_err(|_| "the hosts have more slots than hvdrun can start: give -np N")?,
        (None, None) => return Err("-np N is required: how many ranks to start".into()),
    };
    let start_timeout = seconds("start-timeout", cli.start_timeout)?;
    let mut env = cli.horovod.environment()?;
    // The ranks wait for each other as long as hvdrun waits for them, unless this
    // environment says otherwise; -x, after it, overrides both.
    if ["HVD_START_TIMEOUT", "HOROVOD_START_TIMEOUT"]
        .iter()
        .all(|name| std::env::var_os(name).is_none())
    {
        let secs = start_timeout.as_secs_f64().to_string();
        env.push(("HVD_START_TIMEOUT".into(), secs));
    }
    env.extend(cli::exported(&cli.env)?);
    let output = match &cli.output_filename {
        Some(dir) => Output::Files(dir.clone()),
        None => Output::Tagged,
    };
    let mut job = Job::new(program, args.to_vec(), np as usize)
        .ssh(ssh(cli))
        .output(output)
        .grace(seconds("grace", cli.grace)?)
        .start_timeout(start_timeout)
        .handle_interrupts()
        .progress("hvdrun");
    if cli.verbose {
        describe(np, hosts.as_deref(), &cli.command, &env);
    }
    for (name, value) in env {
        job = job.env(name, value);
    }
    if let Some(hosts) = &hosts {
        job = job.hosts(hosts.clone());
    }
    if let Some(names) = &cli.network_interface {
        job = job.network_interface(names);
    }
    match elastic(cli, hosts)? {
        Some(elastic) => job.run_elastic(&elastic),
        None => job.run(),
    }
    .map_err(|e| e.to_string())
}

/// The elastic options, for `--elastic` (on `hosts`) or `--host-discovery-script`; None
/// otherwise.
fn elastic(cli: &Cli, hosts: Option<Vec<Host>>) -> Result<Option<Elastic>, String> {
    let source = match (&cli.host_discovery_script, cli.elastic) {
        (Some(path), _) => HostSource::Script {
            path: path.clone(),
            slots_per_host: cli.slots_per_host.map(|n| n as usize),
        },
        (None, true) => HostSource::Fixed(hosts.unwrap_or_else(|| {
            vec![Host {
                name: "localhost".into(),
                slots: cli.np.map_or(1, |n| n as usize),
            }]
        })),
        (None, false) => return Ok(None),
    };
    refuse_mpi(cli)?;
    let min_np = cli
        .min_np
        .or(cli.np)
        .ok_or("an elastic job needs --min-np N (or -np N): the fewest workers it may run with")?;
    let mut elastic = Elastic::new(source, min_np as usize)
        .timeout(seconds("elastic-timeout", cli.elastic_timeout)?);
    if let Some(max_np) = cli.max_np {
        elastic = elastic.max_np(max_np as usize);
    }
    if let Some(limit) = cli.reset_limit {
        elastic = elastic.reset_limit(limit);
    }
    if let Some(range) = &cli.blacklist_cooldown_range {
        let (least, most) = (range[0], range[1]);
        if least > most {
            return Err(format!(
                "--blacklist-cooldown-range {least} {most}: MIN must not exceed MAX"
            ));
        }
        elastic = elastic.cooldown(
            seconds("blacklist-cooldown-range", least)?,
            seconds("blacklist-cooldown-range", most)?,
        );
    }
    Ok(Some(elastic))
}

/// MPI's world is fixed when the job starts: an elastic job cannot run over it.
fn refuse_mpi(cli: &Cli) -> Result<(), String> {
    let exported = cli::exported(&cli.env)?;
    let backend = exported
        .iter()
        .find(|(name, _)| name == "HVD_BACKEND" || name == "HOROVOD_CPU_OPERATIONS")
        .map(|(_, value)| value.clone())
        .or_else(|| std::env::var("HVD_BACKEND").ok())
        .or_else(|| std::env::var("HOROVOD_CPU_OPERATIONS").ok());
    if backend.is_some_and(|b| b.trim().eq_ignore_ascii_case("mpi")) {
        return Err("an elastic job cannot run over MPI, whose world is fixed when the job starts: use the default transport (unset HVD_BACKEND), which hvdrun's rounds can rebuild".into());
    }
    Ok(())
}

/// What `--verbose` prints before the job starts.
fn describe(np: u32, hosts: Option<&[Host]>, command: &[String], env: &[(String, String)]) {
    let placed = hosts.map_or_else(|| "this host".into(), listed);
    eprintln!(
        "hvdrun: starting {np} rank(s) on {placed}: {}",
        command.join(" ")
    );
    for (name, value) in env {
        eprintln!("hvdrun: every rank gets {name}={value}");
    }
}
