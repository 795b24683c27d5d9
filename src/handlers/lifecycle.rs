//! `MPI_Init*`, `MPI_Finalize`, `MPI_Type_free` (the end of a datatype whose blocks cudampi
//! keeps) and the CUDA-support queries: `MPIX_Query_cuda_support`, MPICH's
//! `MPIX_GPU_query_support`, and MPI 4.1's `mpi_memory_alloc_kinds` info, which lists the CUDA
//! memory kinds beside the library's own on `MPI_INFO_ENV` and on the info of communicators,
//! windows and files. `MPI_INFO_ENV` itself is read-only, so the calls that read an info object
//! read a copy of it made at `MPI_Init` that lists them.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::Ordering::Relaxed;

use crate::base::{config, log, stats};
use crate::mpi::abi::{self, Handle};
use crate::mpi::real;
use crate::staging::pool;
use crate::{cuda, fastpath, requests};

/// `MPI_Init`; with `CUDAMPI_THREAD_MULTIPLE=1` the library's `MPI_Init_thread` asking for
/// `MPI_THREAD_MULTIPLE`.
pub fn init(name: &'static str, argc: *mut c_int, argv: *mut c_void, call: impl FnOnce() -> c_int) -> c_int {
    let rc = match real::get().MPI_Init_thread.filter(|_| config::get().thread_multiple) {
        Some(f) => {
            let mut provided: c_int = 0;
            // SAFETY: the caller's arguments and a valid out-pointer.
            unsafe { f(argc, argv, abi::get().thread_multiple, &mut provided) }
        }
        None => call(),
    };
    initialized(name, rc)
}

/// `MPI_Init_thread`; with `CUDAMPI_THREAD_MULTIPLE=1` asking for `MPI_THREAD_MULTIPLE`, and
/// the library's answer in `provided`.
pub fn init_thread(name: &'static str, required: c_int, call: impl FnOnce(c_int) -> c_int) -> c_int {
    let required = if config::get().thread_multiple { abi::get().thread_multiple } else { required };
    initialized(name, call(required))
}

fn initialized(_name: &'static str, rc: c_int) -> c_int {
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
    env_copy();
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
    // The enqueue calls' progress thread makes MPI calls: it stops first.
    crate::streams::finalize();
    // Requests the program freed while in flight must still deliver their data.
    requests::finish_orphans();
    crate::compat::finalize();
    progress_until_all_finalize();
    crate::mpi::datatype::quiet::release();
    crate::mpi::typemap::clear();
    crate::engine::finalize();
    fastpath::finalize();
    requests::watch::clear();
    free_env_copy();
    let rc = call();
    // After the library is done with any staging buffer it may have registered.
    requests::clear();
    crate::handlers::windows::clear();
    crate::handlers::mapped::clear();
    crate::handlers::served::clear();
    crate::handlers::io::finalize();
    pool::release_all();
    cuda::signal::release();
    cuda::pack::release();
    cuda::reduce::release();
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
         {} bytes sent and {} received in chunks, {} datatype runs copied by the pack kernel, \
         {} collectives run by NCCL ({} bytes)",
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
        stats::KERNEL_RUNS.load(Relaxed),
        stats::NCCL_CALLS.load(Relaxed),
        stats::NCCL_BYTES.load(Relaxed),
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


/// The memory kinds of MPI 4.1's side document for CUDA: every one is accepted wherever MPI
/// takes a buffer.
const CUDA_KINDS: [&str; 3] = ["cuda:device", "cuda:host", "cuda:managed"];

/// Adds the CUDA kinds to the `mpi_memory_alloc_kinds` value of `info`, after the kinds the
/// library lists (none where it knows no such key). Nothing is changed where the library
/// refuses: the program's call succeeds as it would without cudampi.
fn add_alloc_kinds(info: Handle) {
    let Some(p) = real::pmpi() else { return };
    let key = c"mpi_memory_alloc_kinds";
    let (mut len, mut flag) = (0, 0);
    // SAFETY: an info handle the library gave; a NUL-terminated key; valid out-pointers.
    if unsafe { (p.info_get_valuelen)(info, key.as_ptr(), &mut len, &mut flag) } != 0 {
        return;
    }
    let mut kinds: Vec<String> = Vec::new();
    if flag != 0 && len > 0 {
        let mut value = vec![0u8; len as usize + 1];
        // SAFETY: value holds len + 1 bytes, as MPI_Info_get requires for a value of len.
        if unsafe { (p.info_get)(info, key.as_ptr(), len, value.as_mut_ptr().cast::<c_char>(), &mut flag) } != 0 || flag == 0 {
            return;
        }
        let value = std::ffi::CStr::from_bytes_until_nul(&value).map(|v| v.to_string_lossy().into_owned()).unwrap_or_default();
        kinds.extend(value.split(',').map(str::trim).filter(|k| !k.is_empty()).map(String::from));
    }
    let before = kinds.len();
    for k in CUDA_KINDS {
        if !kinds.iter().any(|have| have == k) {
            kinds.push(k.to_string());
        }
    }
    if kinds.len() == before {
        return;
    }
    let Ok(value) = std::ffi::CString::new(kinds.join(",")) else { return };
    // SAFETY: NUL-terminated key and value.
    unsafe { (p.info_set)(info, key.as_ptr(), value.as_ptr()) };
}

/// `MPI_Comm_get_info`, `MPI_Win_get_info`, `MPI_File_get_info`: the new info object the
/// program receives lists the CUDA memory kinds too.
pub fn get_info(_name: &'static str, info_used: *mut c_void, call: impl FnOnce() -> c_int) -> c_int {
    let rc = call();
    if rc == 0 && !info_used.is_null() {
        // SAFETY: the library has just written the new info handle there.
        add_alloc_kinds(unsafe { abi::get().handle_at(info_used) });
    }
    rc
}

/// The copy of `MPI_INFO_ENV` that lists the CUDA kinds, made at `MPI_Init`.
static ENV_COPY: std::sync::Mutex<Option<Handle>> = std::sync::Mutex::new(None);

fn env_copy_slot() -> std::sync::MutexGuard<'static, Option<Handle>> {
    ENV_COPY.lock().unwrap_or_else(|e| e.into_inner())
}

fn env_copy() {
    let Some(p) = real::pmpi() else { return };
    let mut copy: Handle = 0;
    // SAFETY: MPI is initialised; valid out-pointer.
    if unsafe { (p.info_dup)(abi::get().info_env, &mut copy) } != 0 {
        return;
    }
    add_alloc_kinds(copy);
    let old = env_copy_slot().replace(copy);
    if let Some(mut old) = old {
        // SAFETY: a copy made here before (a second MPI_Init_thread the library refused).
        unsafe { (p.info_free)(&mut old) };
    }
}

fn free_env_copy() {
    let (Some(mut copy), Some(p)) = (env_copy_slot().take(), real::pmpi()) else { return };
    // SAFETY: the copy made at MPI_Init, no longer handed out.
    unsafe { (p.info_free)(&mut copy) };
}

/// `MPI_Info_get` and the other calls that read an info object: `MPI_INFO_ENV` is read
/// through its copy.
pub fn info_env(_name: &'static str, info: Handle, call: impl FnOnce(Handle) -> c_int) -> c_int {
    let abi = abi::get();
    let copy = if abi.same(info, abi.info_env) { *env_copy_slot() } else { None };
    call(copy.unwrap_or(info))
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
