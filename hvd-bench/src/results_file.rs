//! The file a sweep's local jobs append their results to (their rank 0, one record per
//! job), read back once every job has run; removed when dropped.

use std::path::{Path, PathBuf};

pub struct ResultsFile(PathBuf);

impl ResultsFile {
    /// A new empty file in the temporary directory, `<stem>-<pid>.<extension>`.
    pub fn create(stem: &str, extension: &str) -> Result<Self, String> {
        let path = std::env::temp_dir().join(format!("{stem}-{}.{extension}", std::process::id()));
        // create_new: never truncate, or follow a link planted at, a name in a shared /tmp.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(ResultsFile(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// What the jobs wrote.
    pub fn read(&self) -> Result<String, String> {
        std::fs::read_to_string(&self.0)
            .map_err(|e| format!("cannot read {}: {e}", self.0.display()))
    }
}

impl Drop for ResultsFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
