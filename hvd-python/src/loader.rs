//! `hvd._hvd.Loader`: hvd's input pipeline (`hvd::data`) for Python. Each batch comes as
//! two DLPack capsules (the images, `f32` NCHW, and the labels, `i64`) of the loader's
//! own reused buffers, so `torch.from_dlpack` makes tensors of them without a copy; the
//! buffer goes back to the loader when both tensors are gone.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hvd::DType;
use hvd::core::units::MAX_DURATION;
use hvd::data::source::{Encoding, Sample};
use hvd::data::{
    Augment, Batch, DecodePriority, ElasticSampler, Epoch, ImageFolder, InMemory, Loader,
    LoaderOptions, MAX_SIDE, Source, StepTimes, Synthetic, TarShards, TuneLimits, host_cores,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{dlpack, errors, running};

fn to_py(e: hvd::data::Error) -> PyErr {
    match e {
        hvd::data::Error::Config { .. } => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

/// A batch for Python: the images' and the labels' capsules, and the sample numbers.
type PyBatch = (Py<PyAny>, Py<PyAny>, Vec<usize>);

/// Images Python holds (`source="arrays"`): their bytes, `(samples, height, width,
/// channels)`, whether the values are `f32` (else bytes), and one label each.
type Arrays<'a> = (&'a [u8], (usize, u32, u32, u32), bool, Vec<i64>);

/// One rank's loader: its source, its sampler (every rank's alike) and the epoch it is
/// in. Ranks take `batch_size` samples each per step, every sample once per epoch.
#[pyclass(name = "Loader", module = "hvd._hvd")]
#[derive(Debug)]
pub struct PyLoader {
    loader: Loader,
    sampler: ElasticSampler,
    rank: usize,
    size: usize,
    epoch: Option<Epoch>,
    /// Batches handed over in the current epoch: the step before the next is done.
    handed: usize,
}

#[pymethods]
impl PyLoader {
    /// `source`: `"folder"` (`paths[0]`, a folder of class folders), `"shards"` (`paths`,
    /// WebDataset tar shards), `"synthetic"` (`synthetic` = (samples, width, height,
    /// classes)) or `"arrays"` (`arrays`, images the model's size, taken as they are and
    /// normalised with `mean` and `std`, one value a channel).
    #[new]
    #[pyo3(signature = (
        source, paths, synthetic, *, arrays=None, mean=None, std=None, image_size, batch_size,
        rank, size, train, shuffle_seed, seed, threads, prefetch, skip_bad, timeout,
        priority="10"
    ))]
    #[allow(clippy::too_many_arguments, reason = "Python's keyword arguments")]
    fn new(
        source: &str,
        paths: Vec<PathBuf>,
        synthetic: Option<(usize, u32, u32, usize)>,
        arrays: Option<Arrays<'_>>,
        mean: Option<Vec<f32>>,
        std: Option<Vec<f32>>,
        image_size: u32,
        batch_size: usize,
        rank: usize,
        size: usize,
        train: bool,
        shuffle_seed: Option<u64>,
        seed: u64,
        threads: Option<usize>,
        prefetch: usize,
        skip_bad: bool,
        timeout: f64,
        priority: &str,
    ) -> PyResult<Self> {
        let priority = priority
            .parse::<DecodePriority>()
            .map_err(|e| PyValueError::new_err(format!("DataLoader: priority {e}")))?;
        let mut augment = if train {
            Augment::train(image_size)
        } else {
            Augment::eval(image_size)
        };
        let source: Box<dyn Source> = match (source, paths.as_slice(), synthetic, arrays) {
            ("arrays", _, _, Some((images, shape, float, labels))) => {
                augment = exact(shape, image_size, mean, std)?;
                Box::new(in_memory(images, shape, float, &labels)?)
            }
            ("folder", [root], _, _) => Box::new(ImageFolder::open(root).map_err(to_py)?),
            ("shards", [_, ..], _, _) => Box::new(TarShards::open(&paths).map_err(to_py)?),
            ("synthetic", _, Some((n, w, h, classes)), _) => {
                if w.max(h) as usize > MAX_SIDE {
                    return Err(PyValueError::new_err(format!(
                        "synthetic images of {w} x {h}: at most {MAX_SIDE} a side"
                    )));
                }
                Box::new(Synthetic::new(n, w, h, classes))
            }
            _ => {
                return Err(PyValueError::new_err(format!(
                    "source {source:?} with {} paths: give a folder (one path), shards (one \
                     path or more), synthetic (samples, width, height, classes) or arrays",
                    paths.len()
                )));
            }
        };
        if batch_size == 0 || size == 0 || rank >= size {
            return Err(PyValueError::new_err(format!(
                "batch_size {batch_size}, rank {rank} of {size}: a batch needs a sample, and \
                 the rank must be below the size"
            )));
        }
        let timeout = Duration::try_from_secs_f64(timeout)
            .ok()
            .filter(|t| !t.is_zero() && *t <= MAX_DURATION)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "timeout {timeout}: a number of seconds above 0, at most ten years"
                ))
            })?;
        // By default, this host's cores split evenly between its ranks.
        let threads = match threads {
            Some(threads) => threads,
            None => TuneLimits::host(running::current()?.local_size()).cores_per_rank(),
        };
        let options = LoaderOptions {
            threads,
            prefetch,
            seed,
            skip_bad,
            timeout,
            priority,
        };
        let len = source.len();
        let global_batch = batch_size.checked_mul(size).ok_or_else(|| {
            PyValueError::new_err(format!(
                "batch_size {batch_size} on {size} ranks: the global batch is past any dataset"
            ))
        })?;
        let loader = Loader::new(source, augment, options).map_err(to_py)?;
        Ok(PyLoader {
            loader,
            sampler: ElasticSampler::new(len, global_batch).seed(shuffle_seed),
            rank,
            size,
            epoch: None,
            handed: 0,
        })
    }

    /// Starts epoch `epoch` from its first step (its own shuffle).
    fn set_epoch(&mut self, epoch: u64) {
        self.epoch = None;
        self.sampler.set_epoch(epoch);
    }

    /// Steps in a whole epoch (the same on every rank).
    fn steps(&self) -> usize {
        self.sampler.len().div_ceil(self.sampler.global_batch())
    }

    /// The loader's place, `(epoch, samples consumed)`, counting the batch last handed
    /// over as done: what an elastic job commits after a step.
    fn state(&self) -> (u64, u64) {
        let mut sampler = self.sampler.clone();
        if self.epoch.is_some() && self.handed > 0 {
            sampler.advance();
        }
        let [epoch, consumed] = sampler.to_words();
        (epoch, consumed)
    }

    /// Goes to a place `state` gave (after a rollback to the last commit); the next
    /// batch is the step after it.
    fn load_state(&mut self, epoch: u64, consumed: u64) {
        self.epoch = None;
        self.handed = 0;
        self.sampler.set_words([epoch, consumed]);
    }

    /// This rank's place in a job of a new size (after hosts were lost or added):
    /// every step from the current place on is cut between `size` ranks. The global
    /// batch stays; each rank's share of it changes.
    fn resize(&mut self, rank: usize, size: usize) -> PyResult<()> {
        if rank >= size {
            return Err(PyValueError::new_err(format!(
                "rank {rank} of {size}: the rank must be below the size"
            )));
        }
        let (epoch, consumed) = self.state();
        self.load_state(epoch, consumed);
        (self.rank, self.size) = (rank, size);
        Ok(())
    }

    /// Chooses the next epochs' threads and prefetch from the decode rate measured since
    /// the last call and `steps` (`data, comm, wall` seconds, three numbers a step),
    /// within this rank's part of the host's cores, split between its ranks by what each
    /// needs (collective: every rank calls it at the same point, the start of an
    /// iteration over the loader): a dict (`threads`,
    /// `share`, `prefetch`, `threads_needed`, `capacity`, `demand` in images a second,
    /// `keeps_up`, and the next epochs' decode `priority`, `"idle"` or nice steps such
    /// as `"10"`), or None until an image and a step were measured. Logs a warning when
    /// the host cannot keep up.
    fn autotune<'py>(
        &mut self,
        py: Python<'py>,
        steps: Vec<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let steps: Vec<StepTimes> = steps
            .chunks_exact(3)
            .map(|t| StepTimes {
                data: t[0],
                comm: t[1],
                wall: t[2],
            })
            .collect();
        let hvd = running::current()?;
        let loader = &mut self.loader;
        let tuned = py.detach(|| hvd::data_tune::autotune(&hvd, loader, &steps, host_cores()));
        let Some(tuning) = tuned.map_err(errors::to_py)? else {
            return Ok(None);
        };
        let out = PyDict::new(py);
        out.set_item("threads", tuning.threads)?;
        out.set_item("share", tuning.share)?;
        out.set_item("prefetch", tuning.prefetch)?;
        out.set_item("threads_needed", tuning.threads_needed)?;
        out.set_item("capacity", tuning.capacity)?;
        out.set_item("demand", tuning.demand)?;
        out.set_item("keeps_up", tuning.keeps_up())?;
        out.set_item("priority", self.loader.decode_priority().to_string())?;
        Ok(Some(out))
    }

    /// The samples of the source.
    fn samples(&self) -> usize {
        self.sampler.len()
    }

    /// The next step's batch as (images capsule, labels capsule, sample numbers), or
    /// None at the end of the epoch (the next call starts the same epoch again unless
    /// `set_epoch` moved it on). Waits without the GIL.
    fn next(&mut self, py: Python<'_>) -> PyResult<Option<PyBatch>> {
        if self.epoch.is_none() {
            if self.sampler.epoch_done() {
                self.sampler.set_epoch(self.sampler.epoch());
            }
            self.epoch = Some(
                self.loader
                    .epoch(&self.sampler, self.rank, self.size)
                    .map_err(to_py)?,
            );
            self.handed = 0;
        } else if self.handed > 0 {
            // Asking for the next batch says the previous step is done.
            self.sampler.advance();
        }
        let epoch = self.epoch.as_mut().expect("started above");
        let Some(batch) = py.detach(|| epoch.next_batch()).map_err(to_py)? else {
            self.epoch = None;
            return Ok(None);
        };
        self.handed += 1;
        export(py, batch).map(Some)
    }
}

