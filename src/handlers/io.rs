//! MPI-IO on device buffers: every `MPI_File` read and write, with explicit offsets, individual
//! and shared file pointers, collective, split collective and nonblocking.
//!
//! A write copies the device bytes to a staging buffer before the real call. A read hands MPI
//! a staging buffer and copies what the file gave to the device when the call returns, when
//! its request completes (the request is tracked in `requests` like a receive's), or at the
//! split collective's `_end`. MPI allows one split collective per file handle at a time, so a
//! `_begin`'s staging buffer waits in a table keyed by the file handle until its `_end`.
//!
//! Errors cudampi finds (a copy that fails, no host memory, a freed buffer) are raised on the
//! file's error handler, where the library raises its own (`MPI_ERRORS_RETURN` unless the
//! program chose another): staging reports them on a communicator whose errors return, and
//! they are raised here once, on the file.
//!
//! It uses `staging`, `requests`, `mpi`, `cuda` and `base`; `entry` calls it through the table.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use crate::base::stats;
use crate::cuda;
use crate::mpi::abi::Handle;
use crate::mpi::datatype::quiet;
use crate::mpi::errors;
use crate::requests::{self, Entry};
use crate::staging::stage::{stage, Back, Direction, OwnStatus, Prepared, Staged};

/// A device buffer of a file call, staged (and filled for a write); `Err` is the code already
/// raised on the file. The communicator the staging layer reports on is the one whose errors
/// return.
fn staged(name: &'static str, fh: Handle, buf: *const c_void, count: i64, datatype: Handle, dir: Direction) -> Result<(Prepared, Handle), c_int> {
    let comm = quiet::comm().map_err(|rc| errors::raise_file(fh, rc))?;
    // No process is the peer of a file access: 0 is never MPI_PROC_NULL.
    let p = stage(name, buf, count, datatype, 0, Some(comm), dir).map_err(|rc| errors::raise_file(fh, rc))?;
    Ok((p, comm))
}

/// Copies what a read left in the staging buffer to the device. `status` is the status the
/// library filled: a named datatype copies the bytes it counts, a derived one its runs of the
/// span (copied in first, so bytes past the end of the file keep their device values).
fn land(name: &'static str, fh: Handle, comm: Handle, s: &Staged, status: *mut c_void) -> Result<(), c_int> {
    let status = if s.back == Back::Read { status } else { std::ptr::null_mut() };
    s.deliver(name, Some(comm), status).map_err(|rc| errors::raise_file(fh, rc))
}

/// Runs a blocking read into a staged buffer and lands it if the read succeeded (after an
/// error MPI leaves the buffer undefined, and the status need not count anything). The status
/// MPI fills starts as the caller's, so the caller's gets exactly what the library wrote.
fn read_into(name: &'static str, fh: Handle, comm: Handle, s: &Staged, status: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    let mut own = OwnStatus::copy_of(status);
    let rc = call(own.for_mpi());
    let landed = if rc == 0 { land(name, fh, comm, s, own.filled()) } else { Ok(()) };
    own.publish();
    match landed {
        Err(e) => e,
        Ok(()) => rc,
    }
}

/// `MPI_File_write`, `_at`, `_all`, `_at_all`, `_shared`, `_ordered` and their `_c` forms.
pub fn file_write(name: &'static str, fh: Handle, buf: *const c_void, count: i64, datatype: Handle, call: impl FnOnce(*const c_void) -> c_int) -> c_int {
    if cuda::surely_host(buf) {
        stats::host_call();
        return call(buf);
    }
    match staged(name, fh, buf, count, datatype, Direction::Send) {
        Ok((Prepared::Direct(p), _)) if std::ptr::eq(p, buf) => {
            stats::host_call();
            call(buf)
        }
        Ok((p, _)) => call(p.mpi_ptr()),
        Err(rc) => rc,
    }
}

/// `MPI_File_read`, `_at`, `_all`, `_at_all`, `_shared`, `_ordered` and their `_c` forms.
pub fn file_read(
    name: &'static str,
    fh: Handle,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, *mut c_void) -> c_int,
) -> c_int {
    if cuda::surely_host(buf) {
        stats::host_call();
        return call(buf, status);
    }
    match staged(name, fh, buf, count, datatype, Direction::Read) {
        Ok((Prepared::Direct(p), _)) => {
            if p == buf {
                stats::host_call();
            }
            call(p, status)
        }
        Ok((Prepared::Staged(s), comm)) => read_into(name, fh, comm, &s, status, |st| call(s.mpi_ptr(), st)),
        Err(rc) => rc,
    }
}

/// Tracks the request of a nonblocking file call that staged a buffer, which its completion
/// lands (a read) or releases (a write).
fn track(name: &'static str, fh: Handle, request: *mut c_void, p: Prepared, read: bool, rc: c_int) -> c_int {
    let Some(s) = p.staged().filter(|_| rc == 0) else { return rc };
    let (send, recv) = if read { (None, Some(s)) } else { (Some(s), None) };
    // Errors found at completion go to the file's error handler, as the call's own do.
    match requests::insert(request, Entry::file(name, errors::on_file(fh), send, recv)) {
        Ok(()) => rc,
        Err(e) => errors::raise_file(fh, e),
    }
}

