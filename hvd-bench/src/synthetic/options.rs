//! Options of `hvd-bench synthetic`, validated before any rank starts.

use std::time::Duration;

use clap::Args;
use hvd::core::units::{self, TimeUnit};
use hvd::{Compression, Config};

use super::models::Architecture;

/// Options of `hvd-bench synthetic`.
#[derive(Debug, Clone, Args)]
pub struct SyntheticArgs {
    /// Model whose parameter tensors are averaged.
    #[arg(long, value_enum, default_value = "resnet50")]
    pub model: Architecture,
    /// Launch this many local ranks, or one job per entry of a list such as 1,2,4
    /// (scaling efficiency is against the 1-rank job). Omit under a launcher.
    #[arg(long, value_delimiter = ',')]
    pub np: Option<Vec<usize>>,
    /// Transport to use.
    #[arg(long, default_value = "tcp")]
    pub backend: String,
    /// Images per rank per batch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Simulated compute (forward + backward) of one batch in milliseconds. Default: the
    /// model's published single-GPU throughput on a Tesla P100 (see the book's performance chapter).
    #[arg(long)]
    pub compute_ms: Option<f64>,
    /// Multiply the compute time by this (0.33 for a GPU three times faster than a P100).
    #[arg(long, default_value_t = 1.0)]
    pub compute_scale: f64,
    /// Untimed batches before timing.
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Batches per timed iteration.
    #[arg(long, default_value_t = 10)]
    pub batches_per_iter: usize,
    /// Timed iterations.
    #[arg(long, default_value_t = 10)]
    pub iters: usize,
    /// Tensor Fusion: on (128 MiB buffer), off, a buffer size such as 64M, or a list of
    /// them to measure one after another in each job, such as on,off.
    #[arg(long, value_delimiter = ',', default_value = "on")]
    pub fusion: Vec<String>,
    /// Gradient compression: none, fp16 or bf16 (gradients travel as 16-bit floats), or
    /// a list of them to measure one after another in each job, such as none,bf16.
    #[arg(long, value_delimiter = ',', default_value = "none")]
    pub compression: Vec<String>,
    /// The runtime's cycle time (milliseconds, or 500us, 5ms ...; default HVD_CYCLE_TIME
    /// or 1 ms).
    #[arg(long)]
    pub cycle_time: Option<String>,
    /// Print JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A Tensor Fusion setting to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FusionSetting {
    /// As the user wrote it (`on`, `off`, `64M`).
    pub label: String,
    /// Fusion buffer size in bytes; 0 turns fusion off.
    pub threshold: usize,
}

impl FusionSetting {
    fn parse(text: &str) -> Result<FusionSetting, String> {
        let label = text.trim().to_ascii_lowercase();
        let threshold = match label.as_str() {
            "on" => Config::default().fusion_threshold,
            "off" => 0,
            _ => units::parse_bytes("--fusion", &label).map_err(|e| {
                format!("{e} (--fusion takes on, off or a buffer size such as 64M)")
            })?,
        };
        Ok(FusionSetting { label, threshold })
    }
}

/// The options checked and converted, the same on every rank.
#[derive(Debug, Clone)]
pub struct Settings {
    pub args: SyntheticArgs,
    pub fusion: Vec<FusionSetting>,
    pub compression: Vec<Compression>,
    pub cycle_time: Option<Duration>,
}

impl SyntheticArgs {
    /// Checks every option; the error names the option and what it accepts.
    pub fn validate(&self) -> Result<Settings, String> {
        if let Some(np) = &self.np
            && (np.is_empty() || np.contains(&0))
        {
            return Err(format!(
                "--np takes rank counts of at least 1, such as 1,2,4; got {np:?}"
            ));
        }
        for (name, value) in [
            ("--batch-size", self.batch_size),
            ("--batches-per-iter", self.batches_per_iter),
            ("--iters", self.iters),
        ] {
            if value == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if let Some(ms) = self.compute_ms
            && !(ms.is_finite() && ms >= 0.0)
        {
            return Err(format!(
                "--compute-ms must be a number of milliseconds of at least 0, got {ms}"
            ));
        }
        if !(self.compute_scale.is_finite() && self.compute_scale >= 0.0) {
            return Err(format!(
                "--compute-scale must be a factor of at least 0, got {}",
                self.compute_scale
            ));
        }
        let fusion = self
            .fusion
            .iter()
            .map(|f| FusionSetting::parse(f))
            .collect::<Result<Vec<_>, _>>()?;
        let compression = self
            .compression
            .iter()
            .map(|c| {
                c.parse::<Compression>()
                    .map_err(|_| format!("--compression takes none, fp16 or bf16, got {c:?}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let cycle_time = self
            .cycle_time
            .as_deref()
            .map(|t| units::parse_duration("--cycle-time", t, TimeUnit::Milliseconds))
            .transpose()
            .map_err(|e| e.to_string())?;
        Ok(Settings {
            args: self.clone(),
            fusion,
            compression,
            cycle_time,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: SyntheticArgs,
    }

    fn validate(line: &[&str]) -> Result<Settings, String> {
        let cli = Cli::try_parse_from(std::iter::once("synthetic").chain(line.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.args.validate()
    }

    #[test]
    fn fusion_settings_parse() {
        let settings = validate(&["--fusion", "on,off,64M"]).expect("valid");
        let parsed: Vec<(&str, usize)> = settings
            .fusion
            .iter()
            .map(|f| (f.label.as_str(), f.threshold))
            .collect();
        assert_eq!(parsed, [("on", 128 << 20), ("off", 0), ("64m", 64 << 20)]);
    }

    #[test]
    fn bad_values_are_named() {
        let cases: [(&[&str], &str); 7] = [
            (&["--np", "1,0"], "--np takes rank counts of at least 1"),
            (&["--iters", "0"], "--iters must be at least 1"),
            (
                &["--compute-ms=-3"],
                "--compute-ms must be a number of milliseconds",
            ),
            (
                &["--compute-scale", "NaN"],
                "--compute-scale must be a factor",
            ),
            (
                &["--fusion", "sometimes"],
                "--fusion takes on, off or a buffer size",
            ),
            (&["--cycle-time", "fast"], "--cycle-time"),
            (
                &["--compression", "none,fp8"],
                "--compression takes none, fp16 or bf16, got \"fp8\"",
            ),
        ];
        for (line, text) in cases {
            let error = validate(line).expect_err(text);
            assert!(error.contains(text), "{line:?}: {error}");
        }
    }
}
