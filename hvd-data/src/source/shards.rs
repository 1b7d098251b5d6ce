//! WebDataset-style tar shards: a sample is the members that share a key (the path up to
//! the first dot of the file name), here an image (`.jpg`, `.jpeg`, `.png`) and its class
//! (`.cls`, a decimal number).

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::{Encoding, Sample, Source, image_encoding};
use crate::{Error, Result};

/// Samples from a list of tar shards, numbered shard by shard in the order the shards are
/// given and, within one, in the order their members appear. Opening reads every shard's
/// headers (and the small `.cls` members) once; a sample's image is read from its offset
/// when the loader needs it.
#[derive(Debug, Clone)]
pub struct TarShards {
    shards: Vec<PathBuf>,
    samples: Vec<Member>,
}

#[derive(Debug, Clone)]
struct Member {
    shard: usize,
    name: String,
    offset: u64,
    size: u64,
    sample: Sample,
}

/// A sample's members as one shard's index finds them.
#[derive(Default)]
struct Parts {
    image: Option<(String, u64, u64, Encoding)>,
    label: Option<i64>,
}

impl TarShards {
    /// Indexes `shards`. An unreadable, truncated or empty shard, or a sample without an
    /// image or a class, is an error naming the shard and the member.
    pub fn open(shards: impl IntoIterator<Item = impl AsRef<Path>>) -> Result<Self> {
        let shards: Vec<PathBuf> = shards.into_iter().map(|p| p.as_ref().into()).collect();
        let mut samples = Vec::new();
        for (index, path) in shards.iter().enumerate() {
            let found = index_shard(index, path)?;
            if found.is_empty() {
                return Err(Error::source(path, "empty shard: no samples in it"));
            }
            samples.extend(found);
        }
        Ok(TarShards { shards, samples })
    }

    /// The shards, in the order their samples are numbered.
    pub fn shards(&self) -> &[PathBuf] {
        &self.shards
    }
}

fn index_shard(shard: usize, path: &Path) -> Result<Vec<Member>> {
    let file = File::open(path).map_err(|e| Error::source(path, e))?;
    // The tar reader takes a cut-off file for a shorter archive; the length tells.
    let file_len = file.metadata().map_err(|e| Error::source(path, e))?.len();
    let mut archive = tar::Archive::new(file);
    let mut keys: Vec<String> = Vec::new();
    let mut parts: HashMap<String, Parts> = HashMap::new();
    let entries = archive
        .entries_with_seek()
        .map_err(|e| Error::source(path, e))?;
    let mut last = String::from("the first member");
    for entry in entries {
        let mut entry = entry
            .map_err(|e| Error::source(path, format!("unreadable tar header after {last}: {e}")))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry
            .path()
            .map_err(|e| Error::source(path, format!("a member's name after {last}: {e}")))?
            .to_string_lossy()
            .into_owned();
        last = name.clone();
        let Some((key, extension)) = split_key(&name) else {
            continue;
        };
        let part = parts.entry(key.to_owned()).or_insert_with(|| {
            keys.push(key.to_owned());
            Parts::default()
        });
        if extension == "cls" {
            let mut text = String::new();
            entry
                .read_to_string(&mut text)
                .map_err(|e| Error::source(path, format!("{name}: {e}")))?;
            let label = text.trim().parse().map_err(|_| {
                Error::source(
                    path,
                    format!("{name}: class {:?} is not an integer", text.trim()),
                )
            })?;
            part.label = Some(label);
        } else if let Some(encoding) = image_encoding(extension) {
            // A corrupt header's size may be near u64::MAX: saturate, and be cut short.
            let end = entry.raw_file_position().saturating_add(entry.size());
            if end > file_len {
                return Err(Error::source(
                    path,
                    format!(
                        "{name}: the shard is cut short: the member ends at byte {end} of a {file_len}-byte file"
                    ),
                ));
            }
            part.image = Some((name, entry.raw_file_position(), entry.size(), encoding));
        }
    }
    keys.into_iter()
        .filter_map(|key| {
            let part = parts.remove(&key)?;
            match (part.image, part.label) {
                (Some((name, offset, size, encoding)), Some(label)) => Some(Ok(Member {
                    shard,
                    name,
                    offset,
                    size,
                    sample: Sample { label, encoding },
                })),
                (None, None) => None,
                (None, Some(_)) => Some(Err(Error::source(
                    path,
                    format!("sample {key:?} has a .cls but no image (.jpg, .jpeg, .png)"),
                ))),
                (Some(_), None) => Some(Err(Error::source(
                    path,
                    format!("sample {key:?} has an image but no .cls class"),
                ))),
            }
        })
        .collect()
}

/// `dir/key.ext.more` → (`dir/key`, `ext.more`), WebDataset's rule.
fn split_key(name: &str) -> Option<(&str, &str)> {
    let start = name.rfind('/').map_or(0, |slash| slash + 1);
    let dot = start + name[start..].find('.')?;
    Some((&name[..dot], &name[dot + 1..]))
}

impl Source for TarShards {
    fn len(&self) -> usize {
        self.samples.len()
    }

    fn read(&self, index: usize, bytes: &mut Vec<u8>) -> Result<Sample> {
        let member = self
            .samples
            .get(index)
            .ok_or_else(|| Error::sample(index, self.name(index), "no such sample"))?;
        let failed = |e: std::io::Error| Error::sample(index, self.name(index), e);
        let mut file = File::open(&self.shards[member.shard]).map_err(failed)?;
        file.seek(SeekFrom::Start(member.offset)).map_err(failed)?;
        bytes.clear();
        let read = file.take(member.size).read_to_end(bytes).map_err(failed)?;
        if read as u64 != member.size {
            return Err(Error::sample(
                index,
                self.name(index),
                format!(
                    "shard ends after {read} of the member's {} bytes",
                    member.size
                ),
            ));
        }
        Ok(member.sample)
    }

    fn name(&self, index: usize) -> String {
        match self.samples.get(index) {
            Some(m) => format!("{}:{}", self.shards[m.shard].display(), m.name),
            None => format!("no sample {index} in {} shards", self.shards.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_key;

    #[test]
    fn keys_end_at_the_first_dot_of_the_file_name() {
        assert_eq!(split_key("a/b.c/x01.jpg"), Some(("a/b.c/x01", "jpg")));
        assert_eq!(split_key("x01.seg.png"), Some(("x01", "seg.png")));
        assert_eq!(split_key("dir/noext"), None);
    }
}
