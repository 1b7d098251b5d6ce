//! What the book check reads out of a Markdown page: its code blocks, its links and the
//! anchors its headings get. A small reader rather than a Markdown parser: the book's
//! pages use fenced code blocks, inline links and ATX headings only.

/// A fenced code block: the line it opens on and its info string (`rust,no_run`).
#[derive(Debug, PartialEq, Eq)]
pub struct Block {
    pub line: usize,
    pub info: String,
}

/// An inline link or image target outside code: the line and the target as written.
#[derive(Debug, PartialEq, Eq)]
pub struct Link {
    pub line: usize,
    pub target: String,
}

#[derive(Debug, Default)]
pub struct Page {
    pub blocks: Vec<Block>,
    pub links: Vec<Link>,
    /// The anchors of the page's headings, as mdBook makes them.
    pub anchors: Vec<String>,
    /// A block opened and never closed: the line it opened on.
    pub unclosed: Option<usize>,
}

pub fn read(text: &str) -> Page {
    let mut page = Page::default();
    let mut fence: Option<(String, usize)> = None;
    // A link's text may wrap onto the next line, so links are read from whole
    // paragraphs; the line of a link is the paragraph's first.
    let mut paragraph = String::new();
    let mut paragraph_line = 0;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        if let Some((marker, _)) = &fence {
            if trimmed.starts_with(marker.as_str()) && trimmed.trim_end() == marker {
                fence = None;
            }
            continue;
        }
        if let Some(marker) = fence_marker(trimmed) {
            links_in(&paragraph, paragraph_line, &mut page.links);
            paragraph.clear();
            let info = trimmed[marker.len()..].trim().to_string();
            page.blocks.push(Block { line: number, info });
            fence = Some((marker, number));
            continue;
        }
        if let Some(heading) = heading_text(trimmed) {
            page.anchors.push(unique(anchor(heading), &page.anchors));
        }
        if trimmed.is_empty() {
            links_in(&paragraph, paragraph_line, &mut page.links);
            paragraph.clear();
        } else {
            if paragraph.is_empty() {
                paragraph_line = number;
            }
            paragraph.push_str(line);
            paragraph.push('\n');
        }
    }
    links_in(&paragraph, paragraph_line, &mut page.links);
    page.unclosed = fence.map(|(_, line)| line);
    page
}

fn fence_marker(line: &str) -> Option<String> {
    for ch in ['`', '~'] {
        let count = line.chars().take_while(|&c| c == ch).count();
        if count >= 3 {
            return Some(std::iter::repeat_n(ch, count).collect());
        }
    }
    None
}

fn heading_text(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    rest.starts_with(' ').then(|| rest.trim())
}

/// mdBook's anchor for a heading: the text without Markdown's marks, lower-cased,
/// spaces as dashes, and anything but letters, digits, `-` and `_` dropped.
pub fn anchor(heading: &str) -> String {
    let text = strip_links(heading);
    text.chars()
        .filter_map(|ch| {
            if ch.is_alphanumeric() || ch == '_' || ch == '-' {
                Some(ch.to_lowercase().next().unwrap_or(ch))
            } else if ch.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// A second heading of the same text gets `-1`, a third `-2`, as in mdBook.
fn unique(anchor: String, seen: &[String]) -> String {
    if !seen.contains(&anchor) {
        return anchor;
    }
    (1..)
        .map(|n| format!("{anchor}-{n}"))
        .find(|candidate| !seen.contains(candidate))
        .unwrap_or(anchor)
}

/// `[text](target)` becomes `text`.
fn strip_links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("](") {
        let Some(end) = rest[start..].find(')') else {
            break;
        };
        out.push_str(&rest[..start].replace('[', ""));
        rest = &rest[start + end + 1..];
    }
    out.push_str(&rest.replace('[', ""));
    out
}

/// The targets of `[text](target)` and `![alt](target)` in a paragraph, skipping
/// inline code spans.
fn links_in(paragraph: &str, line: usize, links: &mut Vec<Link>) {
    let mut in_code = false;
    let bytes = paragraph.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => in_code = !in_code,
            b']' if !in_code && bytes.get(i + 1) == Some(&b'(') => {
                let start = i + 2;
                if let Some(end) = paragraph[start..].find(')') {
                    let target = paragraph[start..start + end].trim();
                    // A title after the target (`(page.md "title")`) is not part of it.
                    let target = target.split_whitespace().next().unwrap_or("");
                    links.push(Link {
                        line,
                        target: target.to_string(),
                    });
                    i = start + end;
                }
            }
            _ => {}
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_follow_mdbook() {
        assert_eq!(anchor("Horovod's own tests"), "horovods-own-tests");
        assert_eq!(
            anchor("TensorFlow 2 and Keras 3"),
            "tensorflow-2-and-keras-3"
        );
        assert_eq!(anchor("The `hvd-bench` program"), "the-hvd-bench-program");
        assert_eq!(anchor("See [GPUs](gpus.md) here"), "see-gpus-here");
    }

    #[test]
    fn blocks_links_and_headings_are_read_outside_code() {
        let page = read(
            "# Title\n\nSee [the guide](guide.md#start) and\n![a figure\nwrapped](fig.svg).\n\n\
             ```rust,no_run\nlet x = [1](2);\n# hidden\n```\n\n## Title\n\n`[not](a-link)`\n",
        );
        assert_eq!(
            page.blocks,
            vec![Block {
                line: 7,
                info: "rust,no_run".into()
            }]
        );
        let targets: Vec<_> = page.links.iter().map(|l| l.target.as_str()).collect();
        assert_eq!(targets, ["guide.md#start", "fig.svg"]);
        assert_eq!(page.links[1].line, 3);
        assert_eq!(page.anchors, ["title", "title-1"]);
        assert_eq!(page.unclosed, None);
    }

    #[test]
    fn an_unclosed_block_is_reported() {
        let page = read("text\n\n```python\nprint(1)\n");
        assert_eq!(page.unclosed, Some(3));
    }
}
