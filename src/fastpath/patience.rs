//! How long a send waits on its peers before it takes another way: `CUDAMPI_PIPELINE_WAIT` at
//! first; after a wait that went unrewarded a quarter of it, down to 1/64 of the full time; the
//! full time again once a wait is rewarded. A peer busy elsewhere then costs a sender one long
//! wait, not one per message.
//!
//! This module uses only `base`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::base::config;

/// Microseconds the next wait lasts (0: not yet set, the full time).
pub struct Patience(AtomicU64);

impl Patience {
    pub const fn new() -> Patience {
        Patience(AtomicU64::new(0))
    }

    /// What the next wait may last.
    pub fn now(&self) -> Duration {
        Duration::from_micros(self.micros())
    }

    fn micros(&self) -> u64 {
        match self.0.load(Relaxed) {
            0 => config::get().pipeline_wait_us,
            p => p,
        }
    }

    /// A wait ended as hoped: the next waits last the full time.
    pub fn rewarded(&self) {
        self.0.store(config::get().pipeline_wait_us, Relaxed);
    }

    /// A wait of `spent` (what [`now`](Patience::now) gave it) ran out: the next is shorter.
    pub fn unrewarded(&self, spent: Duration) {
        let full = config::get().pipeline_wait_us;
        self.0.store(((spent.as_micros() as u64) / 4).max(full / 64).max(1), Relaxed);
    }
}
