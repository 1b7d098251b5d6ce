//! horovodrun's flags, accepted so that a command line written for Horovod runs as it
//! is: each one that hvd has a meaning for sets the variable the ranks read, and the rest
//! are refused with the reason, before anything starts. None of them can be taken for
//! the command.

use clap::Args;

/// Horovod's tuning, timeline, stall-check, logging and controller flags (the elastic
/// ones are hvdrun's own).
#[derive(Debug, Default, Args)]
#[command(next_help_heading = "Horovod's flags (horovodrun)")]
pub struct HorovodFlags {
    /// Tensor Fusion buffer in MiB (HVD_FUSION_THRESHOLD).
    #[arg(long, value_name = "MB")]
    pub fusion_threshold_mb: Option<u64>,
    /// Longest idle wait of the background thread in ms (HVD_CYCLE_TIME).
    #[arg(long, value_name = "MS")]
    pub cycle_time_ms: Option<f64>,
    /// Response cache entries; 0 turns it off (HVD_CACHE_CAPACITY).
    #[arg(long, value_name = "N")]
    pub cache_capacity: Option<u64>,
    /// Allreduce within hosts through shared memory, across through TCP (the default
    /// across hosts; HVD_HIERARCHICAL_ALLREDUCE=1).
    #[arg(long, overrides_with = "no_hierarchical_allreduce")]
    pub hierarchical_allreduce: bool,
    /// Send every rank's data over the network (HVD_HIERARCHICAL_ALLREDUCE=0).
    #[arg(long)]
    pub no_hierarchical_allreduce: bool,
    /// Refused: hvd has no hierarchical allgather.
    #[arg(long, overrides_with = "no_hierarchical_allgather")]
    pub hierarchical_allgather: bool,
    /// Accepted: hvd's allgather is never hierarchical.
    #[arg(long)]
    pub no_hierarchical_allgather: bool,
    /// Refused: NCCL's 2D torus allreduce is not in hvd.
    #[arg(long, overrides_with = "no_torus_allreduce")]
    pub torus_allreduce: bool,
    /// Accepted: hvd has no torus allreduce.
    #[arg(long)]
    pub no_torus_allreduce: bool,
    /// Tune the fusion threshold and cycle time while training (HVD_AUTOTUNE=1).
    #[arg(long, overrides_with = "no_autotune")]
    pub autotune: bool,
    #[arg(long, hide = true)]
    pub no_autotune: bool,
    /// CSV of every point the autotuner tried (HVD_AUTOTUNE_LOG).
    #[arg(long, value_name = "FILE")]
    pub autotune_log_file: Option<String>,
    /// Training steps per autotune sample (HVD_AUTOTUNE_STEPS_PER_SAMPLE).
    #[arg(long, value_name = "N")]
    pub autotune_steps_per_sample: Option<u64>,
    /// Refused: hvd's autotuner always discards its first 3 samples.
    #[arg(long, value_name = "N")]
    pub autotune_warmup_samples: Option<String>,
    /// Refused: hvd's autotuner has no Bayesian-optimisation sample limit.
    #[arg(long, value_name = "N")]
    pub autotune_bayes_opt_max_samples: Option<String>,
    /// Refused: hvd's autotuner has no Gaussian-process noise setting.
    #[arg(long, value_name = "NOISE")]
    pub autotune_gaussian_process_noise: Option<String>,
    /// Record the Timeline into this file (HVD_TIMELINE).
    #[arg(long, value_name = "FILE")]
    pub timeline_filename: Option<String>,
    /// Mark every negotiation cycle on the Timeline (HVD_TIMELINE_MARK_CYCLES=1).
    #[arg(long, overrides_with = "no_timeline_mark_cycles")]
    pub timeline_mark_cycles: bool,
    #[arg(long, hide = true)]
    pub no_timeline_mark_cycles: bool,
    /// Turn the stall warnings off; the stall shutdown stays (HVD_STALL_CHECK_DISABLE=1).
    #[arg(long, overrides_with = "stall_check")]
    pub no_stall_check: bool,
    #[arg(long, hide = true)]
    pub stall_check: bool,
    /// Seconds before a stall is warned about (HVD_STALL_CHECK_TIME).
    #[arg(long, value_name = "SECS")]
    pub stall_check_warning_time_seconds: Option<f64>,
    /// Seconds before stalled tensors fail on every rank (HVD_STALL_SHUTDOWN_TIME).
    #[arg(long, value_name = "SECS")]
    pub stall_check_shutdown_time_seconds: Option<f64>,
    /// Seconds any operation waits while a peer makes no progress (HVD_TIMEOUT).
    #[arg(long, value_name = "SECS")]
    pub gloo_timeout_seconds: Option<f64>,
    /// The ranks' log level: trace, debug, info, warning, error, fatal (HVD_LOG_LEVEL).
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Accepted: hvd's log lines always carry a timestamp.
    #[arg(long)]
    pub log_with_timestamp: bool,
    /// Refused: hvd's log lines always carry a timestamp.
    #[arg(long, alias = "log-hide-timestamp")]
    pub log_without_timestamp: bool,
    /// Refused: hvdrun tags each line with its rank and stream, not a time.
    #[arg(long)]
    pub prefix_output_with_timestamp: bool,
    /// Use the TCP transport, not shared memory, between the ranks of a host
    /// (HVD_BACKEND=tcp); across hosts allreduces still go through shared memory within
    /// each host unless HVD_HIERARCHICAL_ALLREDUCE=0.
    #[arg(long)]
    pub tcp: bool,
    /// Accepted: hvd's own transports (TCP between hosts, shared memory within one) are
    /// what Horovod's Gloo controller is, and what hvdrun's ranks run on.
    #[arg(long)]
    pub gloo: bool,
    /// Refused: hvdrun starts its ranks itself; for MPI, run the program under mpirun.
    #[arg(long)]
    pub mpi: bool,
    /// Refused: hvdrun starts its ranks itself, not through jsrun.
    #[arg(long)]
    pub jsrun: bool,
    /// Refused: hvdrun does not run mpirun.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub mpi_args: Option<String>,
    /// Refused: hvdrun does not run mpirun.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub binding_args: Option<String>,
    /// Refused: hvdrun does not run mpirun.
    #[arg(long)]
    pub mpi_threads_disable: bool,
    #[arg(long, hide = true)]
    pub no_mpi_threads_disable: bool,
    /// Refused: hvd runs NCCL on one stream of its own per rank.
    #[arg(long, value_name = "N")]
    pub num_nccl_streams: Option<String>,
    /// Refused: hvd does not pin its background threads.
    #[arg(long, value_name = "CPUS")]
    pub thread_affinity: Option<String>,
    /// Accepted: hvdrun keeps no cache of host checks, so there is none to disable.
    #[arg(long)]
    pub disable_cache: bool,
    /// Refused: set the HVD_* (or HOROVOD_*) variables, or these flags, instead.
    #[arg(long, value_name = "FILE")]
    pub config_file: Option<String>,
}

