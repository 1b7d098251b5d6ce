//! `hvd-bench synthetic --np 1,2,4`: one local job per rank count, one after another,
//! then the table with scaling efficiency against the 1-rank job.

use std::path::PathBuf;

use hvdrun::JobOutcome;

use super::RESULTS_ENV;
use super::report::{Measurement, Setup};

/// The file the jobs' rank 0 append to; removed when dropped.
struct ResultsFile(PathBuf);

impl Drop for ResultsFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub fn run(setup: &Setup<'_>, nps: &[usize], json: bool) -> Result<(), String> {
    let results = ResultsFile(
        std::env::temp_dir().join(format!("hvd-bench-synthetic-{}.tsv", std::process::id())),
    );
    // create_new: never truncate, or follow a link planted at, a name in a shared /tmp.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&results.0)
        .map_err(|e| format!("cannot create {}: {e}", results.0.display()))?;
    for &np in nps {
        let outcome = crate::this_program_as_job(np)?
            .env(RESULTS_ENV, results.0.display().to_string())
            .run()
            .map_err(|e| e.to_string())?;
        if outcome != JobOutcome::Success {
            return Err(format!("the {np}-rank job failed: {outcome}"));
        }
    }
    let text = std::fs::read_to_string(&results.0)
        .map_err(|e| format!("cannot read {}: {e}", results.0.display()))?;
    let all = text
        .lines()
        .map(Measurement::from_record)
        .collect::<Result<Vec<_>, _>>()?;
    println!("{}", setup.summary(&all, json));
    Ok(())
}
