//! Starting hvd: the transport chosen and connected from the job's environment (or
//! given), then the runtime over it.

use std::sync::Arc;

use hvd_core::{Collective, Compression, Result};
use hvd_runtime::{Config, Hvd};

use crate::{Backend, World, logging, transport};

/// Starts hvd with the configuration and job found in the environment (set by hvdrun,
/// mpirun, Slurm or a torchrun-style launcher; with none, a job of one rank).
pub fn init() -> Result<Hvd> {
    Builder::new().build()
}

/// Explicit options for starting hvd; anything not set comes from the environment.
#[derive(Default)]
pub struct Builder {
    config: Option<Config>,
    collective: Option<Arc<dyn Collective>>,
    world: Option<World>,
    /// Transports for device memory, asked in this order.
    device_collectives: Vec<Arc<dyn Collective>>,
    backend: Option<Backend>,
    compression: Option<Compression>,
    process_sets: Vec<Vec<usize>>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("config", &self.config)
            .field("backend", &self.backend)
            .field("compression", &self.compression)
            .field("process_sets", &self.process_sets)
            .finish_non_exhaustive()
    }
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Uses this configuration instead of reading `HVD_*` variables.
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Runs over this already connected collective (a custom transport, or the
    /// in-process reference in tests) instead of connecting one.
    pub fn collective(mut self, collective: impl Collective + 'static) -> Self {
        self.collective = Some(Arc::new(collective));
        self
    }

    /// Connects as this rank of this job instead of the one the launcher's environment
    /// describes (an elastic round's place, or a world built by hand).
    pub fn world(mut self, world: World) -> Self {
        self.world = Some(world);
        self
    }

    /// Adds a transport for device memory (a GPU transport): collectives of tensors on a
    /// device it [`supports`](Collective::supports) run over it, host tensors over the
    /// job's transport. It must span the same ranks in the same order.
    pub fn device_collective(mut self, collective: impl Collective + 'static) -> Self {
        self.device_collectives.push(Arc::new(collective));
        self
    }

    /// Connects through this transport instead of the default.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Sends f32 and f64 tensors of allreduces as 16-bit floats (Horovod's
    /// `Compression.fp16`), whatever the configuration says (`HVD_COMPRESSION`); a call
    /// can still choose with
    /// [`allreduce_compressed_async`](hvd_runtime::ProcessSet::allreduce_compressed_async).
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = Some(compression);
        self
    }

    /// Process sets to create at start (ids 1, 2, ... in this order).
    pub fn process_sets(mut self, sets: Vec<Vec<usize>>) -> Self {
        self.process_sets = sets;
        self
    }

    /// Connects (unless a collective was given), starts the background thread, and
    /// creates the static process sets.
    pub fn build(self) -> Result<Hvd> {
        logging::install()?;
        let mut config = match self.config {
            Some(config) => config,
            None => Config::from_env()?,
        };
        if let Some(compression) = self.compression {
            config.compression = compression;
        }
        let mut devices = self.device_collectives;
        let transport: Arc<dyn Collective> = match self.collective {
            Some(collective) => collective,
            None => {
                let backend = match (self.backend, &self.world) {
                    (Some(b), _) => b,
                    (None, Some(world)) => Backend::for_world(world)?,
                    (None, None) => Backend::from_env()?,
                };
                let (host, device) = match self.world {
                    Some(world) => {
                        let host = transport::connect(backend.host(&world)?, &world)?;
                        let device = transport::connect_device(backend, &world, host.topology())?;
                        (host, device)
                    }
                    None => transport::connect_start(backend, &transport::world(backend)?)?,
                };
                devices.extend(device.map(Arc::from));
                Arc::from(host)
            }
        };
        let router = transport::router(transport, devices);
        hvd_runtime::start(router, config, self.process_sets)
    }
}
