//! Byte sizes as people write them: `4K`, `64MiB`, `128MB`, `1048576`.

use std::ops::RangeInclusive;

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

/// Parses a byte size that must lie in `range`; the error names the bounds.
pub fn parse_bytes_in(name: &str, value: &str, range: RangeInclusive<usize>) -> Result<usize> {
    let bytes = parse_bytes(name, value)?;
    if range.contains(&bytes) {
        return Ok(bytes);
    }
    Err(out_of_bounds(name, value, &range))
}

/// Refuses a byte size outside `range` (one set in code rather than read from text),
/// with the same words as [`parse_bytes_in`].
pub fn check_bytes_in(name: &str, bytes: usize, range: RangeInclusive<usize>) -> Result<()> {
    if range.contains(&bytes) {
        return Ok(());
    }
    Err(out_of_bounds(name, &bytes.to_string(), &range))
}

fn out_of_bounds(name: &str, value: &str, range: &RangeInclusive<usize>) -> Error {
    let bounds = match (*range.start(), *range.end()) {
        (0, max) => format!("at most {}", format_bytes(max)),
        (min, usize::MAX) => format!("at least {}", format_bytes(min)),
        (min, max) => format!("from {} to {}", format_bytes(min), format_bytes(max)),
    };
    Error::Config {
        name: name.into(),
        value: value.into(),
        expected: format!("{bounds}: {BYTE_FORMS}"),
    }
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

/// The unit a bare number means in a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Milliseconds,
    Seconds,
}

/// The longest duration accepted: anything longer means "never", and could not be added
/// to the clock to make a deadline.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 24 * 3600);

/// Parses a duration: a number with an optional unit (`us`, `ms`, `s`, `m`, `h`), at most ten
/// years; a bare number is in `bare` units. `name` is what the value came from, for the
/// error message.
pub fn parse_duration(name: &str, value: &str, bare: TimeUnit) -> Result<std::time::Duration> {
    let bare_word = match bare {
        TimeUnit::Milliseconds => "milliseconds",
        TimeUnit::Seconds => "seconds",
    };
    let bad = || Error::Config {
        name: name.into(),
        value: value.into(),
        expected: format!(
            "a duration such as 1.5, 500ms, 30s, 5m or 1h (a bare number is in {bare_word}), at most ten years"
        ),
    };
    let text = value.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let seconds_per_unit = match (unit.trim(), bare) {
        ("us" | "\u{b5}s", _) => 1e-6,
        ("", TimeUnit::Milliseconds) | ("ms", _) => 1e-3,
        ("", TimeUnit::Seconds) | ("s", _) => 1.0,
        ("m" | "min", _) => 60.0,
        ("h", _) => 3600.0,
        _ => return Err(bad()),
    };
    std::time::Duration::try_from_secs_f64(number * seconds_per_unit)
        .ok()
        .filter(|d| *d <= MAX_DURATION)
        .ok_or_else(bad)
}

/// Parses a timeout: a positive duration, a bare number in seconds.
pub fn parse_timeout(name: &str, value: &str) -> Result<std::time::Duration> {
    let duration = parse_duration(name, value, TimeUnit::Seconds)?;
    if duration.is_zero() {
        return Err(Error::Config {
            name: name.into(),
            value: value.into(),
            expected: "a positive duration such as 30, 2.5 or 5m".into(),
        });
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_with_and_without_units() {
        let ms = TimeUnit::Milliseconds;
        let s = TimeUnit::Seconds;
        assert_eq!(
            parse_duration("x", "1", ms).unwrap(),
            Duration::from_millis(1)
        );
        assert_eq!(
            parse_duration("x", "2.5", ms).unwrap(),
            Duration::from_micros(2500)
        );
        assert_eq!(
            parse_duration("x", "60", s).unwrap(),
            Duration::from_secs(60)
        );
        assert_eq!(
            parse_duration("x", "5m", s).unwrap(),
            Duration::from_secs(300)
        );
        assert_eq!(
            parse_duration("x", "250ms", s).unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            parse_duration("x", "50us", s).unwrap(),
            Duration::from_micros(50)
        );
        assert_eq!(
            parse_duration("HVD_CYCLE_TIME", "soon", ms)
                .unwrap_err()
                .to_string(),
            "invalid value \"soon\" for HVD_CYCLE_TIME: expected a duration such as 1.5, 500ms, 30s, 5m or 1h (a bare number is in milliseconds), at most ten years"
        );
        for bad in ["-1", "1e999", "100000000000"] {
            assert_eq!(
                parse_duration("HVD_START_TIMEOUT", bad, s)
                    .unwrap_err()
                    .to_string(),
                format!(
                    "invalid value \"{bad}\" for HVD_START_TIMEOUT: expected a duration such as 1.5, 500ms, 30s, 5m or 1h (a bare number is in seconds), at most ten years"
                )
            );
        }
    }

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
        for bad in ["99999999999999999999G", "17179869184G", "-1"] {
            assert_eq!(
                parse_bytes("size", bad).unwrap_err().to_string(),
                format!("invalid value \"{bad}\" for size: expected {BYTE_FORMS}")
            );
        }
    }

    #[test]
    fn bounded_sizes_name_their_bounds() {
        assert_eq!(
            parse_bytes_in("x", "64K", 1..=usize::MAX).unwrap(),
            64 << 10
        );
        let cases = [
            (0..=(64 << 20), "1G", "at most 64M"),
            (1..=usize::MAX, "0", "at least 1"),
            ((4 << 10)..=(256 << 20), "1K", "from 4K to 256M"),
        ];
        for (range, value, bounds) in cases {
            assert_eq!(
                parse_bytes_in("HVD_X", value, range)
                    .unwrap_err()
                    .to_string(),
                format!("invalid value \"{value}\" for HVD_X: expected {bounds}: {BYTE_FORMS}")
            );
        }
        assert_eq!(
            check_bytes_in("slot", 5, 8..=16).unwrap_err().to_string(),
            format!("invalid value \"5\" for slot: expected from 8 to 16: {BYTE_FORMS}")
        );
    }

    #[test]
    fn a_timeout_is_positive() {
        assert_eq!(parse_timeout("t", "2").unwrap(), Duration::from_secs(2));
        assert_eq!(
            parse_timeout("HVD_TIMEOUT", "0").unwrap_err().to_string(),
            "invalid value \"0\" for HVD_TIMEOUT: expected a positive duration such as 30, 2.5 or 5m"
        );
    }
}
