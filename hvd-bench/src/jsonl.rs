//! Reading measurements written as JSON lines, with errors that name the file and the
//! line a bad value is on (`runs.jsonl:3: "np" is not a number`).

use std::path::Path;

use serde_json::Value;

/// One line of a JSON lines file: an object, and where it came from.
#[derive(Debug)]
pub struct Record<'a> {
    path: &'a Path,
    line: usize,
    value: Value,
}

impl Record<'_> {
    /// The line number, from 1.
    pub fn line(&self) -> usize {
        self.line
    }

    /// An error about this line, prefixed with the file and the line number.
    pub fn error(&self, message: impl std::fmt::Display) -> String {
        format!("{}:{}: {message}", self.path.display(), self.line)
    }

    /// A field that may be `null`.
    pub fn field(&self, name: &str) -> Result<&Value, String> {
        self.value
            .get(name)
            .ok_or_else(|| self.error(format_args!("no \"{name}\" in {}", self.value)))
    }

    pub fn number(&self, name: &str) -> Result<f64, String> {
        let value = self.field(name)?;
        value
            .as_f64()
            .ok_or_else(|| self.error(format_args!("\"{name}\" is not a number: {value}")))
    }

    /// A count: a whole number, at least 1.
    pub fn count(&self, name: &str) -> Result<usize, String> {
        let value = self.field(name)?;
        value
            .as_u64()
            .filter(|&n| n > 0)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                self.error(format_args!(
                    "\"{name}\" is not a whole number above 0: {value}"
                ))
            })
    }

    pub fn text(&self, name: &str) -> Result<&str, String> {
        let value = self.field(name)?;
        value
            .as_str()
            .ok_or_else(|| self.error(format_args!("\"{name}\" is not text: {value}")))
    }
}

/// The records of `text`, read from `path`; blank lines are skipped.
pub fn parse<'a>(path: &'a Path, text: &str) -> Result<Vec<Record<'a>>, String> {
    let mut records = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_number = index + 1;
        let value: Value = serde_json::from_str(line).map_err(|e| {
            // serde counts lines and columns within the one line it was given.
            let message = e.to_string();
            let at = format!(" at line {} column {}", e.line(), e.column());
            let reason = message.strip_suffix(&at).unwrap_or(&message);
            format!(
                "{}:{line_number}:{}: {reason}: {line}",
                path.display(),
                e.column()
            )
        })?;
        if !value.is_object() {
            return Err(format!(
                "{}:{line_number}: not a JSON object: {line}",
                path.display()
            ));
        }
        records.push(Record {
            path,
            line: line_number,
            value,
        });
    }
    Ok(records)
}

/// The records of the file at `path`.
pub fn read(path: &Path) -> Result<Vec<Record<'_>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_objects_and_skips_blank_lines() {
        let path = Path::new("runs.jsonl");
        let records = parse(
            path,
            "{\"np\":2,\"name\":\"tcp\"}\n\n{\"np\":4,\"x\":null}\n",
        )
        .unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].count("np"), Ok(2));
        assert_eq!(records[0].text("name"), Ok("tcp"));
        assert_eq!(records[1].number("np"), Ok(4.0));
        assert_eq!(records[1].field("x"), Ok(&Value::Null));
    }

    #[test]
    fn errors_name_the_file_and_the_line() {
        let path = Path::new("runs.jsonl");
        assert_eq!(
            parse(path, "{\"np\":2}\n\n{\"np\": 2,}\n").unwrap_err(),
            "runs.jsonl:3:10: trailing comma: {\"np\": 2,}"
        );
        assert_eq!(
            parse(path, "[1, 2]").unwrap_err(),
            "runs.jsonl:1: not a JSON object: [1, 2]"
        );
        let records = parse(path, "{\"np\":0}\n{\"np\":\"two\"}\n{\"bytes\":1.5}").unwrap();
        assert_eq!(
            records[0].count("np").unwrap_err(),
            "runs.jsonl:1: \"np\" is not a whole number above 0: 0"
        );
        assert_eq!(
            records[1].number("np").unwrap_err(),
            "runs.jsonl:2: \"np\" is not a number: \"two\""
        );
        assert_eq!(
            records[2].count("bytes").unwrap_err(),
            "runs.jsonl:3: \"bytes\" is not a whole number above 0: 1.5"
        );
        assert_eq!(
            records[2].text("time").unwrap_err(),
            "runs.jsonl:3: no \"time\" in {\"bytes\":1.5}"
        );
    }
}
