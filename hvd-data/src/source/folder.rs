//! A folder of images, one sub-folder per class (torchvision's `ImageFolder` layout).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{Sample, Source, image_encoding};
use crate::{Error, Result};

/// `root/<class>/<image>.jpg`: classes are the sub-folders in sorted order (label 0 is the
/// first), and samples are numbered class by class, files sorted by name, so every rank
/// numbers them alike whatever order the file system lists them in.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    files: Vec<(PathBuf, i64)>,
}

impl ImageFolder {
    /// Lists `root`'s images (`.jpg`, `.jpeg`, `.png`; other files are ignored).
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        let mut classes = Vec::new();
        for entry in fs::read_dir(&root).map_err(|e| Error::source(&root, e))? {
            let entry = entry.map_err(|e| Error::source(&root, e))?;
            if entry
                .file_type()
                .map_err(|e| Error::source(entry.path(), e))?
                .is_dir()
            {
                classes.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        classes.sort();
        let mut files = Vec::new();
        for (label, class) in classes.iter().enumerate() {
            let dir = root.join(class);
            let mut names = Vec::new();
            for entry in fs::read_dir(&dir).map_err(|e| Error::source(&dir, e))? {
                let path = entry.map_err(|e| Error::source(&dir, e))?.path();
                let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
                if path.is_file() && image_encoding(extension).is_some() {
                    names.push(PathBuf::from(class).join(path.file_name().unwrap_or_default()));
                }
            }
            names.sort();
            files.extend(names.into_iter().map(|name| (name, label as i64)));
        }
        if files.is_empty() {
            return Err(Error::source(
                &root,
                "no images (.jpg, .jpeg, .png) in any sub-folder: expected root/<class>/<image>.jpg",
            ));
        }
        Ok(ImageFolder {
            root,
            classes,
            files,
        })
    }

    /// The class names, in label order.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    fn path(&self, index: usize) -> PathBuf {
        self.root.join(&self.files[index].0)
    }
}

impl Source for ImageFolder {
    fn len(&self) -> usize {
        self.files.len()
    }

    fn read(&self, index: usize, bytes: &mut Vec<u8>) -> Result<Sample> {
        let (file, label) = self.files.get(index).ok_or_else(|| {
            Error::sample(index, self.root.display().to_string(), "no such sample")
        })?;
        bytes.clear();
        fs::File::open(self.root.join(file))
            .and_then(|mut f| f.read_to_end(bytes))
            .map_err(|e| Error::sample(index, self.name(index), e))?;
        let extension = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        Ok(Sample {
            label: *label,
            encoding: image_encoding(extension).unwrap_or(super::Encoding::Jpeg),
        })
    }

    fn name(&self, index: usize) -> String {
        match self.files.get(index) {
            Some(_) => self.path(index).display().to_string(),
            None => format!("{} (no sample {index})", self.root.display()),
        }
    }
}
