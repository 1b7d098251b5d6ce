//! The runtime's configuration: every `HVD_*` variable (Horovod's `HOROVOD_*` names
//! accepted as aliases), validated at init, printable as it takes effect.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use hvd_core::units::{self, TimeUnit};
use hvd_core::{Compression, Result};

use hvd_core::env;

/// Settings of the runtime. [`Config::from_env`] reads them; the builder can override any.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// How long the background thread waits for more work before a negotiation round when
    /// it has nothing to do (`HVD_CYCLE_TIME`, milliseconds; default 1). A submitted
    /// tensor wakes it at once.
    pub cycle_time: Duration,
    /// Entries of the response cache (`HVD_CACHE_CAPACITY`; default 1024; 0 turns it off).
    pub cache_capacity: usize,
    /// Tensor Fusion buffer size at start (`HVD_FUSION_THRESHOLD`; default 128 MiB; 0
    /// turns fusion off). The autotuner changes it at run time; process sets follow.
    pub fusion_threshold: usize,
    /// How allreduces send f32 and f64 tensors unless a call says otherwise
    /// (`HVD_COMPRESSION`: `none`, `fp16` or `bf16`; default none). Every rank must use
    /// the same.
    pub compression: Compression,
    /// Warn about tensors some ranks have not submitted after this long
    /// (`HVD_STALL_CHECK_TIME`, seconds; default 60; `HVD_STALL_CHECK_DISABLE=1` turns the
    /// stall inspector off).
    pub stall_check: Option<Duration>,
    /// Fail such tensors on every rank after this long (`HVD_STALL_SHUTDOWN_TIME`,
    /// seconds; default 300, so no job hangs forever).
    pub stall_shutdown: Option<Duration>,
    /// Tune the fusion threshold and cycle time during the first steps (`HVD_AUTOTUNE=1`).
    pub autotune: bool,
    /// Where rank 0 writes every point the autotuner tried, as CSV (`HVD_AUTOTUNE_LOG`).
    pub autotune_log: Option<PathBuf>,
    /// Training steps per autotune sample (`HVD_AUTOTUNE_STEPS_PER_SAMPLE`; default 1).
    pub autotune_steps_per_sample: usize,
    /// Record a Chrome trace of every rank into this file, written by rank 0
    /// (`HVD_TIMELINE`). Horovod's `DYNAMIC` means no file at start, the Timeline being
    /// started and stopped by the program ([`crate::Hvd::start_timeline`], which hvd
    /// allows whatever this is).
    pub timeline: Option<PathBuf>,
    /// Mark the start of every negotiation cycle in the trace
    /// (`HVD_TIMELINE_MARK_CYCLES=1`).
    pub timeline_mark_cycles: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cycle_time: Duration::from_millis(1),
            cache_capacity: 1024,
            fusion_threshold: 128 << 20,
            compression: Compression::None,
            stall_check: Some(Duration::from_secs(60)),
            stall_shutdown: Some(Duration::from_secs(300)),
            autotune: false,
            autotune_log: None,
            autotune_steps_per_sample: 1,
            timeline: None,
            timeline_mark_cycles: false,
        }
    }
}

/// The value of `HVD_TIMELINE` that leaves the Timeline to the program, as in Horovod.
const DYNAMIC_TIMELINE: &str = "DYNAMIC";

fn duration(suffixes: &[&str], bare: TimeUnit) -> Result<Option<Duration>> {
    let names: Vec<String> = suffixes
        .iter()
        .flat_map(|s| [format!("HVD_{s}"), format!("HOROVOD_{s}")])
        .collect();
    env::first_set(&names)
        .map(|(name, value)| units::parse_duration(&name, &value, bare))
        .transpose()
}

fn flag(suffix: &str) -> Result<bool> {
    Ok(env::flag(suffix)?.unwrap_or(false))
}

impl Config {
    /// Reads and validates every variable; a bad value is an error naming the variable,
    /// the value and the accepted forms.
    pub fn from_env() -> Result<Config> {
        let mut config = Config::default();
        if let Some(t) = duration(&["CYCLE_TIME"], TimeUnit::Milliseconds)? {
            config.cycle_time = t;
        }
        if let Some(n) = env::parse(
            "CACHE_CAPACITY",
            "a number of entries such as 1024 (0 turns the cache off)",
        )? {
            config.cache_capacity = n;
        }
        if let Some((name, value)) = env::lookup("FUSION_THRESHOLD") {
            config.fusion_threshold = units::parse_bytes(&name, &value)?;
        }
        if let Some((name, value)) = env::lookup("COMPRESSION") {
            config.compression = value.parse().map_err(|_| hvd_core::Error::Config {
                name,
                value,
                expected: "none, fp16 or bf16".into(),
            })?;
        }
        // 0 turns either off, as Horovod's 0 does.
        if let Some(t) = duration(
            &["STALL_CHECK_TIME", "STALL_CHECK_TIME_SECONDS"],
            TimeUnit::Seconds,
        )? {
            config.stall_check = Some(t).filter(|t| !t.is_zero());
        }
        if let Some(t) = duration(
            &["STALL_SHUTDOWN_TIME", "STALL_SHUTDOWN_TIME_SECONDS"],
            TimeUnit::Seconds,
        )? {
            config.stall_shutdown = Some(t).filter(|t| !t.is_zero());
        }
        // Silences the warnings only. Jobs set it because one rank legitimately runs
        // ahead for minutes (evaluation, a checkpoint); the shutdown then still ends a
        // rank that truly diverged, with an error naming the tensor and the ranks that
        // never submitted it, where Horovod's disabled check would wait for ever.
        if flag("STALL_CHECK_DISABLE")? {
            config.stall_check = None;
        }
        config.autotune = flag("AUTOTUNE")?;
        config.autotune_log = env::lookup("AUTOTUNE_LOG").map(|(_, path)| PathBuf::from(path));
        if let Some(n) = env::parse(
            "AUTOTUNE_STEPS_PER_SAMPLE",
            "a number of training steps such as 1",
        )? {
            config.autotune_steps_per_sample = n;
        }
        config.timeline = env::lookup("TIMELINE")
            .filter(|(_, value)| value != DYNAMIC_TIMELINE)
            .map(|(_, path)| PathBuf::from(path));
        config.timeline_mark_cycles = flag("TIMELINE_MARK_CYCLES")?;
        Ok(config)
    }
}

fn seconds(d: Option<Duration>) -> String {
    d.map_or_else(|| "off".into(), |d| format!("{:?}", d))
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "HVD_CYCLE_TIME          {:?}", self.cycle_time)?;
        writeln!(f, "HVD_CACHE_CAPACITY      {}", self.cache_capacity)?;
        writeln!(
            f,
            "HVD_FUSION_THRESHOLD    {}",
            units::format_bytes(self.fusion_threshold)
        )?;
        writeln!(f, "HVD_COMPRESSION         {}", self.compression)?;
        writeln!(f, "HVD_STALL_CHECK_TIME    {}", seconds(self.stall_check))?;
        write!(
            f,
            "HVD_STALL_SHUTDOWN_TIME {}",
            seconds(self.stall_shutdown)
        )
    }
}