/// The transform of images already the model's size: square, `image_size` a side,
/// normalised per channel (one `mean` and `std` for all channels, or one each).
fn exact(
    (_, height, width, channels): (usize, u32, u32, u32),
    image_size: u32,
    mean: Option<Vec<f32>>,
    std: Option<Vec<f32>>,
) -> PyResult<Augment> {
    if !matches!(channels, 1 | 3) {
        return Err(PyValueError::new_err(format!(
            "arrays of {channels} channels: 1 (grey) or 3 (RGB)"
        )));
    }
    if height != width || height != image_size {
        return Err(PyValueError::new_err(format!(
            "arrays of {height} x {width} images with image_size {image_size}: the loader \
             takes them as they are, so they must be square and image_size their side"
        )));
    }
    let mut augment = Augment::exact(image_size, channels);
    for (given, into, name) in [
        (mean, &mut augment.mean, "mean"),
        (std, &mut augment.std, "std"),
    ] {
        let Some(given) = given else { continue };
        match given.as_slice() {
            [one] => *into = [*one; 3],
            values if values.len() == channels as usize => {
                into[..values.len()].copy_from_slice(values)
            }
            values => {
                return Err(PyValueError::new_err(format!(
                    "{name} {values:?}: one value, or one a channel ({channels})"
                )));
            }
        }
    }
    if augment.std.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(PyValueError::new_err(format!(
            "std {:?}: deviations must be above 0",
            &augment.std[..channels as usize]
        )));
    }
    Ok(augment)
}

