//! The host-buffer paths of the calls a program makes most often: sends, receives and their
//! completion, when no buffer is device memory and cudampi holds nothing for the call.
//!
//! [`route`] decides, before anything is done, whether a call passes to MPI unchanged, takes
//! the host path that [`serve`]s it (a receive into host memory that the watch notes, a
//! completion call over watched receives), or needs its full handler. The entry points
//! (`export.rs`) ask inline and keep both paths out of line: inlined into every entry point,
//! the device paths gave each a frame of about 1.4 KB and six saved registers that a host
//! buffer paid for on every call, where a call that passes is now a jump to the library's
//! function. The handlers start with the same host paths (`from_host`, `recv_unheld`,
//! `irecv_unheld`, `complete`): each gives its `call` back untouched (`Err`) when the full
//! handler must take over.

use std::ffi::{c_int, c_void};

use crate::base::stats;
use crate::fastpath;
use crate::handlers::p2p::Count;
use crate::mpi::abi::{self, Handle};
use crate::requests::{self, watch, HostRecv};
use crate::staging::stage::received_bytes;
use crate::cuda;

/// Any send from host memory: MPI gets it as the program wrote it.
#[inline(always)]
pub fn from_host<C: Count, F: FnOnce(*const c_void, C, Handle) -> c_int>(buf: *const c_void, count: i64, datatype: Handle, call: F) -> Result<c_int, F> {
    if !cuda::surely_host(buf) {
        return Err(call);
    }
    stats::host_call();
    Ok(call(buf, C::from_i64(count), datatype))
}

/// A blocking receive into host memory, once no message cudampi holds matched; `call` brings
/// the message, from MPI or from what cudampi holds.
#[inline(always)]
pub fn recv_unheld<C: Count, F: FnOnce(*mut c_void, C, Handle, *mut c_void) -> c_int>(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    comm: Option<Handle>,
    status: *mut c_void,
    call: F,
) -> Result<c_int, F> {
    if !cuda::surely_host(buf) {
        return Err(call);
    }
    stats::host_call();
    if fastpath::receiving() {
        return Ok(recv_watched(name, comm, buf, (count, datatype), status, call));
    }
    Ok(call(buf, C::from_i64(count), datatype, status))
}

/// A receive into host memory with the fast paths on: MPI fills the caller's own status (or
/// one of cudampi's when the caller ignores it), and only a message of an envelope's size is
/// looked at further. A null status that is not `MPI_STATUS_IGNORE` goes to MPI as it is.
#[inline]
pub fn recv_watched<C: Count>(
    name: &'static str,
    comm: Option<Handle>,
    buf: *mut c_void,
    recv: (i64, Handle),
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, C, Handle, *mut c_void) -> c_int,
) -> c_int {
    let abi = abi::get();
    let mut own = abi::Status::zeroed();
    let st = match abi.is_status_ignore(status) {
        true => own.as_mut_ptr(),
        false => status,
    };
    let rc = call(buf, C::from_i64(recv.0), recv.1, st);
    if rc != 0 || st.is_null() || received_bytes(st) != Some(fastpath::ENVELOPE_BYTES) {
        return rc;
    }
    match fastpath::host_received(name, buf, recv.0, recv.1, comm, st) {
        Ok(()) => rc,
        Err(e) => e,
    }
}

/// A nonblocking receive into host memory, once no message cudampi holds matched.
#[inline(always)]
pub fn irecv_unheld<C: Count, F: FnOnce(*mut c_void, C, Handle) -> c_int>(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    comm: Option<Handle>,
    request: *mut c_void,
    call: F,
) -> Result<c_int, F> {
    if !cuda::surely_host(buf) {
        return Err(call);
    }
    stats::host_call();
    if fastpath::receiving() {
        return Ok(irecv_watched(name, buf, count, datatype, comm, request, call));
    }
    Ok(call(buf, C::from_i64(count), datatype))
}

/// A host receive an envelope may reach is watched, so that its completion brings the data;
/// one too small for an envelope needs nothing (the library reports the truncation).
#[inline(always)]
pub fn irecv_watched<C: Count>(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    comm: Option<Handle>,
    request: *mut c_void,
    call: impl FnOnce(*mut c_void, C, Handle) -> c_int,
) -> c_int {
    let rc = call(buf, C::from_i64(count), datatype);
    if rc != 0 {
        return rc;
    }
    if let Some(packed) = fastpath::may_land(count, datatype) {
        watch::insert(request, name, comm, HostRecv { buf, count, datatype }, packed);
    }
    rc
}

