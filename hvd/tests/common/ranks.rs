//! Jobs of real processes without a launcher: ranks of this test binary that meet in a
//! shared-directory store (`HVD_STORE_DIR`), as any launcher's ranks could.

use std::path::Path;
use std::process::Command;

/// Runs this binary's ignored test `rank_body` as `np` ranks with `vars` set; returns
/// whether every rank succeeded.
pub fn run_ranks(np: usize, store: &Path, vars: &[(&str, &str)]) -> bool {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..np)
        .map(|rank| {
            Command::new(&exe)
                .args([
                    "rank_body",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("HVD_RANK", rank.to_string())
                .env("HVD_SIZE", np.to_string())
                .env("HVD_STORE_DIR", store)
                .envs(vars.iter().copied())
                .spawn()
                .unwrap()
        })
        .collect();
    // Wait for every rank, not only up to the first that failed.
    let succeeded: Vec<bool> = children
        .into_iter()
        .map(|mut child| child.wait().unwrap().success())
        .collect();
    succeeded.iter().all(|ok| *ok)
}
