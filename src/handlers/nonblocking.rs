//! Posting nonblocking, persistent and partitioned point-to-point operations on device buffers.
//!
//! A device send is copied to its staging buffer before the real call, so MPI may read it at
//! any time; the copy is synchronous, which keeps the order of messages exactly the order of
//! the calls. A receive hands MPI its staging buffer and copies back at completion
//! (`completion.rs`). Persistent requests lease their staging buffer at initialisation, since
//! MPI binds the buffer address then, and copy afresh at every start.

use std::ffi::{c_int, c_void};

use crate::base::stats;
use crate::fastpath::held;
use crate::handlers::host;
use crate::handlers::p2p::{self, Count};
use crate::mpi::matching::Matching;
use crate::mpi::abi::Handle;
use crate::mpi::datatype;
use crate::mpi::{abi, errors, real};
use crate::requests::{self, Entry, HostRecv, Kind, Partitions, RecvArgs};
use crate::staging::stage::{prepare, prepare_as, stage_as, stage_pair, Back, Direction, Prepared, Shape};
use crate::fastpath;

/// Runs the real post with the buffer MPI should see and, if it succeeded with a staged
/// buffer, tracks the request.
fn post(name: &'static str, comm: Option<Handle>, request: *mut c_void, send: Option<Prepared>, recv: Option<Prepared>, kind: Kind, rc: c_int) -> c_int {
    if rc == 0 {
        let send = send.and_then(Prepared::staged);
        let recv = recv.and_then(Prepared::staged);
        if send.is_some() || recv.is_some() {
            if let Err(e) = requests::insert(request, Entry::new(name, comm, send, recv, kind)) {
                return e;
            }
        }
    }
    rc
}

/// `call(buf, count, datatype)` posts the real send; the fast paths replace all three with
/// their envelope. An IPC send needs no tracking (its envelope stays with the exported block);
/// a chunked send's request keeps its envelope until it completes.
pub fn isend<C: Count>(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut c_void,
    call: impl FnOnce(*const c_void, C, Handle) -> c_int,
) -> c_int {
    let call = match host::from_host(buf, count, datatype, call) {
        Ok(rc) => return rc,
        Err(call) => call,
    };
    if fastpath::sending() {
        if let Some(offer) = fastpath::offer(name, buf, count, datatype, dest, tag, comm) {
            let rc = call(offer.envelope(), C::from_i64(fastpath::ENVELOPE_BYTES as i64), abi::get().byte);
            return match offer.sent(name, rc, comm) {
                (rc, Some(envelope)) => match requests::insert(request, Entry::envelope(name, Some(comm), envelope)) {
                    Ok(()) => rc,
                    Err(e) => e,
                },
                (rc, None) => rc,
            };
        }
    }
    match stage_as(name, buf, count, datatype, dest, Some(comm), Direction::Send, Shape::Payload) {
        Ok(Prepared::Direct(p)) if std::ptr::eq(p, buf) => {
            stats::host_call();
            call(buf, C::from_i64(count), datatype)
        }
        Ok(p) => {
            let (b, n, t) = p.message(count, datatype);
            let rc = call(b, C::from_i64(n), t);
            post(name, Some(comm), request, Some(p), None, Kind::Once, rc)
        }
        Err(rc) => rc,
    }
}

/// `call(buf, count, datatype)` posts the real receive.
pub fn irecv<C: Count>(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    from: Matching,
    request: *mut c_void,
    call: impl FnOnce(*mut c_void, C, Handle) -> c_int,
) -> c_int {
    if held::any() {
        if let Some(h) = held::take(from) {
            // The message is here already: the receive completes now.
            let mut status = abi::Status::zeroed();
            let rc = p2p::recv_into(name, buf, count, datatype, from, status.as_mut_ptr(), |p, n: i64, t, st| h.unpack(p, n, t, st));
            return held::completed(request, &status, rc);
        }
    }
    let (source, comm) = (from.source(), from.comm());
    let call = match host::irecv_unheld(name, buf, count, datatype, comm, request, call) {
        Ok(rc) => return rc,
        Err(call) => call,
    };
    match stage_as(name, buf, count, datatype, source, comm, Direction::Recv, Shape::Payload) {
        Ok(Prepared::Direct(p)) if p == buf => {
            stats::host_call();
            if fastpath::receiving() {
                return host::irecv_watched(name, buf, count, datatype, comm, request, call);
            }
            call(buf, C::from_i64(count), datatype)
        }
        Ok(p) => {
            let (b, n, t) = p.message(count, datatype);
            let rc = call(b, C::from_i64(n), t);
            post(name, comm, request, None, Some(p), Kind::Once, rc)
        }
        Err(rc) => rc,
    }
}

/// Tracks a posted receive into host memory that an envelope may reach (with the staged
/// buffer of the send posted with it, if any); one too small for an envelope needs nothing
/// (the library reports the truncation).
fn track_host(name: &'static str, comm: Option<Handle>, request: *mut c_void, send: Option<Prepared>, host: HostRecv, kind: Kind, rc: c_int) -> c_int {
    if rc != 0 || fastpath::may_land(host.count, host.datatype).is_none() {
        return post(name, comm, request, send, None, kind, rc);
    }
    match requests::insert(request, Entry::host(name, comm, send.and_then(Prepared::staged), host, kind)) {
        Ok(()) => rc,
        Err(e) => e,
    }
}

