//! Blocking point-to-point on device buffers: stage out, call the real function, stage in.
//!
//! Host buffers (and every buffer of a process without CUDA) go to the real function untouched.
//! Calls the real library would reject without touching the buffer (negative count, the null
//! datatype, `MPI_PROC_NULL`, nothing to transfer) are forwarded with a harmless host address in
//! place of the device one, so the caller gets exactly the real library's answer.

use std::ffi::{c_int, c_void};

use crate::abi::{self, Handle};
use crate::cuda::{self, Device, InContext, Location};
use crate::datatype::{self, Span};
use crate::errors;
use crate::staging::{self, Lease};
use crate::{config, log, real, stats};

/// `MPI_Mrecv` has no source argument: the matched message carries it.
pub const SOURCE_IN_MESSAGE: c_int = c_int::MIN;

/// A readable, writable host address for calls that must not see the device pointer but will
/// not transfer data either.
fn placeholder() -> *mut c_void {
    static mut BYTE: u64 = 0;
    // Only the address is taken; MPI transfers nothing into it.
    std::ptr::addr_of_mut!(BYTE).cast()
}

/// What to hand the real function for one buffer argument.
enum Prepared {
    /// The caller's pointer (host memory) or the placeholder.
    Direct(*mut c_void),
    Staged(Staged),
}

struct Staged {
    dev: Device,
    /// First byte of the span in device memory.
    user: *mut c_void,
    lease: Lease,
    span: Span,
    /// The pre-receive bytes were copied in, so the whole span may be written back.
    whole_span: bool,
}

impl Prepared {
    fn mpi_ptr(&self) -> *mut c_void {
        match self {
            Prepared::Direct(p) => *p,
            Prepared::Staged(s) => s.lease.ptr().cast::<u8>().wrapping_offset(-s.span.offset as isize).cast(),
        }
    }
}

enum Direction {
    Send,
    /// Into a receive buffer. Derived datatypes copy the device span in first and write all of
    /// it back, so the gaps MPI does not write keep their device values.
    Recv,
    /// `MPI_Sendrecv_replace`: the whole span goes out and all of it comes back.
    Replace,
}

/// Looks at one buffer and stages it if it is device memory. `Err` is the MPI error code to
/// return at once (already reported and raised on `comm`).
fn prepare(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    peer: c_int,
    comm: Option<Handle>,
    dir: Direction,
) -> Result<Prepared, c_int> {
    let dev = match cuda::locate(buf) {
        Location::Host => return Ok(Prepared::Direct(buf as *mut c_void)),
        Location::Device(d) => d,
        Location::FreedDevice => return Err(errors::freed(name, comm, buf)),
    };
    let abi = abi::get();
    if count <= 0 || peer == abi.proc_null || abi.same(datatype, abi.datatype_null) {
        return Ok(Prepared::Direct(placeholder()));
    }
    let span = datatype::span(datatype, count)?;
    if span.len == 0 {
        return Ok(Prepared::Direct(placeholder()));
    }
    stats::device_call(name);
    let user = buf.cast::<u8>().wrapping_offset(span.offset as isize) as *mut c_void;
    let ctx = InContext::enter(&dev).map_err(|e| errors::cuda(name, comm, e, buf, span.len, &dev))?;
    let lease = staging::lease(span.len, &ctx).ok_or_else(|| errors::no_mem(name, comm, span.len))?;
    let copy_in = match dir {
        Direction::Send | Direction::Replace => true,
        Direction::Recv => !span.named,
    };
    if copy_in {
        ctx.to_host(lease.ptr(), user, span.len).map_err(|e| errors::cuda(name, comm, e, buf, span.len, &dev))?;
        stats::add(&stats::BYTES_TO_HOST, span.len);
    }
    if config::get().debug {
        log::debug(format_args!(
            "{name}: device buffer {buf:p} (GPU {}), {} bytes {} {} staging buffer",
            dev.ordinal,
            span.len,
            if copy_in { "copied to" } else { "to receive in" },
            if lease.is_pinned() { "a pinned" } else { "a pageable" },
        ));
    }
    Ok(Prepared::Staged(Staged { dev, user, lease, span, whole_span: copy_in }))
}

/// Copies a staged receive back to the device once MPI has filled it. `status` is the status
/// MPI filled (never `MPI_STATUS_IGNORE`).
fn deliver(name: &'static str, comm: Option<Handle>, prepared: Prepared, status: *mut c_void) -> Result<(), c_int> {
    let Prepared::Staged(s) = prepared else { return Ok(()) };
    let len = if s.whole_span {
        s.span.len
    } else {
        match received_bytes(status) {
            Some(n) => n.min(s.span.len),
            None => {
                log::error(format_args!("{name}: cannot tell how many bytes arrived; the device buffer {:p} was not updated", s.user));
                return Err(errors::raise(comm, abi::get().err_intern));
            }
        }
    };
    if len == 0 {
        return Ok(());
    }
    let fail = |e| errors::cuda(name, comm, e, s.user, len, &s.dev);
    let ctx = InContext::enter(&s.dev).map_err(fail)?;
    ctx.to_device(s.user, s.lease.ptr(), len).map_err(fail)?;
    stats::add(&stats::BYTES_TO_DEVICE, len);
    if config::get().debug {
        log::debug(format_args!("{name}: {len} bytes copied back to device buffer {:p} (GPU {})", s.user, s.dev.ordinal));
    }
    Ok(())
}

