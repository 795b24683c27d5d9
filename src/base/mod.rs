//! What every layer uses: the `CUDAMPI_*` settings read from the environment (`config`), the
//! `cudampi:` error and debug lines (`log`), and the counters behind `CUDAMPI_STATS`
//! (`stats`). Every other layer may use it; it uses no other layer.

pub mod config;
pub mod log;
pub mod stats;
