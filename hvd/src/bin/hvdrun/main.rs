//! hvdrun: runs N ranks of a command on this host as one hvd job, with tagged output, one
//! summary of the first failure, and that rank's exit code. See `hvdrun --help`.

mod cli;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use hvd::launch::{Job, JobOutcome, Output};

use cli::Cli;

fn main() -> ExitCode {
    hvd::logging::install();
    let cli = Cli::parse_from(cli::mpirun_style(std::env::args()));
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

fn seconds(flag: &str, secs: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("--{flag} {secs}: expected a number of seconds, 0 or more"))
}

fn run(cli: &Cli) -> Result<JobOutcome, String> {
    let (program, args) = cli
        .command
        .split_first()
        .ok_or("no command to run was given")?;
    let output = match &cli.output_filename {
        Some(dir) => Output::Files(dir.clone()),
        None => Output::Tagged,
    };
    let mut job = Job::new(program, args.to_vec(), cli.np as usize)
        .output(output)
        .grace(seconds("grace", cli.grace)?)
        .start_timeout(seconds("start-timeout", cli.start_timeout)?)
        .handle_interrupts()
        .progress("hvdrun");
    for (name, value) in cli::exported(&cli.env)? {
        job = job.env(name, value);
    }
    job.run().map_err(|e| e.to_string())
}
