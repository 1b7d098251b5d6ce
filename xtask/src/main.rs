//! Project automation, run as `cargo xtask <command>`.
//!
//! - `test-cluster`: builds and runs every test of the workspace, the multi-process ones
//!   included, for every transport whose system library is present, and says which it
//!   skipped and why (with the command that installs what is missing).

mod backends;
mod test_cluster;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  test-cluster [-- <extra test-runner args>]
      Run every test, multi-process ones included, for every transport whose system
      library is present; name the skipped ones and how to enable them.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test-cluster") => test_cluster::run(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command '{other}'\n\n{USAGE}")),
        None => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
