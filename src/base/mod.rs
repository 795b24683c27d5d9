//! What every layer uses: the `CUDAMPI_*` settings read from the environment (`config`), the
//! `cudampi:` error and debug lines (`log`), the counters behind `CUDAMPI_STATS` (`stats`),
//! shared-memory segments of a node (`shm`), and where cudampi's own threads run (`threads`).
//! Every other layer may use it; it uses no other layer.

use std::ffi::CStr;

pub mod config;
pub mod log;
pub mod shm;
pub mod stats;
pub mod threads;

/// The name and version `cudampi_version()` returns and the debug line of `MPI_Init` prints.
pub const VERSION: &CStr = c"cudampi 0.1.0";
