//! Counters for `CUDAMPI_STATS=1` and `cudampi_get_stats`. Relaxed atomics: they are
//! statistics, not synchronisation.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

pub static ENABLED: AtomicBool = AtomicBool::new(false);

pub static HOST_CALLS: AtomicU64 = AtomicU64::new(0);
pub static DEVICE_CALLS: AtomicU64 = AtomicU64::new(0);
pub static BYTES_TO_HOST: AtomicU64 = AtomicU64::new(0);
pub static BYTES_TO_DEVICE: AtomicU64 = AtomicU64::new(0);
pub static PAGEABLE_FALLBACKS: AtomicU64 = AtomicU64::new(0);
pub static ERRORS: AtomicU64 = AtomicU64::new(0);
pub static FORTRAN_CALLS: AtomicU64 = AtomicU64::new(0);
pub static IPC_BYTES_SENT: AtomicU64 = AtomicU64::new(0);
pub static IPC_BYTES_RECEIVED: AtomicU64 = AtomicU64::new(0);
/// Device sends the IPC path would have taken but for a full pool.
pub static IPC_FALLBACKS: AtomicU64 = AtomicU64::new(0);
/// Of `IPC_BYTES_SENT`, the bytes the receiver copied straight from the program's buffer.
pub static IPC_BYTES_DIRECT: AtomicU64 = AtomicU64::new(0);
/// Direct IPC messages the sender took back after waiting for its receiver, and copied once more.
pub static IPC_WITHDRAWN: AtomicU64 = AtomicU64::new(0);
/// Bytes of device messages sent and received in chunks (`CUDAMPI_PIPELINE`).
pub static CHUNKED_BYTES_SENT: AtomicU64 = AtomicU64::new(0);
pub static CHUNKED_BYTES_RECEIVED: AtomicU64 = AtomicU64::new(0);
/// Runs of datatype blocks copied by cudampi's pack kernel (`cuda::pack`).
pub static KERNEL_RUNS: AtomicU64 = AtomicU64::new(0);
/// Device collectives NCCL ran, and the bytes of the largest buffer this rank passed to each.
pub static NCCL_CALLS: AtomicU64 = AtomicU64::new(0);
pub static NCCL_BYTES: AtomicU64 = AtomicU64::new(0);
/// Messages of cudampi's own protocol that `MPI_Finalize` found unreceived and dropped.
pub static OWN_UNRECEIVED: AtomicU64 = AtomicU64::new(0);
/// Of `BYTES_TO_DEVICE`, the bytes written by stream memory writes or set by a memset instead
/// of a copy.
pub static BYTES_STREAM_WRITTEN: AtomicU64 = AtomicU64::new(0);

/// Device-buffer calls per entry point, keyed by the name's address (names are the table's
/// `'static` strings). A full table just stops recording new names.
const SLOTS: usize = 64;
static NAMES: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static NAME_LENS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static COUNTS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// Whether counters are kept (`CUDAMPI_STATS=1`).
#[inline(always)]
pub fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// A host-buffer call went straight through (counted only with `CUDAMPI_STATS=1`, so host-only
/// programs do not share a contended counter).
#[inline(always)]
pub fn host_call() {
    if ENABLED.load(Relaxed) {
        HOST_CALLS.fetch_add(1, Relaxed);
    }
}

pub fn device_call(name: &'static str) {
    DEVICE_CALLS.fetch_add(1, Relaxed);
    let key = name.as_ptr() as usize;
    for i in 0..SLOTS {
        if NAMES[i].load(Relaxed) == key {
            COUNTS[i].fetch_add(1, Relaxed);
            return;
        }
        match NAMES[i].compare_exchange(0, key, Relaxed, Relaxed) {
            Ok(_) => NAME_LENS[i].store(name.len(), Relaxed),
            Err(k) if k == key => {}
            Err(_) => continue,
        }
        COUNTS[i].fetch_add(1, Relaxed);
        return;
    }
}

/// (name, device calls) for every entry point that saw a device buffer.
pub fn per_function(mut f: impl FnMut(&'static str, u64)) {
    for i in 0..SLOTS {
        let key = NAMES[i].load(Relaxed);
        let len = NAME_LENS[i].load(Relaxed);
        if key == 0 || len == 0 {
            continue;
        }
        // SAFETY: key and len were taken from a `&'static str` in device_call.
        let name = unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(key as *const u8, len)) };
        f(name, COUNTS[i].load(Relaxed));
    }
}

pub fn add(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Relaxed);
}
