//! A store in a directory shared by every rank: a local directory for ranks on one host,
//! or a shared file system (NFS) between hosts.
//!
//! Each key is one file. Writers write a temporary file and rename it over the key's file,
//! so readers, who take no lock, see the old value or the new one and never part of one.
//! Every write holds an exclusive lock on the directory's lock file, which makes `add` and
//! `delete` atomic with respect to `set` across threads, processes and hosts.

use std::collections::hash_map::RandomState;
use std::fs::{self, File, OpenOptions};
use std::hash::BuildHasher;
use std::io::{ErrorKind, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use super::{Deadline, Store, parse_counter, timeout_error};
use crate::{Error, Result};

/// Key files start with this. Temporary files and the lock file start with '.', which an
/// encoded key never contains, so no key can ever name them.
const KEY_PREFIX: &str = "k-";
const TEMP_PREFIX: &str = ".tmp-";
const LOCK_NAME: &str = ".lock";

/// `get` polls quickly at first, so a value set a moment later is seen at once, and backs
/// off so that a long wait for a slow rank costs little.
const FIRST_POLL: Duration = Duration::from_millis(1);
const MAX_POLL: Duration = Duration::from_millis(50);

/// How long an operation waits for the store's lock (short in tests, which time it out).
const LOCK_TIMEOUT: Duration = if cfg!(test) {
    Duration::from_millis(200)
} else {
    Duration::from_secs(60)
};

/// Numbers the temporary files of this process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// A [`Store`] over a directory that every rank can reach.
///
/// Open one per rank on the same path. Keys may be any string: each is encoded into a
/// single file name in the directory. Locking uses `flock`-style file locks, which NFS
/// supports (v4, or v3 with a lock manager).
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
    /// Random per store, so processes on different hosts that happen to share a pid
    /// still write different temporary files.
    nonce: u64,
}

impl FileStore {
    /// Opens the store in `dir`, creating the directory if needed.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating store directory {}", dir.display()), &e))?;
        Ok(FileStore {
            dir,
            nonce: RandomState::new().hash_one(std::process::id()),
        })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(file_name(key))
    }

    /// Takes the store-wide write lock; it is released when the returned file is dropped.
    /// The file is opened anew on each call because a lock belongs to an open file, not to
    /// a thread: threads sharing one handle would not exclude each other.
    fn lock(&self) -> Result<File> {
        let path = self.dir.join(LOCK_NAME);
        let context = || format!("locking store {}", path.display());
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(context(), &e))?;
        // Polled rather than blocking: a holder that is stuck (or a stale lock on a
        // network file system) becomes an error naming the lock, not a hang.
        let deadline = Deadline::after(LOCK_TIMEOUT);
        let mut pause = FIRST_POLL;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(context(), &e)),
                Err(std::fs::TryLockError::WouldBlock) if deadline.left().is_zero() => {
                    return Err(Error::Store(format!(
                        "{} is still held after {:?}: another process holds the store's lock and does not let go (a stuck rank, or a stale lock on a network file system)",
                        path.display(),
                        LOCK_TIMEOUT
                    )));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_POLL);
                }
            }
        }
    }

    fn read(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(key);
        match fs::read(&path) {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(
                format!("reading store key '{key}' from {}", path.display()),
                &e,
            )),
        }
    }

    /// Replaces the value of `key` in one step; the caller holds the lock.
    fn write(&self, key: &str, value: &[u8]) -> Result<()> {
        let path = self.path(key);
        let temp = self.dir.join(format!(
            "{TEMP_PREFIX}{}-{:016x}-{}",
            std::process::id(),
            self.nonce,
            NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
        ));
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut file| file.write_all(value))
            .and_then(|()| fs::rename(&temp, &path));
        written.map_err(|e| {
            // Best effort: a temporary file left behind is ignored by readers anyway.
            let _ = fs::remove_file(&temp);
            Error::io(
                format!("writing store key '{key}' to {}", path.display()),
                &e,
            )
        })
    }
}

impl Store for FileStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let _lock = self.lock()?;
        self.write(key, value)
    }

    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        let deadline = Deadline::after(timeout);
        let mut pause = FIRST_POLL;
        loop {
            if let Some(value) = self.read(key)? {
                return Ok(value);
            }
            let left = deadline.left();
            if left.is_zero() {
                return Err(timeout_error(key, timeout));
            }
            thread::sleep(pause.min(left));
            pause = (pause * 2).min(MAX_POLL);
        }
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.read(key)
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let _lock = self.lock()?;
        let current = match self.read(key)? {
            Some(bytes) => parse_counter(key, &bytes)?,
            None => 0,
        };
        let value = current.wrapping_add(delta);
        self.write(key, value.to_string().as_bytes())?;
        Ok(value)
    }

    fn delete(&self, key: &str) -> Result<bool> {
        let _lock = self.lock()?;
        let path = self.path(key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(
                format!("deleting store key '{key}' at {}", path.display()),
                &e,
            )),
        }
    }
}

/// The file name of `key`: [`KEY_PREFIX`], then the key with every byte other than a
/// lowercase letter, a digit, '_' or '-' written as `%XX`. The result is one path
/// component that is never "." or "..", and distinct keys stay distinct even on file
/// systems that ignore case (escapes are the only uppercase letters).
fn file_name(key: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut name = String::with_capacity(KEY_PREFIX.len() + key.len());
    name.push_str(KEY_PREFIX);
    for &byte in key.as_bytes() {
        if byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_' || byte == b'-' {
            name.push(char::from(byte));
        } else {
            name.push('%');
            name.push(char::from(HEX[usize::from(byte >> 4)]));
            name.push(char::from(HEX[usize::from(byte & 0xF)]));
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn a_lock_held_elsewhere_ends_in_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("hvd-lock-test-{}", std::process::id()));
        let store = FileStore::new(&dir).unwrap();
        // Another open file description holding the lock: as another process would.
        let holder = File::create(dir.join(LOCK_NAME)).unwrap();
        holder.lock().unwrap();
        let err = store.set("k", b"v").unwrap_err();
        drop(holder);
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(
            err.to_string(),
            format!(
                "store: {} is still held after 200ms: another process holds the store's lock and does not let go (a stuck rank, or a stale lock on a network file system)",
                dir.join(LOCK_NAME).display()
            )
        );
    }

    #[test]
    fn file_names_are_single_distinct_components() {
        let keys = [
            "",
            ".",
            "..",
            "a/b",
            "a%2Fb",
            "../x",
            "A",
            "a",
            "ünï",
            "with space",
            "k-a",
        ];
        let names: HashSet<String> = keys.iter().map(|k| file_name(k).to_lowercase()).collect();
        assert_eq!(names.len(), keys.len(), "{names:?}");
        for name in &names {
            assert!(name.starts_with(KEY_PREFIX), "{name}");
            assert!(!name.contains(['/', '\\', '.']), "{name}");
        }
        assert_eq!(file_name("Rank.0/addr"), "k-%52ank%2E0%2Faddr");
    }
}
