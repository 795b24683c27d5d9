//! Blocking point-to-point on device buffers: stage out, call the real function, stage in.
//!
//! Host buffers (and every buffer of a process without CUDA) go to the real function untouched.

use std::cell::Cell;
use std::ffi::{c_int, c_void};

use crate::base::stats;
use crate::fastpath::held;
use crate::handlers::host;
use crate::mpi::abi::{self, Handle};
use crate::mpi::matching::Matching;
use crate::mpi::{errors, real};
use crate::staging::stage::{stage_as, stage_pair, Direction, OwnStatus, Prepared, Shape};
use crate::{cuda, fastpath};

/// Runs a receive-like call on prepared buffers and delivers what arrived, even when MPI
/// reports an error (a truncated message still fills the buffer).
/// `recv` is the receive's count and datatype: MPI gets them, or the packed payload's in
/// their place (`Prepared::message`); and a host buffer that an IPC envelope may reach
/// needs them.
fn complete<C: Count>(
    name: &'static str,
    comm: Option<Handle>,
    (source, tag): (c_int, c_int),
    into: Prepared,
    recv: (i64, Handle),
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, C, Handle, *mut c_void) -> c_int,
) -> c_int {
    let mut own = OwnStatus::new(status);
    let (p, n, t) = into.message(recv.0, recv.1);
    let (listening, door) = match &into {
        Prepared::Staged(s) if fastpath::may_get_envelope(s.window().len) => (fastpath::listening(comm, source, tag), None),
        Prepared::Staged(s) if s.contiguous() => (None, fastpath::door(comm, source, tag, &s.dev, s.user, s.span.len)),
        _ => (None, None),
    };
    let rc = call(p, C::from_i64(n), t, own.for_mpi());
    drop(listening);
    // A sender may have written the message into the device buffer already, or another one.
    let landed = door.map_or(fastpath::Landed::Nothing, |d| d.shut(rc, own.filled(), p));
    let truncated = rc != 0 && errors::class(rc) == abi::get().err_truncate;
    let mut delivered = match &into {
        Prepared::Staged(_) if matches!(landed, fastpath::Landed::Message) => Ok(()),
        Prepared::Staged(s) if truncated => {
            errors::truncated(name, s.window().user());
            Ok(())
        }
        Prepared::Staged(s) => s.deliver(name, comm, own.filled()),
        Prepared::Direct(p) if rc == 0 && fastpath::receiving() => fastpath::host_received(name, *p, recv.0, recv.1, comm, own.filled()),
        Prepared::Direct(_) => Ok(()),
    };
    if let fastpath::Landed::Other(restore) = landed {
        let covered = match delivered.is_ok() && !truncated {
            true => crate::staging::stage::received_bytes(own.filled()).unwrap_or(0),
            false => 0,
        };
        delivered = delivered.and(restore.apply(name, comm, covered));
    }
    own.publish();
    match delivered {
        Err(e) if rc == 0 => e,
        _ => rc,
    }
}

/// The count argument of an int-count or large-count call, given back to the library as the
/// caller passed it, or as the packed payload's (`Prepared::message`, which fits an `int`);
/// the handlers hold every count as `i64`.
pub trait Count: Copy {
    fn from_i64(v: i64) -> Self;
    fn to_i64(self) -> i64;
}

impl Count for c_int {
    fn from_i64(v: i64) -> c_int {
        v as c_int
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
}

impl Count for i64 {
    fn from_i64(v: i64) -> i64 {
        v
    }
    fn to_i64(self) -> i64 {
        self
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
    tag: c_int,
    comm: Handle,
    call: impl FnOnce(*const c_void, C, Handle) -> c_int,
) -> c_int {
    let call = match host::from_host(buf, count, datatype, call) {
        Ok(rc) => return rc,
        Err(call) => call,
    };
    if fastpath::sending() {
        if let Some(offer) = fastpath::offer(name, buf, count, datatype, dest, tag, comm) {
            let rc = call(offer.envelope(), C::from_i64(fastpath::ENVELOPE_BYTES as i64), abi::get().byte);
            // The send is complete: the envelope may go.
            return offer.sent_blocking(name, rc, comm);
        }
    }
    // Queued before the staged copy, which then waits for both.
    let push = fastpath::push(buf, count, datatype, dest, tag, comm);
    match stage_as(name, buf, count, datatype, dest, Some(comm), Direction::Send, Shape::Payload) {
        Ok(Prepared::Direct(p)) if std::ptr::eq(p, buf) => {
            stats::host_call();
            call(buf, C::from_i64(count), datatype)
        }
        Ok(p) => {
            let staged = matches!(p, Prepared::Staged(_));
            let (p, n, t) = p.message(count, datatype);
            // Only a staged copy waited for the write queued before it; otherwise the push,
            // dropped, waits for it and gives the door up.
            if let Some(push) = push.filter(|_| staged) {
                push.written(p);
            }
            call(p, C::from_i64(n), t)
        }
        Err(rc) => rc,
    }
}

/// `call(buf, count, datatype, status)` runs the real receive.
pub fn recv<C: Count>(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    from: Matching,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, C, Handle, *mut c_void) -> c_int,
) -> c_int {
    if held::any() {
        if let Some(h) = held::take(from) {
            return recv_into(name, buf, count, datatype, from, status, |p, n: i64, t, st| h.unpack(p, n, t, st));
        }
    }
    recv_into(name, buf, count, datatype, from, status, call)
}

/// A receive whose message `call` brings, from MPI or from what cudampi holds.
pub fn recv_into<C: Count>(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    from: Matching,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, C, Handle, *mut c_void) -> c_int,
) -> c_int {
    let comm = from.comm();
    let call = match host::recv_unheld(name, buf, count, datatype, comm, status, call) {
        Ok(rc) => return rc,
        Err(call) => call,
    };
    match stage_as(name, buf, count, datatype, from.source(), comm, Direction::Recv, Shape::Payload) {
        Ok(Prepared::Direct(p)) if p == buf && !fastpath::receiving() => {
            stats::host_call();
            call(buf, C::from_i64(count), datatype, status)
        }
        Ok(into) => complete(name, comm, (from.source(), from.tag()), into, (count, datatype), status, call),
        Err(rc) => rc,
    }
}