/// A completion call over requests of which cudampi tracks none: straight to MPI, or, where
/// some are watched host receives and the caller asks for no status, the watch's lean path
/// (`watch::before`). Watched receives whose statuses the caller wants take the full handler.
#[inline(always)]
pub fn complete<F: FnOnce(*mut c_void) -> c_int>(reqs: *mut c_void, n: c_int, caller: *mut c_void, multi: bool, call: F) -> Result<c_int, F> {
    if requests::any() {
        return Err(call);
    }
    if !watch::any() {
        return Ok(call(caller));
    }
    let abi = abi::get();
    let ignored = if multi { abi.is_statuses_ignore(caller) } else { abi.is_status_ignore(caller) };
    match ignored.then(|| watch::before(reqs, n)).flatten() {
        Some(before) => Ok(settle_unseen(&before, reqs, multi, call(caller))),
        None => Err(call),
    }
}

/// After a completion call that returned `rc` and asked MPI for no status (the caller asked
/// for none): the buffers of the watched receives that completed tell an envelope. A landing
/// that fails is the call's error, or, where others of its requests may have succeeded,
/// `MPI_ERR_IN_STATUS` with no status to say which.
#[inline(always)]
fn settle_unseen(before: &watch::Before, reqs: *mut c_void, multi: bool, rc: c_int) -> c_int {
    match watch::settle_unseen(before, reqs) {
        Some(e) if rc == 0 && !multi => e,
        Some(_) if rc == 0 => abi::get().err_in_status,
        _ => rc,
    }
}

/// Which way an entry point takes, decided before anything is done.
pub enum Route {
    /// To MPI with the caller's arguments as they are, with nothing to do before or after.
    Pass,
    /// The host path of [`serve`]: host buffers, with the watch of host receives to keep.
    Serve,
    /// The full handler.
    Full,
}

/// The way each call takes, from loads and comparisons alone: no call, so that an entry
/// point that passes needs no frame and ends in a jump to the library's function.
pub mod route {
    use std::ffi::{c_int, c_void};

    use super::Route;
    use crate::base::stats;
    use crate::cuda;
    use crate::engine::{self, Job};
    use crate::handlers::collectives::Mode;
    use crate::fastpath::{self, held};
    use crate::mpi::abi::Handle;
    use crate::mpi::matching::Matching;
    use crate::requests::{self, watch};

    /// A blocking collective NCCL may run: it passes when its buffers are host memory and no
    /// agreement can be due, which is when its size, known from loads alone, is below
    /// `CUDAMPI_NCCL_BYTES` (`engine`); every other call takes the handler, which keeps the
    /// agreements' schedule on every rank alike.
    #[inline(always)]
    pub fn ncoll<P>(_name: &'static str, _comm: Option<Handle>, _mode: Mode, sendbuf: *const c_void, recvbuf: *mut c_void, job: impl FnOnce() -> Job, _plan: P) -> Route {
        collective(&[sendbuf, recvbuf.cast_const()], job)
    }

    #[inline(always)]
    pub fn ncoll1<P>(_name: &'static str, _comm: Option<Handle>, _mode: Mode, buffer: *mut c_void, job: impl FnOnce() -> Job, _plan: P) -> Route {
        collective(&[buffer.cast_const()], job)
    }

    #[inline(always)]
    fn collective(bufs: &[*const c_void], job: impl FnOnce() -> Job) -> Route {
        if stats::enabled() || !bufs.iter().all(|&b| cuda::plainly_host(b)) {
            return Route::Full;
        }
        match !engine::on() || job().below_threshold() {
            true => Route::Pass,
            false => Route::Full,
        }
    }

    #[inline(always)]
    pub fn send(_name: &'static str, buf: *const c_void, _count: i64, _datatype: Handle, _dest: c_int, _tag: c_int, _comm: Handle) -> Route {
        from_host(buf)
    }

