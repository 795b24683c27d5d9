//! The host-buffer paths of the calls a program makes most often: sends, receives and their
//! completion, when no buffer is device memory and cudampi holds nothing for the call.
//!
//! Each function either serves the call or gives back its `call` untouched (`Err`), having
//! done nothing else, so that the full handler can take over; [`passes`] says, before
//! anything is done, that the call goes to MPI as it is. The entry points (`export.rs`) run
//! these inline and keep the full handler out of line: inlined into every entry point, the
//! device paths gave each a frame of about 1.4 KB and six saved registers that a host buffer
//! paid for on every call, and a call that passes is a jump to the library's function. The
//! handlers start with the same functions, so that every caller takes one host path.

use std::ffi::{c_int, c_void};

use crate::base::stats;
use crate::fastpath::{self, held};
use crate::handlers::p2p::Count;
use crate::mpi::abi::{self, Handle};
use crate::mpi::matching::Matching;
use crate::requests::{self, watch, HostRecv};
use crate::staging::stage::received_bytes;
use crate::cuda;

/// A blocking send from host memory.
#[inline(always)]
pub fn send<C: Count, F: FnOnce(*const c_void, C, Handle) -> c_int>(
    _name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    _dest: c_int,
    _comm: Handle,
    call: F,
) -> Result<c_int, F> {
    from_host(buf, count, datatype, call)
}

/// A nonblocking send from host memory.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn isend<C: Count, F: FnOnce(*const c_void, C, Handle) -> c_int>(
    _name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    _dest: c_int,
    _comm: Handle,
    _request: *mut c_void,
    call: F,
) -> Result<c_int, F> {
    from_host(buf, count, datatype, call)
}

/// Any send from host memory: MPI gets it as the program wrote it.
#[inline(always)]
pub fn from_host<C: Count, F: FnOnce(*const c_void, C, Handle) -> c_int>(buf: *const c_void, count: i64, datatype: Handle, call: F) -> Result<c_int, F> {
    if !cuda::surely_host(buf) {
        return Err(call);
    }
    stats::host_call();
    Ok(call(buf, C::from_i64(count), datatype))
}

/// A blocking receive into host memory, when no message cudampi holds may match it.
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
    if held::any() {
        return Err(call);
    }
    recv_unheld(name, buf, count, datatype, from.comm(), status, call)
}

/// [`recv`] for a message that cudampi does not hold, whoever brings it (`call`).
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

/// A nonblocking receive into host memory, when no message cudampi holds may match it.
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
    if held::any() {
        return Err(call);
    }
    irecv_unheld(name, buf, count, datatype, from.comm(), request, call)
}

/// [`irecv`] once no held message matched.
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

/// `MPI_Wait` when cudampi tracks no request of its own.
#[inline(always)]
pub fn wait<F: FnOnce(*mut c_void) -> c_int>(_name: &'static str, request: *mut c_void, status: *mut c_void, call: F) -> Result<c_int, F> {
    complete(request, 1, status, false, call)
}

/// `MPI_Test` when cudampi tracks no request of its own: a watched receive that is not yet
/// complete keeps its handle, and so its place in the watch.
#[inline(always)]
pub fn test<F: FnOnce(*mut c_void) -> c_int>(_name: &'static str, request: *mut c_void, _flag: *mut c_int, status: *mut c_void, call: F) -> Result<c_int, F> {
    complete(request, 1, status, false, call)
}

/// `MPI_Waitall` when cudampi tracks no request of its own.
#[inline(always)]
pub fn waitall<F: FnOnce(*mut c_void) -> c_int>(_name: &'static str, count: c_int, requests: *mut c_void, statuses: *mut c_void, call: F) -> Result<c_int, F> {
    complete(requests, count, statuses, true, call)
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

/// Whether a call goes to MPI with its arguments as they are, with nothing to do before or
/// after: no buffer in device memory, nothing cudampi holds or watches for it, no counter to
/// keep. Asked before anything else, from loads and comparisons alone (no call, so that the
/// entry point needs no frame); false only means that the other paths decide.
pub mod passes {
    use std::ffi::{c_int, c_void};

    use crate::base::stats;
    use crate::cuda;
    use crate::fastpath::{self, held};
    use crate::mpi::abi::Handle;
    use crate::mpi::matching::Matching;
    use crate::requests::{self, watch};

    #[inline(always)]
    pub fn send(_name: &'static str, buf: *const c_void, _count: i64, _datatype: Handle, _dest: c_int, _comm: Handle) -> bool {
        !stats::enabled() && cuda::plainly_host(buf)
    }

    #[inline(always)]
    pub fn isend(_name: &'static str, buf: *const c_void, _count: i64, _datatype: Handle, _dest: c_int, _comm: Handle, _request: *mut c_void) -> bool {
        !stats::enabled() && cuda::plainly_host(buf)
    }

    /// A receive into host memory passes while no peer's envelope can reach it.
    #[inline(always)]
    pub fn recv(_name: &'static str, buf: *mut c_void, _count: i64, _datatype: Handle, _from: Matching, _status: *mut c_void) -> bool {
        !stats::enabled() && !fastpath::receiving() && !held::any() && cuda::plainly_host(buf)
    }

    #[inline(always)]
    pub fn irecv(_name: &'static str, buf: *mut c_void, _count: i64, _datatype: Handle, _from: Matching, _request: *mut c_void) -> bool {
        !stats::enabled() && !fastpath::receiving() && !held::any() && cuda::plainly_host(buf)
    }

    /// A completion call passes while cudampi neither tracks nor watches any request.
    #[inline(always)]
    pub fn wait(_name: &'static str, _request: *mut c_void, _status: *mut c_void) -> bool {
        !requests::any() && !watch::any()
    }

    #[inline(always)]
    pub fn test(_name: &'static str, _request: *mut c_void, _flag: *mut c_int, _status: *mut c_void) -> bool {
        !requests::any() && !watch::any()
    }

    #[inline(always)]
    pub fn waitall(_name: &'static str, _count: c_int, _requests: *mut c_void, _statuses: *mut c_void) -> bool {
        !requests::any() && !watch::any()
    }
}
