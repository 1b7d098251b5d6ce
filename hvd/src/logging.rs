//! Logging through `tracing`, on by default at warn level so that a stall or a refused
//! connection is seen without any setup.

use hvd_core::{Error, Result};

/// The level names `HVD_LOG_LEVEL` accepts: ours (`tracing`'s) and Horovod's
/// (`warning`, `fatal`), each with the level it means.
const LEVELS: [(&str, &str); 8] = [
    ("trace", "trace"),
    ("debug", "debug"),
    ("info", "info"),
    ("warn", "warn"),
    ("warning", "warn"),
    ("error", "error"),
    ("fatal", "error"),
    ("off", "off"),
];

/// The filter `HVD_LOG_LEVEL` (alias `HOROVOD_LOG_LEVEL`) asks for, if set. A name
/// other than Horovod's (`trace`, `debug`, `info`, `warning`, `error`, `fatal`, `off`)
/// is refused: silently taking `warning` for "nothing" once hid every warning, the
/// stall warning included.
pub fn level_from_env() -> Result<Option<&'static str>> {
    let Some((name, value)) = hvd_core::env::lookup("LOG_LEVEL") else {
        return Ok(None);
    };
    let wanted = value.trim().to_ascii_lowercase();
    match LEVELS.iter().find(|(given, _)| *given == wanted) {
        Some((_, level)) => Ok(Some(level)),
        None => Err(Error::Config {
            name,
            value,
            expected: format!(
                "a log level: one of {} (for per-module filters use RUST_LOG)",
                LEVELS.map(|(given, _)| given).join(", ")
            ),
        }),
    }
}

/// Installs a stderr subscriber unless the program installed its own. The filter comes
/// from `RUST_LOG`, else `HVD_LOG_LEVEL` (alias `HOROVOD_LOG_LEVEL`), else `warn`; a bad
/// `HVD_LOG_LEVEL` is an error, and nothing is installed.
pub fn install() -> Result<()> {
    // Checked even when RUST_LOG wins, so a typo is found before it matters.
    let level = level_from_env()?;
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| level.unwrap_or("warn").into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: not in hvdrun's pipes or log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    Ok(())
}
