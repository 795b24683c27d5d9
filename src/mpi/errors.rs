//! Errors the shim itself detects: one `cudampi:` line, then the MPI error code through the
//! communicator's error handler, as the real library would raise it.

use std::ffi::{c_int, c_void};

use crate::base::{log, stats};
use crate::cuda::{CudaError, Device};
use crate::mpi::abi::{self, Handle};
use crate::mpi::real;

/// Invokes the error handler of `comm` (`MPI_COMM_SELF` for calls without a communicator, as
/// MPI-4 specifies; the window's or the file's for a handle made by [`on_window`] or
/// [`on_file`]) and returns `code` for the entry point to return.
pub fn raise(comm: Option<Handle>, code: c_int) -> c_int {
    stats::add(&stats::ERRORS, 1);
    let comm = comm.unwrap_or(abi::get().comm_self);
    if comm & FILE != 0 {
        return raise_file(comm & !FILE, code);
    }
    if let Some(p) = real::pmpi() {
        // SAFETY: a window or communicator handle from the caller (or MPI_COMM_SELF) and a
        // valid code.
        unsafe {
            match comm & WINDOW {
                0 => (p.comm_call_errhandler)(comm, code),
                _ => (p.win_call_errhandler)(comm & !WINDOW, code),
            }
        };
    }
    code
}

/// Marks a window handle among communicator handles. No handle of any family has the top bit
/// set (user-space pointers, 32-bit `int`s, the standard ABI's small constants).
const WINDOW: Handle = 1 << (Handle::BITS - 1);
/// Marks a file handle likewise.
const FILE: Handle = 1 << (Handle::BITS - 2);

/// Where the errors of a file call go that are found after it returned (a nonblocking read's
/// copy to the device at its completion): the file's error handler, as for the call itself.
pub fn on_file(fh: Handle) -> Option<Handle> {
    Some(fh | FILE)
}

/// Where the errors of a call on window `win` go: the staging functions take the object to
/// raise on as a communicator, and this hands them the window's error handler instead (MPI
/// raises an RMA call's errors on its window).
pub fn on_window(win: Handle) -> Option<Handle> {
    Some(win | WINDOW)
}

/// Invokes the error handler of the file `fh`, as the library raises its own errors of a file
/// call (`MPI_ERRORS_RETURN` unless the program chose another), and returns `code`.
pub fn raise_file(fh: Handle, code: c_int) -> c_int {
    static CALL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // A library built without MPI-IO lacks the function (and every call on a file).
    let f = *CALL.get_or_init(|| real::lookup("PMPI_File_call_errhandler\0"));
    if f != 0 {
        // SAFETY: the library's `int MPI_File_call_errhandler(MPI_File, int)`.
        let f: unsafe extern "C" fn(Handle, c_int) -> c_int = unsafe { std::mem::transmute(f) };
        // SAFETY: the caller's file handle and a valid code.
        unsafe { f(fh, code) };
    }
    code
}

pub fn no_mem(name: &str, comm: Option<Handle>, bytes: usize) -> c_int {
    log::error(format_args!("{name}: cannot allocate {bytes} bytes of host memory to stage a device buffer"));
    raise(comm, abi::get().err_no_mem)
}

/// A buffer that is neither device memory nor host memory the process can read (freed device
/// memory, most likely), which MPI would crash on.
pub fn unreadable(name: &str, comm: Option<Handle>, buf: *const c_void) -> c_int {
    log::error(format_args!("{name}: buffer {buf:p} is neither device memory nor readable host memory (freed device memory?)"));
    raise(comm, abi::get().err_buffer)
}

pub fn cuda(name: &str, comm: Option<Handle>, e: CudaError, buf: *const c_void, bytes: usize, dev: &Device) -> c_int {
    log::error(format_args!(
        "{name}: {} failed with {} on device buffer {buf:p} ({bytes} bytes, GPU {})",
        e.call,
        e.name(),
        dev.ordinal
    ));
    let abi = abi::get();
    // An invalid address or range is the caller's buffer argument; anything else is the GPU's.
    const CUDA_ERROR_INVALID_VALUE: u32 = 1;
    raise(comm, if e.code == CUDA_ERROR_INVALID_VALUE { abi.err_buffer } else { abi.err_other })
}

/// Waiting for copies already queued to the device failed (`cuda::Deferred`): the GPU's
/// error, not one buffer's.
pub fn cuda_wait(name: &str, comm: Option<Handle>, e: CudaError) -> c_int {
    log::error(format_args!("{name}: {} failed with {} while copying received data to the device", e.call, e.name()));
    raise(comm, abi::get().err_other)
}

/// The error class of a code the library returned.
pub fn class(rc: c_int) -> c_int {
    let mut class = rc;
    if rc != 0 {
        if let Some(p) = real::pmpi() {
            // SAFETY: valid out-pointer.
            unsafe { (p.error_class)(rc, &mut class) };
        }
    }
    class
}

/// A staged receive ended in `MPI_ERR_TRUNCATE`. What a library leaves in a receive buffer
/// then is undefined (some write the prefix, some nothing and report a meaningless count), so
/// the device buffer is left as it was rather than given bytes that may never have arrived.
pub fn truncated(name: &str, buf: *const c_void) {
    log::warn(format_args!("{name}: message truncated (MPI_ERR_TRUNCATE); device buffer {buf:p} left unchanged"));
}