/// `MPI_File_iwrite`, `_at`, `_all`, `_at_all`, `_shared` and their `_c` forms.
pub fn file_iwrite(
    name: &'static str,
    fh: Handle,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    request: *mut c_void,
    call: impl FnOnce(*const c_void) -> c_int,
) -> c_int {
    post(name, fh, buf, count, datatype, request, false, |p| call(p))
}

/// `MPI_File_iread`, `_at`, `_all`, `_at_all`, `_shared` and their `_c` forms.
pub fn file_iread(
    name: &'static str,
    fh: Handle,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    request: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    post(name, fh, buf, count, datatype, request, true, call)
}

/// Posts a nonblocking read (`read`) or write of `buf`, staged when it is device memory, and
/// tracks its request until completion lands or releases the staging buffer.
#[allow(clippy::too_many_arguments)]
fn post(
    name: &'static str,
    fh: Handle,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    request: *mut c_void,
    read: bool,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    if cuda::surely_host(buf) {
        stats::host_call();
        return call(buf.cast_mut());
    }
    match staged(name, fh, buf, count, datatype, if read { Direction::Read } else { Direction::Send }) {
        Ok((Prepared::Direct(p), _)) if std::ptr::eq(p, buf) => {
            stats::host_call();
            call(buf.cast_mut())
        }
        Ok((p, _)) => {
            let rc = call(p.mpi_ptr());
            track(name, fh, request, p, read, rc)
        }
        Err(rc) => rc,
    }
}

/// A split collective begun on a device buffer.
struct Split {
    staged: Staged,
    /// The communicator staging reports on.
    comm: Handle,
}

/// The split collectives in progress on device buffers, by file handle (one per file, as MPI
/// allows). File handles are pointers in every family, so the whole word is the key.
static SPLITS: Mutex<BTreeMap<Handle, Split>> = Mutex::new(BTreeMap::new());

fn splits() -> MutexGuard<'static, BTreeMap<Handle, Split>> {
    SPLITS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a `_begin` and keeps its staging buffer for the `_end`.
fn begin(name: &'static str, fh: Handle, buf: *const c_void, count: i64, datatype: Handle, dir: Direction, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    if cuda::surely_host(buf) {
        stats::host_call();
        return call(buf as *mut c_void);
    }
    match staged(name, fh, buf, count, datatype, dir) {
        Ok((Prepared::Direct(p), _)) => {
            if std::ptr::eq(p, buf) {
                stats::host_call();
            }
            call(p)
        }
        Ok((Prepared::Staged(s), comm)) => {
            let rc = call(s.mpi_ptr());
            if rc == 0 {
                // An earlier split collective on this handle was ended or the file closed: MPI
                // allows only one at a time.
                let old = splits().insert(fh, Split { staged: s, comm });
                drop(old);
            }
            rc
        }
        Err(rc) => rc,
    }
}

/// `MPI_File_write_all_begin`, `_at_all_begin`, `_ordered_begin` and their `_c` forms.
pub fn file_begin_write(name: &'static str, fh: Handle, buf: *const c_void, count: i64, datatype: Handle, call: impl FnOnce(*const c_void) -> c_int) -> c_int {
    begin(name, fh, buf, count, datatype, Direction::Send, |p| call(p))
}

/// `MPI_File_read_all_begin`, `_at_all_begin`, `_ordered_begin` and their `_c` forms.
pub fn file_begin_read(name: &'static str, fh: Handle, buf: *mut c_void, count: i64, datatype: Handle, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    begin(name, fh, buf, count, datatype, Direction::Read, call)
}

/// `MPI_File_write_all_end` and its kin: the library is given the staging buffer its `_begin`
/// was given, which is released after.
pub fn file_end_write(_name: &'static str, fh: Handle, buf: *const c_void, call: impl FnOnce(*const c_void) -> c_int) -> c_int {
    let split = splits().remove(&fh);
    match split {
        Some(split) => call(split.staged.mpi_ptr()),
        None => call(buf),
    }
}

/// `MPI_File_read_all_end` and its kin: the data lands in device memory before it returns.
pub fn file_end_read(name: &'static str, fh: Handle, buf: *mut c_void, status: *mut c_void, call: impl FnOnce(*mut c_void, *mut c_void) -> c_int) -> c_int {
    let split = splits().remove(&fh);
    match split {
        Some(Split { staged, comm }) => read_into(name, fh, comm, &staged, status, |st| call(staged.mpi_ptr(), st)),
        None => call(buf, status),
    }
}

/// Releases the staging buffers of split collectives never ended (`MPI_Finalize`).
pub fn finalize() {
    let left = std::mem::take(&mut *splits());
    drop(left);
}