/// The send half of a send-receive whose receive cudampi serves from a held message.
fn send_alone(buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) -> c_int {
    let Some(p) = real::pmpi() else { return abi::get().err_other };
    let Ok(count) = c_int::try_from(count) else { return errors::raise(Some(comm), abi::get().err_count) };
    // SAFETY: the caller's arguments, with the buffer MPI should read.
    unsafe { (p.send)(buf, count, datatype, dest, tag, comm) }
}

/// `call(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, status)` runs the real
/// send-receive.
pub fn sendrecv<C: Count>(
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: Handle,
    dest: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: Handle,
    source: c_int,
    (sendtag, recvtag): (c_int, c_int),
    comm: Handle,
    status: *mut c_void,
    call: impl FnOnce(*const c_void, C, Handle, *mut c_void, C, Handle, *mut c_void) -> c_int,
) -> c_int {
    // A message a probe already received is served from there; the send goes alone, and if it
    // fails the message goes back.
    let held = if held::any() { held::take(Matching::Tag(source, recvtag, comm)) } else { None };
    let unsent = Cell::new(false);
    let call = |s: *const c_void, sn: C, st: Handle, r: *mut c_void, rn: C, rt: Handle, stat: *mut c_void| match &held {
        Some(h) => match send_alone(s, sn.to_i64(), st, dest, sendtag, comm) {
            0 => h.unpack(r, rn.to_i64(), rt, stat),
            rc => {
                unsent.set(true);
                rc
            }
        },
        None => call(s, sn, st, r, rn, rt, stat),
    };
    // The staged call, in a closure of its own so that the held message goes back whichever
    // way it returns.
    let rc = (|| {
        let recv = (recvcount, recvtype);
        if cuda::surely_host(sendbuf) && cuda::surely_host(recvbuf) {
            stats::host_call();
            let (sn, rn) = (C::from_i64(sendcount), C::from_i64(recvcount));
            if fastpath::receiving() {
                return host::recv_watched(name, Some(comm), recvbuf, recv, status, |r, rn, rt, st| call(sendbuf, sn, sendtype, r, rn, rt, st));
            }
            return call(sendbuf, sn, sendtype, recvbuf, rn, recvtype, status);
        }
        let send = (sendbuf, sendcount, sendtype, dest);
        let into = (recvbuf as *const c_void, recvcount, recvtype, source);
        let (out, into) = match stage_pair(name, comm, send, into, Direction::Recv) {
            Ok(pair) => pair,
            Err(rc) => return rc,
        };
        let (sp, sn, st) = out.message(sendcount, sendtype);
        let rc = complete(name, Some(comm), (source, recvtag), into, recv, status, |r, rn, rt, stat| call(sp, C::from_i64(sn), st, r, rn, rt, stat));
        drop(out);
        rc
    })();
    restore_unsent(held, &unsent);
    rc
}

/// Gives back a held message whose send-receive failed in its send.
fn restore_unsent(held: Option<held::Held>, unsent: &Cell<bool>) {
    if let (Some(h), true) = (held, unsent.get()) {
        held::restore(h);
    }
}

/// `call(buf, count, datatype, status)` runs the real send-receive.
pub fn sendrecv_replace<C: Count>(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    source: c_int,
    (sendtag, recvtag): (c_int, c_int),
    comm: Handle,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void, C, Handle, *mut c_void) -> c_int,
) -> c_int {
    let held = if held::any() { held::take(Matching::Tag(source, recvtag, comm)) } else { None };
    let unsent = Cell::new(false);
    let call = |b: *mut c_void, n: C, t: Handle, st: *mut c_void| match &held {
        Some(h) => match send_alone(b, n.to_i64(), t, dest, sendtag, comm) {
            0 => h.unpack(b, n.to_i64(), t, st),
            rc => {
                unsent.set(true);
                rc
            }
        },
        None => call(b, n, t, st),
    };
    // Only a PROC_NULL on both sides makes the call transfer nothing.
    let abi = abi::get();
    let peer = if dest == abi.proc_null && source == abi.proc_null { abi.proc_null } else { 0 };
    let rc = match stage_as(name, buf, count, datatype, peer, Some(comm), Direction::Replace, Shape::Payload) {
        Ok(Prepared::Direct(p)) if p == buf && !fastpath::receiving() => {
            stats::host_call();
            call(buf, C::from_i64(count), datatype, status)
        }
        Ok(into) => complete(name, Some(comm), (source, recvtag), into, (count, datatype), status, call),
        Err(rc) => rc,
    };
    restore_unsent(held, &unsent);
    rc
}