/// What a refused flag is and why hvd has no meaning for it.
fn refused(flag: &str, why: &str) -> String {
    format!("{flag} is not supported: {why}")
}

impl HorovodFlags {
    /// The variables these flags set for every rank, or why one of them is refused.
    pub fn environment(&self) -> Result<Vec<(String, String)>, String> {
        self.refuse()?;
        let mut env: Vec<(&str, String)> = Vec::new();
        let mut set = |name: &'static str, value: Option<String>| {
            if let Some(value) = value {
                env.push((name, value));
            }
        };
        set(
            "HVD_FUSION_THRESHOLD",
            self.fusion_threshold_mb.map(|mb| format!("{mb}MiB")),
        );
        set(
            "HVD_CYCLE_TIME",
            self.cycle_time_ms.map(|ms| format!("{ms}ms")),
        );
        set(
            "HVD_CACHE_CAPACITY",
            self.cache_capacity.map(|n| n.to_string()),
        );
        set(
            "HVD_HIERARCHICAL_ALLREDUCE",
            switch(self.hierarchical_allreduce, self.no_hierarchical_allreduce),
        );
        set("HVD_AUTOTUNE", switch(self.autotune, self.no_autotune));
        set("HVD_AUTOTUNE_LOG", self.autotune_log_file.clone());
        set(
            "HVD_AUTOTUNE_STEPS_PER_SAMPLE",
            self.autotune_steps_per_sample.map(|n| n.to_string()),
        );
        set("HVD_TIMELINE", self.timeline_filename.clone());
        set(
            "HVD_TIMELINE_MARK_CYCLES",
            switch(self.timeline_mark_cycles, self.no_timeline_mark_cycles),
        );
        set(
            "HVD_STALL_CHECK_DISABLE",
            switch(self.no_stall_check, self.stall_check),
        );
        set(
            "HVD_STALL_CHECK_TIME",
            self.stall_check_warning_time_seconds
                .map(|s| format!("{s}s")),
        );
        set(
            "HVD_STALL_SHUTDOWN_TIME",
            self.stall_check_shutdown_time_seconds
                .map(|s| format!("{s}s")),
        );
        set(
            "HVD_TIMEOUT",
            self.gloo_timeout_seconds.map(|s| format!("{s}s")),
        );
        set("HVD_LOG_LEVEL", self.log_level.clone());
        set("HVD_BACKEND", self.tcp.then(|| "tcp".to_string()));
        Ok(env
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect())
    }

    fn refuse(&self) -> Result<(), String> {
        let no_mpirun = "hvdrun starts its ranks itself; to use MPI, start the program with mpirun (hvd picks its MPI transport there when built with it)";
        let checks: [(bool, &str, &str); 15] = [
            (
                self.hierarchical_allgather,
                "--hierarchical-allgather",
                "hvd has no hierarchical allgather",
            ),
            (
                self.torus_allreduce,
                "--torus-allreduce",
                "hvd has no NCCL torus allreduce",
            ),
            (
                self.autotune_warmup_samples.is_some(),
                "--autotune-warmup-samples",
                "hvd's autotuner always discards its first 3 samples (HVD_AUTOTUNE_STEPS_PER_SAMPLE sets how many steps a sample is)",
            ),
            (
                self.autotune_bayes_opt_max_samples.is_some(),
                "--autotune-bayes-opt-max-samples",
                "hvd's autotuner has no such limit to set",
            ),
            (
                self.autotune_gaussian_process_noise.is_some(),
                "--autotune-gaussian-process-noise",
                "hvd's autotuner has no noise setting",
            ),
            (
                self.log_without_timestamp,
                "--log-without-timestamp",
                "hvd's log lines always carry a timestamp",
            ),
            (
                self.prefix_output_with_timestamp,
                "--prefix-output-with-timestamp",
                "hvdrun tags each line with its rank and stream (or writes files with --output-filename)",
            ),
            (self.mpi, "--mpi", no_mpirun),
            (self.jsrun, "--jsrun", no_mpirun),
            (self.mpi_args.is_some(), "--mpi-args", no_mpirun),
            (self.binding_args.is_some(), "--binding-args", no_mpirun),
            (
                self.mpi_threads_disable || self.no_mpi_threads_disable,
                "--mpi-threads-disable",
                no_mpirun,
            ),
            (
                self.num_nccl_streams.is_some(),
                "--num-nccl-streams",
                "hvd runs NCCL on one stream of its own per rank",
            ),
            (
                self.thread_affinity.is_some(),
                "--thread-affinity",
                "hvd does not pin its background threads",
            ),
            (
                self.config_file.is_some(),
                "--config-file",
                "set the HVD_* (or HOROVOD_*) variables or these flags instead",
            ),
        ];
        match checks.iter().find(|(given, _, _)| *given) {
            Some((_, flag, why)) => Err(refused(flag, why)),
            None => Ok(()),
        }
    }
}

/// `1` for the flag, `0` for its `--no-` form, nothing for neither.
fn switch(on: bool, off: bool) -> Option<String> {
    match (on, off) {
        (true, _) => Some("1".into()),
        (false, true) => Some("0".into()),
        _ => None,
    }
}
