//! The double's settings, read from the environment once per process.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::fault::Fault;
use crate::support::{DEVICES_VAR, FAULTS_VAR, LAZY_VAR, MEMORY_VAR, TRACE_VAR};

/// The NCCL version reported unless a `version` fault says otherwise: the one the GPU
/// machines run (2.28.9).
pub(crate) const NCCL_VERSION: i32 = 22809;
/// The CUDA driver version reported (13.0).
pub(crate) const DRIVER_VERSION: i32 = 13000;

#[derive(Debug)]
pub(crate) struct Settings {
    pub devices: u32,
    pub memory: usize,
    pub lazy: bool,
    pub faults: Vec<Fault>,
    pub trace: Option<PathBuf>,
    /// What was wrong with the environment, if anything: every initialising call fails.
    pub problem: Option<String>,
}

pub(crate) fn settings() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let settings = read();
        if let Some(problem) = &settings.problem {
            eprintln!("hvd-gpu-double: {problem}");
        }
        settings
    })
}

fn read() -> Settings {
    let mut problems = Vec::new();
    let mut value = |name: &str, parse: fn(&str) -> Option<u64>, default: u64| -> u64 {
        match std::env::var(name) {
            Ok(text) => parse(text.trim()).unwrap_or_else(|| {
                problems.push(format!("{name}={text:?} is not a valid value"));
                default
            }),
            Err(_) => default,
        }
    };
    let devices = value(
        DEVICES_VAR,
        |t| t.parse().ok().filter(|n| (1..=16).contains(n)),
        8,
    );
    let memory = value(MEMORY_VAR, bytes, 8 << 30);
    let lazy = value(
        LAZY_VAR,
        |t| matches!(t, "0" | "1").then(|| u64::from(t == "1")),
        0,
    );
    let faults = match std::env::var(FAULTS_VAR) {
        Ok(text) => Fault::parse_list(&text).unwrap_or_else(|e| {
            problems.push(format!("{FAULTS_VAR}={text:?}: {e}"));
            Vec::new()
        }),
        Err(_) => Vec::new(),
    };
    Settings {
        devices: devices as u32,
        memory: memory as usize,
        lazy: lazy == 1,
        faults,
        trace: std::env::var_os(TRACE_VAR).map(PathBuf::from),
        problem: (!problems.is_empty()).then(|| problems.join("; ")),
    }
}

/// A byte count with an optional K, M or G suffix (powers of 1024).
fn bytes(text: &str) -> Option<u64> {
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 10),
        b'M' | b'm' => (&text[..text.len() - 1], 20),
        b'G' | b'g' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(bytes("512"), Some(512));
        assert_eq!(bytes("4K"), Some(4096));
        assert_eq!(bytes("2g"), Some(2 << 30));
        assert_eq!(bytes("lots"), None);
    }
}