    #[inline(always)]
    pub fn isend(_name: &'static str, buf: *const c_void, _count: i64, _datatype: Handle, _dest: c_int, _tag: c_int, _comm: Handle, _request: *mut c_void) -> Route {
        from_host(buf)
    }

    #[inline(always)]
    fn from_host(buf: *const c_void) -> Route {
        match !stats::enabled() && cuda::plainly_host(buf) {
            true => Route::Pass,
            false => Route::Full,
        }
    }

    #[inline(always)]
    pub fn recv(_name: &'static str, buf: *mut c_void, count: i64, datatype: Handle, _from: Matching, _status: *mut c_void) -> Route {
        into_host(buf, count, datatype)
    }

    #[inline(always)]
    pub fn irecv(_name: &'static str, buf: *mut c_void, count: i64, datatype: Handle, _from: Matching, _request: *mut c_void) -> Route {
        into_host(buf, count, datatype)
    }

    /// A receive into host memory is watched while a peer's envelope can reach it, unless no
    /// envelope fits in it.
    #[inline(always)]
    fn into_host(buf: *mut c_void, count: i64, datatype: Handle) -> Route {
        match stats::enabled() || held::any() || !cuda::plainly_host(buf) {
            true => Route::Full,
            false if fastpath::receiving() && !fastpath::below_envelope(count, datatype) => Route::Serve,
            false => Route::Pass,
        }
    }

    #[inline(always)]
    pub fn wait(_name: &'static str, _request: *mut c_void, _status: *mut c_void) -> Route {
        completion()
    }

    #[inline(always)]
    pub fn test(_name: &'static str, _request: *mut c_void, _flag: *mut c_int, _status: *mut c_void) -> Route {
        completion()
    }

    #[inline(always)]
    pub fn waitall(_name: &'static str, _count: c_int, _requests: *mut c_void, _statuses: *mut c_void) -> Route {
        completion()
    }

    /// A completion call passes while cudampi neither tracks nor watches any request.
    #[inline(always)]
    fn completion() -> Route {
        match (requests::any(), watch::any()) {
            (true, _) => Route::Full,
            (false, true) => Route::Serve,
            (false, false) => Route::Pass,
        }
    }
}

/// The calls [`route`] sent here: `Err` gives the call back to the full handler.
pub mod serve {
    use std::ffi::{c_int, c_void};

    use crate::handlers::p2p::Count;
    use crate::mpi::abi::Handle;
    use crate::mpi::matching::Matching;

    #[inline(always)]
    pub fn recv<C: Count, F: FnOnce(*mut c_void, C, Handle, *mut c_void) -> c_int>(
        name: &'static str,
        buf: *mut c_void,
        count: i64,
        datatype: Handle,
        from: Matching,
        status: *mut c_void,
        call: F,
    ) -> Result<c_int, F> {
        Ok(super::recv_watched(name, from.comm(), buf, (count, datatype), status, call))
    }

    #[inline(always)]
    pub fn irecv<C: Count, F: FnOnce(*mut c_void, C, Handle) -> c_int>(
        name: &'static str,
        buf: *mut c_void,
        count: i64,
        datatype: Handle,
        from: Matching,
        request: *mut c_void,
        call: F,
    ) -> Result<c_int, F> {
        Ok(super::irecv_watched(name, buf, count, datatype, from.comm(), request, call))
    }

    #[inline(always)]
    pub fn wait<F: FnOnce(*mut c_void) -> c_int>(_name: &'static str, request: *mut c_void, status: *mut c_void, call: F) -> Result<c_int, F> {
        super::complete(request, 1, status, false, call)
    }

    /// A watched receive that is not yet complete keeps its handle, and so its place.
    #[inline(always)]
    pub fn test<F: FnOnce(*mut c_void) -> c_int>(_name: &'static str, request: *mut c_void, _flag: *mut c_int, status: *mut c_void, call: F) -> Result<c_int, F> {
        super::complete(request, 1, status, false, call)
    }

    #[inline(always)]
    pub fn waitall<F: FnOnce(*mut c_void) -> c_int>(_name: &'static str, count: c_int, requests: *mut c_void, statuses: *mut c_void, call: F) -> Result<c_int, F> {
        super::complete(requests, count, statuses, true, call)
    }
}
