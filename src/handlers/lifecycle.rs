//! `MPI_Init*`, `MPI_Finalize`, the CUDA-support queries, and `MPI_Type_free` (the end of a
//! datatype whose blocks cudampi keeps).

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::Relaxed;

use crate::base::{config, log, stats};
use crate::mpi::{abi, real};
use crate::staging::pool;
use crate::{cuda, fastpath, requests};

pub fn init(_name: &'static str, call: impl FnOnce() -> c_int) -> c_int {
    let rc = call();
    if rc != 0 {
        return rc;
    }
    let cfg = config::get();
    stats::ENABLED.store(cfg.stats, Relaxed);
    let abi = abi::get();
    if let Some(p) = real::pmpi() {
        let mut rank = -1;
        // SAFETY: MPI is initialised; valid out-pointer.
        if unsafe { (p.comm_rank)(abi.comm_world, &mut rank) } == 0 {
            log::set_rank(rank);
        }
    }
    requests::watch::init();
    fastpath::init(fastpath::Waiting { any: requests::any, receives: requests::waiting_device_receives, deliver: requests::deliver_early });
    if cfg.debug {
        log::debug(format_args!(
            "{} on {}; CUDA {}",
            crate::base::VERSION.to_str().unwrap_or("?"),
            abi.family.name(),
            if cuda::driver::get().is_some() { "found" } else { "not loaded (yet)" }
        ));
    }
    rc
}

pub fn finalize(_name: &'static str, call: impl FnOnce() -> c_int) -> c_int {
    if stats::ENABLED.load(Relaxed) {
        report();
    }
    // Requests the program freed while in flight must still deliver their data.
    requests::finish_orphans();
    crate::compat::finalize();
    progress_until_all_finalize();
    crate::mpi::datatype::quiet::release();
    crate::mpi::typemap::clear();
    fastpath::finalize();
    requests::watch::clear();
    let rc = call();
    // After the library is done with any staging buffer it may have registered.
    requests::clear();
    pool::release_all();
    cuda::signal::release();
    cuda::copy::release_contexts();
    rc
}

/// MPICH 5.0's `MPI_Finalize` waits in a PMI barrier without progressing shared memory, so a
/// rank that finalizes right after its last receive keeps the acknowledgements it could not
/// queue yet, and a peer still in `MPI_Waitall` on its sends never returns. It takes a sender
/// that posts slower than the receiver receives: host programs without cudampi hang with sends
/// 20 us apart, and a staged device send takes that long to post. `MPI_Finalize` is collective
/// over `MPI_COMM_WORLD`, so a barrier there first changes nothing a correct program may observe
/// and keeps every rank progressing until all have arrived. Open MPI needs none.
fn progress_until_all_finalize() {
    let abi = abi::get();
    if matches!(abi.family, abi::Family::OpenMpi) {
        return;
    }
    if let Some(p) = real::pmpi() {
        // SAFETY: MPI is initialised and every rank of MPI_COMM_WORLD is entering MPI_Finalize.
        unsafe { (p.barrier)(abi.comm_world) };
    }
}

fn report() {
    let (held, high) = pool::usage();
    log::info(format_args!(
        "stats: {} host-buffer calls, {} device-buffer calls, {} bytes device->host, {} bytes host->device ({} of them by stream writes), \
         pinned pool high-water {} bytes (holding {}), {} pageable fallbacks, {} errors, \
         {} Fortran calls served by cudampi, {} bytes sent and {} received over CUDA IPC \
         ({} of them from the program's own buffers, {} such messages taken back and copied, \
         {} sends staged for want of exported memory, {} bytes exported), \
         {} bytes sent and {} received in chunks",
        stats::HOST_CALLS.load(Relaxed),
        stats::DEVICE_CALLS.load(Relaxed),
        stats::BYTES_TO_HOST.load(Relaxed),
        stats::BYTES_TO_DEVICE.load(Relaxed),
        stats::BYTES_STREAM_WRITTEN.load(Relaxed),
        high,
        held,
        stats::PAGEABLE_FALLBACKS.load(Relaxed),
        stats::ERRORS.load(Relaxed),
        stats::FORTRAN_CALLS.load(Relaxed),
        stats::IPC_BYTES_SENT.load(Relaxed),
        stats::IPC_BYTES_RECEIVED.load(Relaxed),
        stats::IPC_BYTES_DIRECT.load(Relaxed),
        stats::IPC_WITHDRAWN.load(Relaxed),
        stats::IPC_FALLBACKS.load(Relaxed),
        fastpath::usage().0,
        stats::CHUNKED_BYTES_SENT.load(Relaxed),
        stats::CHUNKED_BYTES_RECEIVED.load(Relaxed),
    ));
    stats::per_function(|name, n| log::info(format_args!("stats: {name}: {n} device-buffer calls")));
}

/// Applications ask this before handing MPI device pointers; under cudampi the answer is yes.
pub fn query_cuda_support(_name: &'static str, _call: impl FnOnce() -> c_int) -> c_int {
    1
}

/// MPICH's `MPIX_GPU_query_support(gpu_type, &is_supported)`; type 0 is CUDA.
pub fn gpu_query_support(_name: &'static str, gpu_type: c_int, is_supported: *mut c_int, call: impl FnOnce() -> c_int) -> c_int {
    const MPIX_GPU_SUPPORT_CUDA: c_int = 0;
    if is_supported.is_null() {
        return call();
    }
    if gpu_type != MPIX_GPU_SUPPORT_CUDA {
        // Other GPU kinds are the library's to answer; one without the function supports none.
        if crate::mpi::real::get().MPIX_GPU_query_support.is_some() {
            return call();
        }
        // SAFETY: non-null out-pointer from the caller.
        unsafe { *is_supported = 0 };
        return 0;
    }
    // SAFETY: non-null out-pointer from the caller.
    unsafe { *is_supported = 1 };
    0
}

/// `MPI_Type_free`: what cudampi learnt of the datatype goes with it, since the library may hand
/// the same handle out for the next datatype it makes.
pub fn type_free(_name: &'static str, datatype: *mut c_void, call: impl FnOnce() -> c_int) -> c_int {
    if !datatype.is_null() {
        // SAFETY: the caller's MPI_Datatype, which the call reads anyway.
        crate::mpi::typemap::forget(unsafe { abi::get().request_at(datatype, 0) });
    }
    call()
}
