//! cudampi's own C API (`include/cudampi.h`): version, whether CUDA is in use, statistics.

use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering::Relaxed;

use crate::base::stats;
use crate::staging::pool;
use crate::{cuda, requests};

/// Counters since start-up (see `CUDAMPI_STATS`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct CudampiStats {
    /// Calls whose buffers were all host memory (counted only when `CUDAMPI_STATS=1`).
    pub host_calls: u64,
    /// Calls that staged at least one device buffer.
    pub device_calls: u64,
    /// Bytes copied from device to host staging buffers.
    pub bytes_to_host: u64,
    /// Bytes copied from host staging buffers to device.
    pub bytes_to_device: u64,
    /// Pinned bytes the staging pool holds now.
    pub pool_bytes_held: u64,
    /// Most pinned bytes the staging pool has held.
    pub pool_high_water: u64,
    /// Staging buffers that had to be pageable memory.
    pub pageable_fallbacks: u64,
    /// Errors cudampi raised itself.
    pub errors: u64,
    /// Staging buffers (pinned or pageable) leased to operations in flight now.
    pub staging_leased: u64,
    /// Requests with staged device buffers that cudampi tracks now: posted and not yet
    /// completed, persistent requests not yet freed, and freed requests still in flight.
    pub requests_tracked: u64,
    /// Fortran calls cudampi served itself (a device buffer, a tracked request, or request
    /// indices to return); the others went to the library's Fortran routine.
    pub fortran_calls: u64,
    /// Bytes of device messages sent and received GPU to GPU over CUDA IPC.
    pub ipc_bytes_sent: u64,
    pub ipc_bytes_received: u64,
    /// Bytes of device messages sent and received in chunks.
    pub chunked_bytes_sent: u64,
    pub chunked_bytes_received: u64,
    /// Of `bytes_to_device`, the bytes of small copies written by the GPU's stream memory
    /// writes, or set by a memset (a lone byte or 16-bit value), instead of a copy.
    pub bytes_stream_written: u64,
    /// Runs of datatype blocks copied between device memory and staging buffers by cudampi's
    /// pack kernel, in one launch per copy, instead of one copy each.
    pub kernel_runs: u64,
    /// Device collectives NCCL ran (on unless `CUDAMPI_NCCL=0`, where every rank of the
    /// communicator passed device memory and NCCL carries the operation and datatype), and the
    /// bytes of the largest buffer this rank passed to each, summed.
    pub nccl_calls: u64,
    pub nccl_bytes: u64,
    /// Messages of cudampi's own protocol (chunks, IPC releases) that `MPI_Finalize` found
    /// unreceived once every rank got there and every release owed to this rank was taken;
    /// received and dropped there, so that the MPI's unexpected queue holds nothing of
    /// cudampi's when the job ends. Read after `MPI_Finalize`.
    pub own_messages_unreceived: u64,
}

/// The version string, e.g. "cudampi 0.1.0".
#[no_mangle]
pub extern "C" fn cudampi_version() -> *const c_char {
    crate::base::VERSION.as_ptr()
}

/// 1 when the process has loaded a working CUDA driver and device buffers are staged, else 0.
#[no_mangle]
pub extern "C" fn cudampi_cuda_active() -> c_int {
    c_int::from(cuda::driver::get().is_some())
}

/// Fills the first `size` bytes of `*out` with the current counters (`cudampi.h` makes
/// `cudampi_get_stats(out)` pass `sizeof *out`), so a program built against an older, shorter
/// `struct cudampi_stats` gets the fields it knows and nothing past them. Returns the bytes
/// filled, at most `sizeof(struct cudampi_stats)` of this library; -1 when `out` is null.
///
/// # Safety
/// `out` must be null or point to `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn cudampi_get_stats_sized(out: *mut CudampiStats, size: usize) -> c_int {
    if out.is_null() {
        return -1;
    }
    let s = current();
    let n = size.min(std::mem::size_of::<CudampiStats>());
    // SAFETY: checked non-null; the caller provides `size` bytes, and `n` bytes of `s` exist.
    unsafe { std::ptr::copy_nonoverlapping((&s as *const CudampiStats).cast::<u8>(), out.cast::<u8>(), n) };
    n as c_int
}

/// Fills the whole `*out` of this library's `struct cudampi_stats`; returns 0, or -1 when `out`
/// is null. Programs compiled with `cudampi.h` call `cudampi_get_stats_sized` instead (the
/// header's macro of this name); this symbol stays for programs that look it up by name.
///
/// # Safety
/// `out` must be null or point to writable memory for one `struct cudampi_stats` as this
/// library defines it.
#[no_mangle]
pub unsafe extern "C" fn cudampi_get_stats(out: *mut CudampiStats) -> c_int {
    if out.is_null() {
        return -1;
    }
    // SAFETY: checked non-null; the caller provides room for one struct.
    unsafe { out.write(current()) };
    0
}

fn current() -> CudampiStats {
    let (held, high) = pool::usage();
    CudampiStats {
        host_calls: stats::HOST_CALLS.load(Relaxed),
        device_calls: stats::DEVICE_CALLS.load(Relaxed),
        bytes_to_host: stats::BYTES_TO_HOST.load(Relaxed),
        bytes_to_device: stats::BYTES_TO_DEVICE.load(Relaxed),
        pool_bytes_held: held as u64,
        pool_high_water: high as u64,
        pageable_fallbacks: stats::PAGEABLE_FALLBACKS.load(Relaxed),
        errors: stats::ERRORS.load(Relaxed),
        staging_leased: pool::leased() as u64,
        requests_tracked: requests::tracked() as u64,
        fortran_calls: stats::FORTRAN_CALLS.load(Relaxed),
        ipc_bytes_sent: stats::IPC_BYTES_SENT.load(Relaxed),
        ipc_bytes_received: stats::IPC_BYTES_RECEIVED.load(Relaxed),
        chunked_bytes_sent: stats::CHUNKED_BYTES_SENT.load(Relaxed),
        chunked_bytes_received: stats::CHUNKED_BYTES_RECEIVED.load(Relaxed),
        bytes_stream_written: stats::BYTES_STREAM_WRITTEN.load(Relaxed),
        kernel_runs: stats::KERNEL_RUNS.load(Relaxed),
        nccl_calls: stats::NCCL_CALLS.load(Relaxed),
        nccl_bytes: stats::NCCL_BYTES.load(Relaxed),
        own_messages_unreceived: stats::OWN_UNRECEIVED.load(Relaxed),
    }
}
