//! Logging through `tracing`, on by default at warn level so that a stall or a refused
//! connection is seen without any setup.

/// Installs a stderr subscriber unless the program installed its own. The filter comes
/// from `RUST_LOG`, else `HVD_LOG_LEVEL` (alias `HOROVOD_LOG_LEVEL`), else `warn`.
pub fn install() {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .or_else(|| crate::env::lookup("LOG_LEVEL").map(|(_, v)| v))
        .unwrap_or_else(|| "warn".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: not in hvdrun's pipes or log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