/// The send half of a nonblocking send-receive whose receive cudampi serves from a held
/// message, posted on its own (device buffers staged as any `MPI_Isend`'s).
fn isend_alone(name: &'static str, buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void) -> c_int {
    let Some(p) = real::pmpi() else { return abi::get().err_other };
    isend::<i64>(name, buf, count, datatype, dest, tag, comm, request, |b, n, t| match c_int::try_from(n) {
        // SAFETY: the caller's arguments, with the buffer MPI should read.
        Ok(n) => unsafe { (p.isend)(b, n, t, dest, tag, comm, request.cast()) },
        Err(_) => errors::raise(Some(comm), abi::get().err_count),
    })
}

/// Serves the receive of a nonblocking send-receive from `held`; the request is the send's,
/// and reports the receive when it completes.
fn serve_receive(name: &'static str, buf: *mut c_void, count: i64, datatype: Handle, from: Matching, request: *mut c_void, held: &held::Held, copy: Option<Vec<u8>>) -> c_int {
    let mut status = abi::Status::zeroed();
    let rc = p2p::recv_into(name, buf, count, datatype, from, status.as_mut_ptr(), |p, n: i64, t, st| held.unpack(p, n, t, st));
    requests::report_receive(request, name, from.comm(), status, rc, copy);
    0
}

/// `call(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype)` posts the real
/// send-receive.
#[allow(clippy::too_many_arguments)]
pub fn isendrecv<C: Count>(
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
    request: *mut c_void,
    call: impl FnOnce(*const c_void, C, Handle, *mut c_void, C, Handle) -> c_int,
) -> c_int {
    if held::any() {
        let from = Matching::Tag(source, recvtag, comm);
        if let Some(h) = held::take(from) {
            // A probe already took the message out of MPI's queue: the send goes alone.
            return match isend_alone(name, sendbuf, sendcount, sendtype, dest, sendtag, comm, request) {
                0 => serve_receive(name, recvbuf, recvcount, recvtype, from, request, &h, None),
                rc => {
                    held::restore(h);
                    rc
                }
            };
        }
    }
    let send = (sendbuf, sendcount, sendtype, dest);
    let recv = (recvbuf as *const c_void, recvcount, recvtype, source);
    let (out, into) = match stage_pair(name, comm, send, recv, Direction::RecvWhole) {
        Ok(pair) => pair,
        Err(rc) => return rc,
    };
    let (sb, sn, st) = out.message(sendcount, sendtype);
    let (rb, rn, rt) = into.message(recvcount, recvtype);
    let rc = call(sb, C::from_i64(sn), st, rb, C::from_i64(rn), rt);
    match into {
        Prepared::Direct(p) if p == recvbuf && fastpath::receiving() => {
            track_host(name, Some(comm), request, Some(out), HostRecv { buf: recvbuf, count: recvcount, datatype: recvtype }, Kind::Once, rc)
        }
        into => post(name, Some(comm), request, Some(out), Some(into), Kind::Once, rc),
    }
}

/// `call(buf, count, datatype)` posts the real send-receive.
#[allow(clippy::too_many_arguments)]
pub fn isendrecv_replace<C: Count>(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    source: c_int,
    (sendtag, recvtag): (c_int, c_int),
    comm: Handle,
    request: *mut c_void,
    call: impl FnOnce(*mut c_void, C, Handle) -> c_int,
) -> c_int {
    if held::any() {
        let from = Matching::Tag(source, recvtag, comm);
        if let Some(h) = held::take(from) {
            // The send goes alone, from a copy: the buffer takes the received message now,
            // while MPI may read the send's bytes until it completes.
            return match isend_copy(name, buf, count, datatype, dest, sendtag, comm, request) {
                Ok(copy) => serve_receive(name, buf, count, datatype, from, request, &h, copy),
                Err(rc) => {
                    held::restore(h);
                    rc
                }
            };
        }
    }
    let abi = crate::mpi::abi::get();
    // Only a PROC_NULL on both sides makes the call transfer nothing.
    let peer = if dest == abi.proc_null && source == abi.proc_null { abi.proc_null } else { 0 };
    match stage_as(name, buf, count, datatype, peer, Some(comm), Direction::Replace, Shape::Payload) {
        Ok(Prepared::Direct(p)) if p == buf => {
            stats::host_call();
            let rc = call(buf, C::from_i64(count), datatype);
            match fastpath::receiving() {
                true => track_host(name, Some(comm), request, None, HostRecv { buf, count, datatype }, Kind::Once, rc),
                false => rc,
            }
        }
        Ok(p) => {
            let (b, n, t) = p.message(count, datatype);
            let rc = call(b, C::from_i64(n), t);
            post(name, Some(comm), request, None, Some(p), Kind::Once, rc)
        }
        Err(rc) => rc,
    }
}

