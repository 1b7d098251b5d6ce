//! The per-rank JUnit files pytest writes under `run.sh`, read into one outcome per test
//! (xtask has no dependencies, so this reads the few elements pytest writes by hand).

use std::collections::BTreeMap;
use std::path::Path;

use super::verdict::{Kind, Outcome};

/// How many ranks `run.sh` runs each job with.
const RANKS: usize = 2;

/// One rank's outcome of each test in a JUnit file, in the file's order.
pub(crate) fn parse(xml: &str) -> Vec<(String, Kind, String)> {
    let mut tests = Vec::new();
    let mut rest = xml;
    while let Some(at) = rest.find("<testcase ") {
        rest = &rest[at..];
        let head_end = rest.find('>').unwrap_or(rest.len());
        let head = &rest[..head_end];
        let name = attribute(head, "name").unwrap_or_default();
        let body = if head.ends_with('/') {
            ""
        } else {
            let end = rest.find("</testcase>").unwrap_or(rest.len());
            &rest[head_end..end]
        };
        let (kind, message) = [
            ("<failure", Kind::Failed),
            ("<error", Kind::Failed),
            ("<skipped", Kind::Skipped),
        ]
        .into_iter()
        .find_map(|(tag, kind)| {
            let at = body.find(tag)?;
            let tag_head = &body[at..at + body[at..].find('>').unwrap_or(body.len() - at)];
            Some((kind, attribute(tag_head, "message").unwrap_or_default()))
        })
        .unwrap_or((Kind::Passed, String::new()));
        tests.push((name, kind, message));
        rest = &rest[head_end.min(rest.len())..];
    }
    tests
}

/// The value of `name="..."` in an element's opening tag, with XML's escapes undone.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(unescape(&tag[start..start + len]))
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#10;", " ")
        .replace("&amp;", "&")
}

/// Every rank's outcome of each test, combined: a test must have run on every rank.
fn combine(per_rank: Vec<Vec<(String, Kind, String)>>, names: &[String]) -> Vec<(String, Outcome)> {
    let maps: Vec<BTreeMap<String, (Kind, String)>> = per_rank
        .into_iter()
        .map(|tests| tests.into_iter().map(|(n, k, m)| (n, (k, m))).collect())
        .collect();
    names
        .iter()
        .map(|name| {
            let on_ranks: Vec<Option<&(Kind, String)>> = maps.iter().map(|m| m.get(name)).collect();
            (name.clone(), Outcome::of_ranks(&on_ranks))
        })
        .collect()
}

fn read(path: &Path) -> Vec<(String, Kind, String)> {
    std::fs::read_to_string(path)
        .map(|xml| parse(&xml))
        .unwrap_or_default()
}

/// The whole-file run: each test of either rank's file.
pub(crate) fn whole(dir: &Path) -> Vec<(String, Outcome)> {
    let per_rank: Vec<_> = (0..RANKS)
        .map(|r| read(&dir.join(format!("junit.rank{r}.xml"))))
        .collect();
    let mut names: Vec<String> = Vec::new();
    for (name, _, _) in per_rank.iter().flatten() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    combine(per_rank, &names)
}

/// The isolated run: each test the runner started (it left a log), from its own files.
pub(crate) fn isolated(dir: &Path) -> Vec<(String, Outcome)> {
    let ids = std::fs::read_to_string(dir.join("ids.txt")).unwrap_or_default();
    let names: Vec<String> = ids
        .lines()
        .filter_map(|id| id.rsplit("::").next())
        .filter(|name| dir.join(format!("{name}.log")).exists())
        .map(String::from)
        .collect();
    let per_rank = (0..RANKS)
        .map(|r| {
            names
                .iter()
                .flat_map(|name| read(&dir.join(format!("{name}.rank{r}.xml"))))
                .collect()
        })
        .collect();
    combine(per_rank, &names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pytests_passes_skips_and_failures() {
        let xml = r#"<?xml version="1.0"?><testsuites><testsuite>
            <testcase classname="t.T" name="test_a" time="0.1" />
            <testcase classname="t.T" name="test_b" time="0.1"><skipped type="pytest.skip" message="No GPUs available">x.py:1: No GPUs available</skipped></testcase>
            <testcase classname="t.T" name="test_c" time="0.1"><failure message="ValueError: a &lt;b&gt; &quot;c&quot;">trace</failure></testcase>
            <testcase classname="t.T" name="test_d" time="0.1"><error message="fixture">trace</error></testcase>
            </testsuite></testsuites>"#;
        assert_eq!(
            parse(xml),
            [
                ("test_a".to_string(), Kind::Passed, String::new()),
                ("test_b".into(), Kind::Skipped, "No GPUs available".into()),
                (
                    "test_c".into(),
                    Kind::Failed,
                    "ValueError: a <b> \"c\"".into()
                ),
                ("test_d".into(), Kind::Failed, "fixture".into()),
            ]
        );
    }

    #[test]
    fn a_test_missing_on_a_rank_has_no_result() {
        let both = vec![
            vec![("test_a".into(), Kind::Passed, String::new())],
            Vec::new(),
        ];
        let combined = combine(both, &["test_a".into()]);
        assert_eq!(combined[0].1.to_string(), "no result on rank 1");
    }
}
