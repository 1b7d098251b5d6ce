//! `hvd-bench synthetic --np 1,2,4`: one local job per rank count, one after another,
//! then the table with scaling efficiency against the 1-rank job.

use hvdrun::JobOutcome;

use super::RESULTS_ENV;
use super::report::{Measurement, Setup};
use crate::results_file::ResultsFile;

pub fn run(setup: &Setup<'_>, nps: &[usize], json: bool) -> Result<(), String> {
    let results = ResultsFile::create("hvd-bench-synthetic", "tsv")?;
    for &np in nps {
        let outcome = crate::this_program_as_job(np)?
            .env(RESULTS_ENV, results.path().display().to_string())
            .run()
            .map_err(|e| e.to_string())?;
        if outcome != JobOutcome::Success {
            return Err(format!("the {np}-rank job failed: {outcome}"));
        }
    }
    let all = results
        .read()?
        .lines()
        .map(Measurement::from_record)
        .collect::<Result<Vec<_>, _>>()?;
    println!("{}", setup.summary(&all, json));
    Ok(())
}