/// Posts a send of `count` `datatype` from a copy of `buf` (the staging buffer of a device
/// one, tracked with the request); gives back the copy of a host one, which the request keeps.
#[allow(clippy::too_many_arguments)]
fn isend_copy(name: &'static str, buf: *mut c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void) -> Result<Option<Vec<u8>>, c_int> {
    let Some(p) = real::pmpi() else { return Err(abi::get().err_other) };
    if c_int::try_from(count).is_err() {
        return Err(errors::raise(Some(comm), abi::get().err_count));
    }
    // SAFETY: the caller's arguments, with a copy of the buffer for MPI to read.
    let mpi_isend = |(b, n, t): (*mut c_void, i64, Handle)| unsafe { (p.isend)(b, n as c_int, t, dest, tag, comm, request.cast()) };
    let ok = |rc: c_int| if rc == 0 { Ok(()) } else { Err(rc) };
    match stage_as(name, buf, count, datatype, dest, Some(comm), Direction::Send, Shape::Payload)? {
        Prepared::Direct(b) if b == buf => {
            let span = datatype::query(datatype).and_then(|t| t.span(count)).map_err(|rc| errors::raise(Some(comm), rc))?;
            // SAFETY: the buffer holds `count` elements, which span these bytes.
            let copy = unsafe { std::slice::from_raw_parts(buf.cast::<u8>().wrapping_offset(span.offset as isize), span.len) }.to_vec();
            ok(mpi_isend((copy.as_ptr().wrapping_offset(-span.offset as isize).cast_mut().cast(), count, datatype)))?;
            Ok(Some(copy))
        }
        staged => {
            let rc = mpi_isend(staged.message(count, datatype));
            ok(post(name, Some(comm), request, Some(staged), None, Kind::Once, rc))?;
            Ok(None)
        }
    }
}

/// `MPI_Send_init` and its modes (`send`), `MPI_Recv_init`: the staging buffer is leased now
/// and filled at each start. With a fast path on, a persistent receive also keeps what it
/// matches, so that a start finds its message among those a probe took out of MPI's queue.
/// `call(buf, count, datatype)` makes the real request.
#[allow(clippy::too_many_arguments)]
pub fn persistent_init<C: Count>(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    peer: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut c_void,
    send: bool,
    call: impl FnOnce(*mut c_void, C, Handle) -> c_int,
) -> c_int {
    let dir = if send { Direction::Send } else { Direction::Recv };
    let rc = match prepare_as(name, buf, count, datatype, peer, Some(comm), dir, Shape::Payload) {
        Ok(Prepared::Direct(p)) if p == buf && !send && fastpath::receiving() => {
            let rc = call(p, C::from_i64(count), datatype);
            track_host(name, Some(comm), request, None, HostRecv { buf, count, datatype }, Kind::Persistent, rc)
        }
        Ok(Prepared::Direct(p)) => call(p, C::from_i64(count), datatype),
        Ok(p) => {
            let (b, n, t) = p.message(count, datatype);
            let rc = call(b, C::from_i64(n), t);
            let (s, r) = if send { (Some(p), None) } else { (None, Some(p)) };
            post(name, Some(comm), request, s, r, Kind::Persistent, rc)
        }
        Err(rc) => rc,
    };
    if rc != 0 || send || !fastpath::receiving() {
        return rc;
    }
    let args = RecvArgs { buf, count, datatype, source: peer, tag, comm };
    requests::match_at_start(request, name, args);
    rc
}

/// `MPI_Psend_init` and `MPI_Precv_init`: `partitions` partitions of `count` elements each.
pub fn partitioned_init(
    name: &'static str,
    buf: *mut c_void,
    partitions: c_int,
    count: i64,
    datatype: Handle,
    peer: c_int,
    comm: Handle,
    request: *mut c_void,
    send: bool,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    let total = if partitions < 0 { -1 } else { count.saturating_mul(partitions as i64) };
    let dir = if send { Direction::Send } else { Direction::Recv };
    let mut p = match prepare(name, buf, total, datatype, peer, Some(comm), dir) {
        Ok(Prepared::Direct(p)) => return call(p),
        Ok(Prepared::Staged(s)) => s,
        Err(rc) => return rc,
    };
    let geometry = datatype::query(datatype).and_then(|t| Ok((t.span(count)?, t.extent)));
    let (part, extent) = match geometry {
        Ok(g) => g,
        Err(rc) => return rc,
    };
    // Every partition arrives whole, so a receive writes back whole partitions (of the span,
    // filled first: the blocks are not cut by partition).
    if !send {
        p.back = Back::Span;
        if p.form.take().is_some() {
            p.fill = true;
        }
    }
    let parts = Partitions {
        first: part.offset - p.span.offset,
        stride: count * extent,
        len: part.len,
        delivered: vec![false; partitions as usize],
    };
    let prepared = Prepared::Staged(p);
    let rc = call(prepared.mpi_ptr());
    let (s, r) = if send { (Some(prepared), None) } else { (None, Some(prepared)) };
    post(name, Some(comm), request, s, r, Kind::Partitioned(parts), rc)
}
