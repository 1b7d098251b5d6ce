//! Diagnosing a host: what each transport is built on and what the machine offers it,
//! for `hvdrun --check` and for errors. The providers say; this file asks them.

use hvd_core::Result;

use super::Backend;

impl Backend {
    /// What the transport is built on, with the library's version where it has one;
    /// an error when its library cannot be found at run time.
    pub fn library(self) -> Result<String> {
        self.compiled_provider()?.library()
    }

    /// What this host offers the transport, in lines (`hvdrun --check` prints them);
    /// `None` when it has nothing to say beyond its library, or this build lacks it.
    pub fn report(self) -> Option<Vec<String>> {
        self.provider()?.report()
    }
}
