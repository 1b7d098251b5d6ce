//! hvdrun's command line.

use std::path::PathBuf;

use clap::Parser;

/// Runs N ranks of a command on this host as one hvd job.
///
/// Each rank gets HVD_RANK, HVD_SIZE, HVD_LOCAL_RANK, HVD_LOCAL_SIZE, HVD_STORE_DIR and
/// HVD_SECRET on top of hvdrun's own environment. Every line a rank writes is tagged like
/// `[1]<stdout>: text`. When a rank fails, the others are stopped, the first failure is
/// summarised with the last lines of its stderr, and hvdrun exits with that rank's exit
/// code (128 + the signal for a rank killed by a signal); 130 when interrupted.
///
/// Only this host for now: multi-host jobs (-H, ssh) are not yet supported.
#[derive(Debug, Parser)]
#[command(
    name = "hvdrun",
    version,
    after_help = "Example:\n  hvdrun -np 2 train_logistic --epochs 1"
)]
pub struct Cli {
    /// Number of ranks to start (`-np N`, as with mpirun and horovodrun).
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub np: u32,

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

    /// Sets NAME=VALUE for every rank, or with NAME alone passes on hvdrun's own value
    /// (repeatable). Every rank inherits hvdrun's environment anyway.
    #[arg(short = 'x', value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,

    /// The command each rank runs, and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// Options that take a value, so the value is not mistaken for the command.
const VALUED: [&str; 6] = [
    "-n",
    "--np",
    "--output-filename",
    "--start-timeout",
    "--grace",
    "-x",
];

/// Rewrites mpirun's single-dash `-np` to `--np`, only among hvdrun's own options (the
/// command's arguments are left as they are).
pub fn mpirun_style(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut args = args.into_iter();
    let mut out: Vec<String> = args.next().into_iter().collect();
    while let Some(arg) = args.next() {
        let takes_value = arg == "-np" || VALUED.contains(&arg.as_str());
        let is_option = arg.starts_with('-') && arg != "--";
        out.push(if arg == "-np" { "--np".into() } else { arg });
        if takes_value {
            out.extend(args.next());
        } else if !is_option {
            break;
        }
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