/// Python's images as the loader's in-memory source, one sample an image.
fn in_memory(
    images: &[u8],
    (samples, height, width, channels): (usize, u32, u32, u32),
    float: bool,
    labels: &[i64],
) -> PyResult<InMemory> {
    let encoding = match (float, channels) {
        (true, _) => Encoding::F32 {
            width,
            height,
            channels,
        },
        (false, 1) => Encoding::Grey { width, height },
        // `exact` took only 1 or 3 channels.
        (false, _) => Encoding::Rgb { width, height },
    };
    let value: usize = if float { 4 } else { 1 };
    let image = (height as usize)
        .checked_mul(width as usize)
        .and_then(|n| n.checked_mul(channels as usize * value))
        .filter(|&n| n > 0);
    let fits = image.and_then(|n| n.checked_mul(samples)) == Some(images.len());
    let (Some(image), true, true) = (image, fits, labels.len() == samples) else {
        return Err(PyValueError::new_err(format!(
            "{} bytes of images and {} labels are not {samples} images of {height} x {width} \
             x {channels} {} with one label each",
            images.len(),
            labels.len(),
            if float { "float32" } else { "uint8" }
        )));
    };
    let mut source = InMemory::default();
    for (pixels, &label) in images.chunks_exact(image).zip(labels) {
        source.push(pixels.to_vec(), Sample { label, encoding });
    }
    Ok(source)
}

/// The batch's images and labels as capsules that share it.
fn export(py: Python<'_>, mut batch: Batch) -> PyResult<PyBatch> {
    let shape = batch.shape();
    let indices = batch.indices().to_vec();
    let images = batch.images_mut().as_mut_ptr();
    let labels = batch.labels().as_ptr().cast_mut();
    let len = batch.len();
    // The batch is not read or written from Rust again: its memory is the tensors'.
    let shared = Arc::new(batch);
    let images = dlpack::export_lent(
        py,
        DType::F32,
        &shape,
        images.cast(),
        Box::new(Arc::clone(&shared)),
    )?;
    let labels = dlpack::export_lent(py, DType::I64, &[len], labels.cast(), Box::new(shared))?;
    Ok((images, labels, indices))
}