/// Bytes of the message a status describes.
fn received_bytes(status: *mut c_void) -> Option<usize> {
    let p = real::pmpi()?;
    let mut n: i64 = 0;
    // SAFETY: status was filled by the receive (or left zeroed); MPI_BYTE counts bytes.
    let rc = unsafe { (p.get_elements_x)(status, abi::get().byte, &mut n) };
    (rc == 0).then(|| usize::try_from(n).ok()).flatten()
}

/// The status a staged receive gives MPI. It starts zeroed, so a count MPI did not write reads
/// as nothing received, and carries the caller's `MPI_ERROR`, which single-completion calls
/// leave alone; afterwards it is copied out unless the caller passed `MPI_STATUS_IGNORE`.
/// A null status that is not the family's `MPI_STATUS_IGNORE` goes to MPI as it is, so MPI
/// rejects it as it would without cudampi.
struct OwnStatus {
    status: abi::Status,
    caller: *mut c_void,
}

impl OwnStatus {
    fn new(caller: *mut c_void) -> OwnStatus {
        let abi = abi::get();
        let mut status = abi::Status::zeroed();
        if !caller.is_null() && !abi.is_status_ignore(caller) {
            let at = abi.status_error_offset;
            // SAFETY: the caller's status holds at least status_size bytes.
            unsafe { std::ptr::copy_nonoverlapping(caller.cast::<u8>().add(at), status.0.as_mut_ptr().add(at), 4) };
        }
        OwnStatus { status, caller }
    }

    /// What MPI fills.
    fn for_mpi(&mut self) -> *mut c_void {
        if self.caller.is_null() && !abi::get().is_status_ignore(self.caller) {
            self.caller
        } else {
            self.status.as_mut_ptr()
        }
    }

    /// What MPI filled (still zeroed if MPI was handed the caller's null).
    fn filled(&mut self) -> *mut c_void {
        self.status.as_mut_ptr()
    }

    fn publish(self) {
        let abi = abi::get();
        if !self.caller.is_null() && !abi.is_status_ignore(self.caller) {
            // SAFETY: both hold at least status_size bytes.
            unsafe { std::ptr::copy_nonoverlapping(self.status.0.as_ptr(), self.caller.cast::<u8>(), abi.status_size) };
        }
    }
}

/// Runs a receive-like call on prepared buffers and delivers what arrived, even when MPI
/// reports an error (a truncated message still fills the buffer).
fn complete(
    name: &'static str,
    comm: Option<Handle>,
    into: Prepared,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, *mut c_void) -> c_int,
) -> c_int {
    let mut own = OwnStatus::new(status);
    let rc = call(into.mpi_ptr(), own.for_mpi());
    let delivered = deliver(name, comm, into, own.filled());
    own.publish();
    match delivered {
        Err(e) if rc == 0 => e,
        _ => rc,
    }
}

pub fn send(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    comm: Handle,
    call: impl FnOnce(*const c_void) -> c_int,
) -> c_int {
    match prepare(name, buf, count, datatype, dest, Some(comm), Direction::Send) {
        Ok(Prepared::Direct(p)) if std::ptr::eq(p, buf) => {
            stats::host_call();
            call(buf)
        }
        Ok(p) => call(p.mpi_ptr()),
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
    match prepare(name, buf, count, datatype, source, comm, Direction::Recv) {
        Ok(Prepared::Direct(p)) if p == buf => {
            stats::host_call();
            call(buf, status)
        }
        Ok(into) => complete(name, comm, into, status, call),
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
    let out = match prepare(name, sendbuf, sendcount, sendtype, dest, Some(comm), Direction::Send) {
        Ok(p) => p,
        Err(rc) => return rc,
    };
    let into = match prepare(name, recvbuf, recvcount, recvtype, source, Some(comm), Direction::Recv) {
        Ok(p) => p,
        Err(rc) => return rc,
    };
    if matches!((&out, &into), (Prepared::Direct(a), Prepared::Direct(b)) if std::ptr::eq(*a, sendbuf) && *b == recvbuf) {
        stats::host_call();
        return call(sendbuf, recvbuf, status);
    }
    let sendptr = out.mpi_ptr() as *const c_void;
    let rc = complete(name, Some(comm), into, status, |r, st| call(sendptr, r, st));
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
    match prepare(name, buf, count, datatype, peer, Some(comm), Direction::Replace) {
        Ok(Prepared::Direct(p)) if p == buf => {
            stats::host_call();
            call(buf, status)
        }
        Ok(into) => complete(name, Some(comm), into, status, call),
        Err(rc) => rc,
    }
}
