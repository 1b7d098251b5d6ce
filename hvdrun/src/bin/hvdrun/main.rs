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
use hvdrun::{Host, Job, JobOutcome, Output, Ssh, parse_hostfile, parse_hosts};

use cli::Cli;

fn main() -> ExitCode {
    if let Err(e) = hvd::logging::install() {
        eprintln!("hvdrun: {e}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse_from(cli::mpirun_style(std::env::args()));
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

/// The hosts of `-H` or `--hostfile`; None for this host alone.
fn hosts(cli: &Cli) -> Result<Option<Vec<Host>>, String> {
    let hosts = match (&cli.hosts, &cli.hostfile) {
        (Some(spec), _) => parse_hosts(spec),
        (None, Some(file)) => parse_hostfile(file),
        (None, None) => return Ok(None),
    };
    hosts.map(Some).map_err(|e| e.to_string())
}

fn ssh(cli: &Cli) -> Ssh {
    Ssh {
        port: cli.ssh_port,
        identity: cli.ssh_identity.clone(),
        options: cli.ssh_options.clone(),
    }
}

fn seconds(flag: &str, secs: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("--{flag} {secs}: expected a number of seconds, 0 or more"))
}

fn run(cli: &Cli) -> Result<JobOutcome, String> {
    let (program, args) = cli
        .command
        .split_first()
        .ok_or("no command to run was given")?;
    let np = cli.np.ok_or("-np N is required: how many ranks to start")?;
    let mut env = cli.horovod.environment()?;
    env.extend(cli::exported(&cli.env)?);
    let output = match &cli.output_filename {
        Some(dir) => Output::Files(dir.clone()),
        None => Output::Tagged,
    };
    let mut job = Job::new(program, args.to_vec(), np as usize)
        .ssh(ssh(cli))
        .output(output)
        .grace(seconds("grace", cli.grace)?)
        .start_timeout(seconds("start-timeout", cli.start_timeout)?)
        .handle_interrupts()
        .progress("hvdrun");
    let hosts = hosts(cli)?;
    if cli.verbose {
        describe(np, hosts.as_deref(), &cli.command, &env);
    }
    for (name, value) in env {
        job = job.env(name, value);
    }
    if let Some(hosts) = hosts {
        job = job.hosts(hosts);
    }
    if let Some(names) = &cli.network_interface {
        job = job.network_interface(names);
    }
    job.run().map_err(|e| e.to_string())
}

/// What `--verbose` prints before the job starts.
fn describe(np: u32, hosts: Option<&[Host]>, command: &[String], env: &[(String, String)]) {
    let placed = match hosts {
        Some(hosts) => hosts
            .iter()
            .map(|h| format!("{}:{}", h.name, h.slots))
            .collect::<Vec<_>>()
            .join(","),
        None => "this host".into(),
    };
    eprintln!(
        "hvdrun: starting {np} rank(s) on {placed}: {}",
        command.join(" ")
    );
    for (name, value) in env {
        eprintln!("hvdrun: every rank gets {name}={value}");
    }
}
