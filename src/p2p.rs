//! Blocking point-to-point on device buffers: stage out, call the real function, stage in.
//!
//! Host buffers (and every buffer of a process without CUDA) go to the real function untouched.

use std::ffi::{c_int, c_void};

use crate::abi::{self, Handle};
use crate::stage::{stage, stage_pair, Direction, OwnStatus, Prepared};
use crate::{cuda, errors, ipc, stats};

/// `MPI_Mrecv` has no source argument: the matched message carries it.
pub const SOURCE_IN_MESSAGE: c_int = c_int::MIN;

/// Runs a receive-like call on prepared buffers and delivers what arrived, even when MPI
/// reports an error (a truncated message still fills the buffer).
/// `recv` is the receive's count and datatype, for a host buffer that an IPC envelope may
/// reach.
fn complete(
    name: &'static str,
    comm: Option<Handle>,
    into: Prepared,
    recv: (i64, Handle),
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, *mut c_void) -> c_int,
) -> c_int {
    let mut own = OwnStatus::new(status);
    let rc = call(into.mpi_ptr(), own.for_mpi());
    let delivered = match &into {
        Prepared::Staged(s) if rc != 0 && errors::class(rc) == abi::get().err_truncate => {
            errors::truncated(name, s.window().user());
            Ok(())
        }
        Prepared::Staged(s) => s.deliver(name, comm, own.filled()),
        Prepared::Direct(p) if rc == 0 && ipc::receiving() => ipc::host_received(name, *p, recv.0, recv.1, comm, own.filled()),
        Prepared::Direct(_) => Ok(()),
    };
    own.publish();
    match delivered {
        Err(e) if rc == 0 => e,
        _ => rc,
    }
}

/// The count argument of an int-count or large-count call, given back to the library as the
/// caller passed it (the handlers hold every count as `i64`).
pub trait Count: Copy {
    fn from_i64(v: i64) -> Self;
}

impl Count for c_int {
    fn from_i64(v: i64) -> c_int {
        v as c_int
    }
}

impl Count for i64 {
    fn from_i64(v: i64) -> i64 {
        v
    }
}

/// `call(buf, count, datatype)` runs the real send; the IPC path replaces all three with its
/// envelope.
pub fn send<C: Count>(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    comm: Handle,
    call: impl FnOnce(*const c_void, C, Handle) -> c_int,
) -> c_int {
    if cuda::surely_host(buf) {
        stats::host_call();
        return call(buf, C::from_i64(count), datatype);
    }
    if ipc::sending() {
        if let Some(envelope) = ipc::offer(name, buf, count, datatype, dest, comm) {
            return call(envelope, C::from_i64(ipc::ENVELOPE_BYTES as i64), abi::get().byte);
        }
    }
    match stage(name, buf, count, datatype, dest, Some(comm), Direction::Send) {
        Ok(Prepared::Direct(p)) if std::ptr::eq(p, buf) => {
            stats::host_call();
            call(buf, C::from_i64(count), datatype)
        }
        Ok(p) => call(p.mpi_ptr(), C::from_i64(count), datatype),
        Err(rc) => rc,
    }
}

pub fn recv(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    source: c_int,
    comm: Option<Handle>,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, *mut c_void) -> c_int,
) -> c_int {
    if cuda::surely_host(buf) {
        stats::host_call();
        if ipc::receiving() {
            return complete(name, comm, Prepared::Direct(buf), (count, datatype), status, call);
        }
        return call(buf, status);
    }
    match stage(name, buf, count, datatype, source, comm, Direction::Recv) {
        Ok(Prepared::Direct(p)) if p == buf && !ipc::receiving() => {
            stats::host_call();
            call(buf, status)
        }
        Ok(into) => complete(name, comm, into, (count, datatype), status, call),
        Err(rc) => rc,
    }
}

pub fn sendrecv(
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: Handle,
    dest: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: Handle,
    source: c_int,
    comm: Handle,
    status: *mut c_void,
    call: impl FnOnce(*const c_void, *mut c_void, *mut c_void) -> c_int,
) -> c_int {
    let recv = (recvcount, recvtype);
    if cuda::surely_host(sendbuf) && cuda::surely_host(recvbuf) {
        stats::host_call();
        if ipc::receiving() {
            return complete(name, Some(comm), Prepared::Direct(recvbuf), recv, status, |r, st| call(sendbuf, r, st));
        }
        return call(sendbuf, recvbuf, status);
    }
    let send = (sendbuf, sendcount, sendtype, dest);
    let into = (recvbuf as *const c_void, recvcount, recvtype, source);
    let (out, into) = match stage_pair(name, comm, send, into, Direction::Recv) {
        Ok(Some(pair)) => pair,
        Ok(None) => (Prepared::Direct(sendbuf as *mut c_void), Prepared::Direct(recvbuf)),
        Err(rc) => return rc,
    };
    let sendptr = out.mpi_ptr() as *const c_void;
    let rc = complete(name, Some(comm), into, recv, status, |r, st| call(sendptr, r, st));
    drop(out);
    rc
}

pub fn sendrecv_replace(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    source: c_int,
    comm: Handle,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, *mut c_void) -> c_int,
) -> c_int {
    // Only a PROC_NULL on both sides makes the call transfer nothing.
    let abi = abi::get();
    let peer = if dest == abi.proc_null && source == abi.proc_null { abi.proc_null } else { 0 };
    match stage(name, buf, count, datatype, peer, Some(comm), Direction::Replace) {
        Ok(Prepared::Direct(p)) if p == buf && !ipc::receiving() => {
            stats::host_call();
            call(buf, status)
        }
        Ok(into) => complete(name, Some(comm), into, (count, datatype), status, call),
        Err(rc) => rc,
    }
}
