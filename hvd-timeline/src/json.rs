//! The little JSON this crate writes, by hand: strings escaped for arbitrary UTF-8 names,
//! and timestamps as decimal microseconds.

use std::fmt::Write;

/// Appends `s` as a JSON string literal. Every character passes through except the quote,
/// the backslash and control characters, which JSON forbids raw.
pub(crate) fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends `ns` nanoseconds as microseconds with three decimals, Chrome's `ts` unit,
/// without going through a float (which would round large timestamps).
pub(crate) fn micros(out: &mut String, ns: i64) {
    let sign = if ns < 0 { "-" } else { "" };
    let abs = ns.unsigned_abs();
    let _ = write!(out, "{sign}{}.{:03}", abs / 1000, abs % 1000);
}

/// A comma-separated run of JSON values, to be placed inside the trace's array.
#[derive(Debug, Default)]
pub(crate) struct List {
    pub text: String,
    pub len: usize,
}

impl List {
    /// Starts the next value: returns the text to write it into.
    pub fn next(&mut self) -> &mut String {
        if self.len > 0 {
            self.text.push_str(",\n");
        }
        self.len += 1;
        &mut self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_unicode_passes_through() {
        let mut out = String::new();
        string(&mut out, "a\"b\\c\nd\u{1}é🙂");
        assert_eq!(out, r#""a\"b\\c\nd\u0001é🙂""#);
    }

    #[test]
    fn timestamps_are_exact_decimal_microseconds() {
        let mut out = String::new();
        for ns in [0, 7, 1_234_567, -1_500, i64::MIN] {
            micros(&mut out, ns);
            out.push(' ');
        }
        assert_eq!(out, "0.000 0.007 1234.567 -1.500 -9223372036854775.808 ");
    }
}
