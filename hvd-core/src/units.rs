//! Byte sizes as people write them: `4K`, `64MiB`, `128MB`, `1048576`.

use crate::{Error, Result};

/// The accepted forms, for error messages.
pub const BYTE_FORMS: &str = "a byte count such as 1048576, 4K, 64KiB, 1M, 64MiB, 128MB, 1G (K/KiB/M/MiB/G/GiB are powers of 1024; KB/MB/GB are powers of 1000)";

/// Parses a byte size. `name` is what the value came from (an environment variable or a
/// flag), for the error message.
pub fn parse_bytes(name: &str, value: &str) -> Result<usize> {
    let bad = || Error::Config {
        name: name.into(),
        value: value.into(),
        expected: BYTE_FORMS.into(),
    };
    let text = value.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: usize = digits.parse().map_err(|_| bad())?;
    let multiplier: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return Err(bad()),
    };
    number.checked_mul(multiplier).ok_or_else(bad)
}

/// Formats a byte count the way [`parse_bytes`] reads it back, with the largest binary
/// unit that divides it (`4K`, `64M`, `1000`).
pub fn format_bytes(bytes: usize) -> String {
    for (unit, size) in [("G", 1usize << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_units() {
        let cases = [
            ("1048576", 1 << 20),
            ("4K", 4096),
            ("64MiB", 64 << 20),
            ("128MB", 128_000_000),
            (" 2g ", 2 << 30),
            ("0", 0),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_bytes("x", text).unwrap(), bytes, "{text}");
        }
        assert_eq!(format_bytes(256 << 20), "256M");
        assert_eq!(format_bytes(1000), "1000");
    }

    #[test]
    fn a_bad_size_names_the_variable_and_the_forms() {
        let err = parse_bytes("HVD_FUSION_THRESHOLD", "64 parsecs").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("invalid value \"64 parsecs\" for HVD_FUSION_THRESHOLD: expected {BYTE_FORMS}")
        );
        assert!(parse_bytes("x", "99999999999999999999G").is_err());
        assert!(parse_bytes("x", "-1").is_err());
    }
}
