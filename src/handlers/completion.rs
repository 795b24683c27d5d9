//! The calls that complete, start, free and inspect requests. When MPI reports a staged
//! receive complete, its data is copied to the device before the call returns, so the program
//! sees it at the same moment it would with a host buffer.
//!
//! Each call takes the tracked requests among its arguments (`requests::take`), calls the real
//! function, and settles them from what the call reported. A program without staged requests
//! pays one atomic load per call.

use std::ffi::{c_int, c_void};

use crate::fastpath::held;
use crate::handlers::p2p;
use crate::handlers::host;
use crate::mpi::matching::Matching;
use crate::mpi::abi::{self, Handle, UNDEFINED};
use crate::mpi::errors;
use crate::requests::watch;
use crate::requests::{self, Kind};

/// The call's return code, unless it succeeded and a copy to the device did not.
fn outcome(rc: c_int, copies: Result<(), c_int>) -> c_int {
    match copies {
        Err(e) if rc == 0 => e,
        _ => rc,
    }
}

/// The statuses MPI fills: the caller's, or ours when the caller ignores them, since a staged
/// receive needs its status to know how much arrived. A few of our own stay inline.
struct Statuses {
    inline: std::cell::UnsafeCell<std::mem::MaybeUninit<[u64; INLINE_STATUS_WORDS]>>,
    /// Our storage beyond the inline words.
    own: Vec<u64>,
    /// The caller's statuses, unless ours are used.
    caller: *mut c_void,
    mine: bool,
}

/// Four statuses of any family.
const INLINE_STATUS_WORDS: usize = 16;

impl Statuses {
    fn new(caller: *mut c_void, n: usize, ignored: bool) -> Statuses {
        if !ignored {
            let inline = std::cell::UnsafeCell::new(std::mem::MaybeUninit::uninit());
            return Statuses { inline, own: Vec::new(), caller, mine: false };
        }
        let inline = std::cell::UnsafeCell::new(std::mem::MaybeUninit::zeroed());
        let words = (n.max(1) * abi::get().status_size).div_ceil(8);
        let own = if words > INLINE_STATUS_WORDS { vec![0u64; words] } else { Vec::new() };
        Statuses { inline, own, caller, mine: true }
    }

    fn single(caller: *mut c_void) -> Statuses {
        Statuses::new(caller, 1, abi::get().is_status_ignore(caller))
    }

    fn array(caller: *mut c_void, n: c_int) -> Statuses {
        Statuses::new(caller, n.max(0) as usize, abi::get().is_statuses_ignore(caller))
    }

    fn at(&self, k: usize) -> *mut c_void {
        let base: *mut c_void = if !self.mine {
            self.caller
        } else if !self.own.is_empty() {
            self.own.as_ptr().cast_mut().cast()
        } else {
            self.inline.get().cast()
        };
        base.cast::<u8>().wrapping_add(k * abi::get().status_size).cast()
    }
}

/// Reads an `int` output argument the call has filled; `fallback` if the caller passed null.
fn out(p: *const c_int, fallback: c_int) -> c_int {
    if p.is_null() {
        fallback
    } else {
        // SAFETY: a caller's output argument that MPI has just written.
        unsafe { p.read() }
    }
}

/// The shape every completion call shares: straight through when no staged request exists;
/// else the tracked requests among `n` are taken, MPI is called with statuses it may fill
/// (`statuses` makes them from the caller's argument), and the requests are settled from what
/// the call reported: `done(rc, statuses, k)` gives request `k`'s status if it completed.
///
/// A copy that fails fails the call. A call completing several requests (`multi`) reports it
/// as MPI does: `MPI_ERR_IN_STATUS`, the error in that request's status and `MPI_SUCCESS` in
/// the other completed ones'.
fn complete(
    reqs: *mut c_void,
    n: c_int,
    caller: *mut c_void,
    multi: bool,
    statuses: impl FnOnce(*mut c_void) -> Statuses,
    call: impl FnOnce(*mut c_void) -> c_int,
    done: impl Fn(c_int, &Statuses, usize) -> Option<*mut c_void>,
) -> c_int {
    complete_into(None, reqs, n, caller, multi, statuses, call, done)
}

/// [`complete`], leaving the wait for the staged receives' copies to `later` when given.
#[allow(clippy::too_many_arguments)]
fn complete_into(
    later: Option<&mut requests::Later>,
    reqs: *mut c_void,
    n: c_int,
    caller: *mut c_void,
    multi: bool,
    statuses: impl FnOnce(*mut c_void) -> Statuses,
    call: impl FnOnce(*mut c_void) -> c_int,
    done: impl Fn(c_int, &Statuses, usize) -> Option<*mut c_void>,
) -> c_int {
    let call = match host::complete(reqs, n, caller, multi, call) {
        Ok(rc) => return rc,
        Err(call) => call,
    };
    if !requests::any() {
        return complete_watched(reqs, n, caller, multi, statuses, call, done);
    }
    requests::progress_orphans();
    let taken = requests::take(reqs, n);
    let watched = if watch::any() { watch::take(reqs, n) } else { watch::Taken::default() };
    if taken.is_empty() && watched.is_empty() {
        return call(caller);
    }
    let abi = abi::get();
    // A null request's status is MPI's to leave or empty, even when the call fails.
    let null = Nulls::of(reqs, if multi { n } else { 0 });
    let st = statuses(caller);
    let rc = call(st.at(0));
    let mut failed = requests::settle(taken, reqs, rc, |k| done(rc, &st, k), later);
    if !watched.is_empty() {
        failed.extend(watch::settle(watched, reqs, rc, |k| done(rc, &st, k)));
    }
    let Some(&(_, first)) = failed.first() else { return rc };
    if !multi || rc != 0 {
        return outcome(rc, Err(first));
    }
    for k in (0..n as usize).filter(|&k| !null.has(k)) {
        if let Some(status) = done(rc, &st, k) {
            let error = failed.iter().find(|f| f.0 == k).map_or(0, |f| f.1);
            // SAFETY: a status of the array, filled by MPI for a completed request.
            unsafe { abi.set_status_error(status, error) };
        }
    }
    abi.err_in_status
}

/// [`complete`] when the only requests cudampi knows of are watched host receives (`watch`)
/// and the caller asks for statuses, or more requests than `watch::before` keeps apart.
#[inline(never)]
fn complete_watched(
    reqs: *mut c_void,
    n: c_int,
    caller: *mut c_void,
    multi: bool,
    statuses: impl FnOnce(*mut c_void) -> Statuses,
    call: impl FnOnce(*mut c_void) -> c_int,
    done: impl Fn(c_int, &Statuses, usize) -> Option<*mut c_void>,
) -> c_int {
    let abi = abi::get();
    let watched = watch::take(reqs, n);
    if watched.is_empty() {
        return call(caller);
    }
    let null = Nulls::of(reqs, if multi { n } else { 0 });
    let st = statuses(caller);
    let rc = call(st.at(0));
    let failed = watch::settle(watched, reqs, rc, |k| done(rc, &st, k));
    let Some(&(_, first)) = failed.first() else { return rc };
    if !multi || rc != 0 {
        return outcome(rc, Err(first));
    }
    for k in (0..n as usize).filter(|&k| !null.has(k)) {
        if let Some(status) = done(rc, &st, k) {
            let error = failed.iter().find(|f| f.0 == k).map_or(0, |f| f.1);
            // SAFETY: a status of the array, filled by MPI for a completed request.
            unsafe { abi.set_status_error(status, error) };
        }
    }
    abi.err_in_status
}

/// Which requests of an array were `MPI_REQUEST_NULL` before the call; without allocating for
/// up to 64.
struct Nulls {
    bits: u64,
    more: Vec<bool>,
}

impl Nulls {
    fn of(reqs: *const c_void, n: c_int) -> Nulls {
        let abi = abi::get();
        let n = n.max(0) as usize;
        // SAFETY (the closure): the caller passes n requests.
        let is_null = |k: usize| abi.same(unsafe { abi.request_at(reqs, k) }, abi.request_null);
        match n <= 64 {
            true => Nulls { bits: (0..n).filter(|&k| is_null(k)).fold(0, |b, k| b | 1 << k), more: Vec::new() },
            false => Nulls { bits: 0, more: (0..n).map(is_null).collect() },
        }
    }

    fn has(&self, k: usize) -> bool {
        match self.more.is_empty() {
            true => k < 64 && self.bits & (1 << k) != 0,
            false => self.more[k],
        }
    }
}

/// The status of request `k` if it is the one a single-completion call reported as `index`.
/// Runs a completion call after settling the collectives on NCCL among its requests
/// (`requests::gate`): the waiting calls wait for them, the others look once. A collective
/// that failed is the call's error; its request completes in the call all the same.
#[inline(always)]
fn gated(reqs: *const c_void, n: c_int, block: bool, call: impl FnOnce() -> c_int) -> c_int {
    if !requests::on_gpu::any() {
        return call();
    }
    let found = requests::gate(reqs, n, block);
    let rc = call();
    found.error.unwrap_or(rc)
}

pub fn wait(name: &'static str, request: *mut c_void, status: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    gated(request, 1, true, || wait_tracked(name, request, status, call))
}

pub fn test(name: &'static str, request: *mut c_void, flag: *mut c_int, status: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    gated(request, 1, false, || test_tracked(name, request, flag, status, call))
}

pub fn waitall(name: &'static str, count: c_int, requests: *mut c_void, statuses: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    gated(requests, count, true, || waitall_tracked(name, count, requests, statuses, call))
}

pub fn testall(
    name: &'static str,
    count: c_int,
    requests: *mut c_void,
    flag: *mut c_int,
    statuses: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    gated(requests, count, false, || testall_tracked(name, count, requests, flag, statuses, call))
}

pub fn testany(
    name: &'static str,
    count: c_int,
    requests: *mut c_void,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    gated(requests, count, false, || testany_tracked(name, count, requests, index, flag, status, call))
}

/// While a collective on NCCL among the requests runs, MPI must not wait (it would wait for
/// the empty message that only its end sends): the waiting calls test (`test`, one test call:
/// `Some(rc)` once it completed something) until a request completes. `None` once no such
/// collective is left among them: MPI's own wait may then wait.
fn test_while_gated(reqs: *const c_void, n: c_int, mut test: impl FnMut(&crate::mpi::real::Pmpi) -> Option<c_int>) -> Option<c_int> {
    let p = crate::mpi::real::pmpi()?;
    while requests::on_gpu::any() {
        let found = requests::gate(reqs, n, false);
        if found.error.is_some() {
            return found.error;
        }
        if found.left == 0 {
            break;
        }
        if let Some(rc) = test(p) {
            return Some(rc);
        }
        std::thread::yield_now();
    }
    None
}

pub fn waitany(
    name: &'static str,
    count: c_int,
    requests: *mut c_void,
    index: *mut c_int,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    let tested = test_while_gated(requests, count, |p| {
        let mut flag: c_int = 0;
        let flag_at: *mut c_int = &mut flag;
        // SAFETY: the caller's arguments, and our flag.
        let rc = testany_tracked(name, count, requests, index, flag_at, status, |st| unsafe { (p.testany)(count, requests, index, flag_at, st) });
        (rc != 0 || flag != 0).then_some(rc)
    });
    tested.unwrap_or_else(|| waitany_tracked(name, count, requests, index, status, call))
}

/// `MPI_Waitsome` and `MPI_Testsome`; see [`test_while_gated`].
pub fn some(
    name: &'static str,
    incount: c_int,
    requests: *mut c_void,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    let testing = name.as_bytes().windows(8).any(|w| w.eq_ignore_ascii_case(b"testsome"));
    if testing {
        return gated(requests, incount, false, || some_tracked(name, incount, requests, outcount, indices, statuses, call));
    }
    let tested = test_while_gated(requests, incount, |p| {
        // SAFETY: the caller's arguments.
        let rc = some_tracked("MPI_Testsome", incount, requests, outcount, indices, statuses, |st| unsafe { (p.testsome)(incount, requests, outcount, indices, st) });
        // SAFETY: the caller's output argument, which MPI wrote.
        (rc != 0 || (!outcount.is_null() && unsafe { *outcount } != 0)).then_some(rc)
    });
    tested.unwrap_or_else(|| some_tracked(name, incount, requests, outcount, indices, statuses, call))
}

pub fn request_get_status(name: &'static str, request: Handle, flag: *mut c_int, status: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    let one = [request];
    gated(one.as_ptr().cast(), 1, false, || request_get_status_tracked(name, request, flag, status, call))
}

/// MPI-4.1 `MPI_Request_get_status_any`.
pub fn request_get_status_any(
    name: &'static str,
    count: c_int,
    requests: *mut c_void,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    gated(requests, count, false, || request_get_status_any_tracked(name, count, requests, index, flag, status, call))
}

/// MPI-4.1 `MPI_Request_get_status_all`.
pub fn request_get_status_all(
    name: &'static str,
    count: c_int,
    requests: *mut c_void,
    flag: *mut c_int,
    statuses: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    gated(requests, count, false, || request_get_status_all_tracked(name, count, requests, flag, statuses, call))
}

/// MPI-4.1 `MPI_Request_get_status_some`.
pub fn request_get_status_some(
    name: &'static str,
    incount: c_int,
    requests: *mut c_void,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    gated(requests, incount, false, || request_get_status_some_tracked(name, incount, requests, outcount, indices, statuses, call))
}

fn if_index(index: c_int, st: &Statuses, k: usize) -> Option<*mut c_void> {
    (index >= 0 && k == index as usize).then(|| st.at(0))
}

fn wait_tracked(_name: &'static str, request: *mut c_void, status: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    let abi = abi::get();
    // SAFETY: the caller's request.
    let device = requests::any_enveloped() && !request.is_null() && requests::with(unsafe { abi.request_at(request, 0) }, |e| e.active && e.enveloped() && e.host.is_none()) == Some(true);
    let _listening = if device { crate::fastpath::listening(None, abi.any_source, abi.any_tag) } else { None };
    complete(request, 1, status, false, Statuses::single, call, |_, st, _| Some(st.at(0)))
}

fn test_tracked(_name: &'static str, request: *mut c_void, flag: *mut c_int, status: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    if not_yet(request, 1) {
        put(flag, 0);
        return 0;
    }
    complete(request, 1, status, false, Statuses::single, call, |rc, st, _| (rc == 0 && out(flag, 0) != 0).then(|| st.at(0)))
}

/// The calls that must not wait (`MPI_Test`, `Testall`, `Testany`, `Testsome` and
/// `MPI_Request_get_status` in all its forms): while one of their requests is a send from the
/// program's device buffer whose receiver has not copied yet (and the sender's patience lasts),
/// they report nothing complete, after landing what peers sent this rank meanwhile. Once the
/// patience is spent the send is taken back before the call, so a request reported complete
/// never leaves the buffer to a receiver still to come.
fn not_yet(reqs: *const c_void, n: c_int) -> bool {
    if !requests::any() {
        return false;
    }
    if requests::send_waiting(reqs, n) {
        crate::fastpath::progress();
        if requests::send_waiting(reqs, n) {
            return true;
        }
    }
    requests::finish_sends(reqs, n);
    false
}

/// Writes an `int` output argument unless the caller passed null.
fn put(p: *mut c_int, value: c_int) {
    if !p.is_null() {
        // SAFETY: a caller's output argument.
        unsafe { p.write(value) };
    }
}

/// The persistent receives among `n` that a start served from a held message: MPI never
/// started them, and `MPI_Waitany`, `MPI_Testany`, `MPI_Waitsome` and `MPI_Testsome` skip
/// inactive requests, so those calls report these themselves, without calling MPI (which may
/// report any completed request). Each `(index, served)` is completed.
fn served_now(reqs: *const c_void, n: c_int, first_only: bool) -> Vec<(usize, requests::Served)> {
    let abi = abi::get();
    let mut found = requests::served_idle(reqs, n);
    if first_only {
        found.truncate(1);
    }
    // SAFETY: served_idle found these indices among the caller's n requests.
    found.into_iter().filter_map(|k| requests::complete_served(unsafe { abi.request_at(reqs, k) }, false).map(|s| (k, s))).collect()
}

/// Reports the first served request of a single-completion call (index, flag, status).
fn report_one(requests: *const c_void, count: c_int, index: *mut c_int, flag: *mut c_int, status: *mut c_void) -> Option<c_int> {
    let (k, s) = served_now(requests, count, true).pop()?;
    put(index, k as c_int);
    put(flag, 1);
    s.report(status);
    Some(s.rc)
}

fn waitany_tracked(
    _name: &'static str,
    count: c_int,
    requests: *mut c_void,
    index: *mut c_int,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    if let Some(rc) = report_one(requests, count, index, std::ptr::null_mut(), status) {
        return rc;
    }
    complete(requests, count, status, false, Statuses::single, call, |_, st, k| if_index(out(index, UNDEFINED), st, k))
}

fn testany_tracked(
    _name: &'static str,
    count: c_int,
    requests: *mut c_void,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    if let Some(rc) = report_one(requests, count, index, flag, status) {
        return rc;
    }
    if not_yet(requests, count) {
        put(flag, 0);
        put(index, UNDEFINED);
        return 0;
    }
    let reported = move || if out(flag, 0) != 0 { out(index, UNDEFINED) } else { UNDEFINED };
    complete(requests, count, status, false, Statuses::single, call, |_, st, k| if_index(reported(), st, k))
}

/// Which requests of an all-call completed: all of them on success; with
/// `MPI_ERR_IN_STATUS`, those whose status error is not `MPI_ERR_PENDING`.
fn all_done(rc: c_int, st: &Statuses, k: usize) -> Option<*mut c_void> {
    let abi = abi::get();
    if rc == 0 {
        return Some(st.at(k));
    }
    // SAFETY: MPI filled every status of the array when it returned MPI_ERR_IN_STATUS.
    let pending = unsafe { abi.status_error(st.at(k)) } == abi.err_pending;
    (errors::class(rc) == abi.err_in_status && !pending).then(|| st.at(k))
}

fn waitall_tracked(name: &'static str, count: c_int, requests: *mut c_void, statuses: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    if requests::any_enveloped() && !requests.is_null() && count > 1 {
        return waitall_in_order(name, count, requests, statuses, call);
    }
    complete(requests, count, statuses, true, |c| Statuses::array(c, count), call, all_done)
}

/// `MPI_Waitall` with the fast paths on. A receive that gets an envelope brings its data only
/// when cudampi completes it, and the real `MPI_Waitall` returns only once every request is
/// done: a window of chunked receives would take the first message's chunks only after the
/// last envelope arrived, while the sender, its pinned buffers spent, waits for the first
/// message's chunks to be taken. So the tracked receives that an envelope may reach are
/// completed first, one at a time in the array's order, each as `MPI_Wait` would; the real
/// call completes the rest. A receive that fails stops that: the call then reports
/// `MPI_ERR_IN_STATUS`, the error in that receive's status and success in the others'.
///
/// The receives' direct copies are queued in one scope (`fastpath::queue_begin`) and run back
/// to back; what is queued is waited for before blocking on a receive whose message has not
/// arrived, since its sender may first wait for one of those copies.
fn waitall_in_order(_name: &'static str, count: c_int, reqs: *mut c_void, caller: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    let Some(p) = crate::mpi::real::pmpi() else { return call(caller) };
    let abi = abi::get();
    let n = count as usize;
    // SAFETY (both closures): the caller passes `count` requests.
    let handle = |k: usize| unsafe { abi.request_at(reqs, k) };
    let slot = |k: usize| reqs.cast::<u8>().wrapping_add(k * abi.request_size).cast::<c_void>();
    let posted: Vec<bool> = (0..n).map(|k| !abi.same(handle(k), abi.request_null)).collect();
    let mut early: Vec<(usize, abi::Status, c_int)> = Vec::new();
    let keys: Vec<Handle> = (0..n).map(|k| abi.key(handle(k))).collect();
    // Only a receive large enough for an envelope comes first: the others complete in the real
    // call, all copies after all messages, as without the fast paths. Completed one at a time,
    // a window of small receives had each copy take turns with the peer's on a GPU the two
    // share (4 KiB both ways at once: 43 MB/s against 85-240 staged). Any receive an envelope
    // may reach must come first, not only chunked ones: MPICH hands every send that completes
    // at once the same request handle, so a sender's next `MPI_Isend` may complete the
    // previous send from its buffer there, and wait for this receive's copy.
    // The copies of the receives that arrive staged are waited for once, after the loop.
    let mut later = requests::Later::new();
    crate::fastpath::queue_begin();
    // Its senders on the node see it waiting from its first device receive on (`listening`).
    let mut listening = None;
    for k in (0..n).filter(|&k| posted[k]) {
        let Some((true, once, device)) = requests::with(handle(k), |e| (e.active && e.enveloped(), matches!(e.kind, Kind::Once), e.host.is_none())) else {
            continue;
        };
        if device && listening.is_none() {
            listening = crate::fastpath::listening(None, abi.any_source, abi.any_tag);
        }
        let mut status = abi::Status::zeroed();
        if crate::fastpath::queue_pending() {
            // Asked only of one-shot requests: MPICH 5.0 reports an empty status at the
            // completion of a persistent receive that `MPI_Request_get_status` saw complete.
            let mut arrived = 0;
            // SAFETY: request k of the array, not freed by the call; a status of our own.
            if !once || unsafe { (p.request_get_status)(handle(k), &mut arrived, status.as_mut_ptr()) } != 0 || arrived == 0 {
                crate::fastpath::queue_flush();
            }
        }
        // SAFETY: request k of the array and a status of our own.
        let wait = |st| unsafe { (p.wait)(slot(k), st) };
        let rc = complete_into(Some(&mut later), slot(k), 1, status.as_mut_ptr(), false, Statuses::single, wait, |_, st, _| Some(st.at(0)));
        early.push((k, status, rc));
        if rc != 0 {
            break;
        }
    }
    drop(listening);
    for (h, error) in later.finish().into_iter().chain(crate::fastpath::queue_end()) {
        if let Some(e) = early.iter_mut().find(|e| keys[e.0] == h && e.2 == 0) {
            e.2 = error;
        }
    }
    let rc = complete(reqs, count, caller, true, |c| Statuses::array(c, count), call, all_done);
    let ignored = abi.is_statuses_ignore(caller);
    let caller_st = Statuses::new(caller, n, false);
    let at = |k: usize| caller_st.at(k);
    if !ignored {
        for (k, status, _) in early.iter_mut() {
            // SAFETY: the caller's status k, which the real call left empty (its request was
            // already null), takes the status of the receive's own completion.
            unsafe { std::ptr::copy_nonoverlapping(status.as_mut_ptr().cast::<u8>(), at(*k).cast::<u8>(), abi.status_size) };
        }
    }
    let Some(&(failed, _, error)) = early.iter().find(|e| e.2 != 0) else { return rc };
    if rc != 0 && errors::class(rc) != abi.err_in_status {
        return rc;
    }
    if !ignored {
        for k in (0..n).filter(|&k| posted[k]) {
            // The real call set the errors of what it completed when it failed itself.
            if rc != 0 && !early.iter().any(|e| e.0 == k) {
                continue;
            }
            // SAFETY: a status of the caller's array, of a request that completed.
            unsafe { abi.set_status_error(at(k), if k == failed { error } else { 0 }) };
        }
    }
    abi.err_in_status
}

fn testall_tracked(
    _name: &'static str,
    count: c_int,
    requests: *mut c_void,
    flag: *mut c_int,
    statuses: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    if not_yet(requests, count) {
        put(flag, 0);
        return 0;
    }
    let done = move |rc| out(flag, 0) != 0 || (rc != 0 && errors::class(rc) == abi::get().err_in_status);
    complete(requests, count, statuses, true, |c| Statuses::array(c, count), call, |rc, st, k| {
        if done(rc) {
            all_done(rc, st, k)
        } else {
            None
        }
    })
}

/// [`some`] once the collectives on NCCL are settled.
fn some_tracked(
    name: &'static str,
    incount: c_int,
    requests: *mut c_void,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    let served = served_now(requests, incount, false);
    if !served.is_empty() {
        let abi = abi::get();
        let ignored = abi.is_statuses_ignore(statuses);
        let st = Statuses::new(statuses, served.len(), false);
        let failed = served.iter().any(|(_, s)| s.rc != 0);
        for (j, (k, s)) in served.iter().enumerate() {
            if !indices.is_null() {
                // SAFETY: the caller's indices hold incount entries.
                unsafe { indices.add(j).write(*k as c_int) };
            }
            if !ignored {
                s.write(st.at(j));
                if failed {
                    // SAFETY: a status of the caller's array.
                    unsafe { abi.set_status_error(st.at(j), s.rc) };
                }
            }
        }
        put(outcount, served.len() as c_int);
        return if failed { abi.err_in_status } else { 0 };
    }
    let testing = name.as_bytes().windows(8).any(|w| w.eq_ignore_ascii_case(b"testsome"));
    if testing && not_yet(requests, incount) {
        put(outcount, 0);
        return 0;
    }
    complete(requests, incount, statuses, true, |c| Statuses::array(c, incount), call, |_, st, k| {
        some_status(incount, outcount, indices, st, k)
    })
}

/// The shape the inspection calls share (`MPI_Request_get_status` and its MPI-4.1 array
/// forms): they report completion without freeing, so the staged receives among the requests
/// stay tracked, and those reported complete have their data copied now, once. Arguments as
/// for [`complete`].
fn inspect(
    reqs: *const c_void,
    n: c_int,
    caller: *mut c_void,
    statuses: impl FnOnce(*mut c_void) -> Statuses,
    call: impl FnOnce(*mut c_void) -> c_int,
    done: impl Fn(c_int, &Statuses, usize) -> Option<*mut c_void>,
) -> c_int {
    if !reqs.is_null() {
        watch::promote(reqs, n);
    }
    if !requests::any() || reqs.is_null() || n <= 0 {
        return call(caller);
    }
    requests::progress_orphans();
    let abi = abi::get();
    let found: Vec<(usize, Handle)> = (0..n as usize)
        // SAFETY: the caller passes n requests.
        .map(|i| (i, unsafe { abi.request_at(reqs, i) }))
        .filter(|&(_, h)| requests::with(h, |e| e.active && !e.delivered && (e.recv.is_some() || e.host.is_some())).unwrap_or(false))
        .collect();
    if found.is_empty() {
        return call(caller);
    }
    let st = statuses(caller);
    let rc = call(st.at(0));
    let mut result = Ok(());
    for (i, h) in found {
        if let Some(status) = done(rc, &st, i) {
            let r = requests::deliver_early(h, status);
            if result.is_ok() {
                result = r;
            }
        }
    }
    outcome(rc, result)
}

fn request_get_status_tracked(_name: &'static str, request: Handle, flag: *mut c_int, status: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    if !requests::served_idle([request].as_ptr().cast(), 1).is_empty() {
        if let Some(s) = requests::complete_served(request, true) {
            put(flag, 1);
            s.report(status);
            return 0;
        }
    }
    // The handle by value, read back as a one-element array (little-endian, so an `int`
    // handle reads the same).
    let one = [request];
    if not_yet(one.as_ptr().cast(), 1) {
        put(flag, 0);
        return 0;
    }
    inspect(one.as_ptr().cast(), 1, status, Statuses::single, call, |rc, st, _| (rc == 0 && out(flag, 0) != 0).then(|| st.at(0)))
}

/// [`request_get_status_any`] once the collectives on NCCL are settled.
fn request_get_status_any_tracked(
    _name: &'static str,
    count: c_int,
    requests: *mut c_void,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    if not_yet(requests, count) {
        put(flag, 0);
        put(index, UNDEFINED);
        return 0;
    }
    let reported = move |rc| if rc == 0 && out(flag, 0) != 0 { out(index, UNDEFINED) } else { UNDEFINED };
    inspect(requests, count, status, Statuses::single, call, |rc, st, k| if_index(reported(rc), st, k))
}

/// [`request_get_status_all`] once the collectives on NCCL are settled.
fn request_get_status_all_tracked(
    _name: &'static str,
    count: c_int,
    requests: *mut c_void,
    flag: *mut c_int,
    statuses: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    if not_yet(requests, count) {
        put(flag, 0);
        return 0;
    }
    inspect(requests, count, statuses, |c| Statuses::array(c, count), call, |rc, st, k| (rc == 0 && out(flag, 0) != 0).then(|| st.at(k)))
}

/// [`request_get_status_some`] once the collectives on NCCL are settled.
fn request_get_status_some_tracked(
    _name: &'static str,
    incount: c_int,
    requests: *mut c_void,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    if not_yet(requests, incount) {
        put(outcount, 0);
        return 0;
    }
    inspect(requests, incount, statuses, |c| Statuses::array(c, incount), call, |_, st, k| {
        some_status(incount, outcount, indices, st, k)
    })
}

/// Request `k`'s status if a `...some` call reported it: status `j` belongs to request
/// `indices[j]`.
fn some_status(incount: c_int, outcount: *const c_int, indices: *const c_int, st: &Statuses, k: usize) -> Option<*mut c_void> {
    reported(incount, outcount, indices).iter().position(|&i| i as usize == k).map(|j| st.at(j))
}

/// The indices a `...some` call reported.
fn reported<'a>(incount: c_int, outcount: *const c_int, indices: *const c_int) -> &'a [c_int] {
    let n = out(outcount, UNDEFINED).clamp(0, incount.max(0)) as usize;
    if n == 0 || indices.is_null() {
        return &[];
    }
    // SAFETY: MPI wrote `n` indices.
    unsafe { std::slice::from_raw_parts(indices, n) }
}

pub fn request_free(_name: &'static str, request: *mut c_void, call: impl FnOnce() -> c_int) -> c_int {
    if !request.is_null() {
        watch::promote(request, 1);
    }
    if !requests::any() || request.is_null() {
        return call();
    }
    let abi = abi::get();
    // SAFETY: non-null; the caller passes one request.
    let h = unsafe { abi.request_at(request, 0) };
    let Some(e) = requests::remove(h) else { return call() };
    if e.active {
        requests::orphan(h, e);
        // SAFETY: as above; MPI_Request_free sets the caller's handle to MPI_REQUEST_NULL.
        unsafe { abi.set_request_null(request, 0) };
        return 0;
    }
    let rc = call();
    if rc != 0 {
        requests::put_back(h, e);
    }
    rc
}

pub fn start(name: &'static str, request: *mut c_void, call: impl FnOnce() -> c_int) -> c_int {
    startall(name, 1, request, call)
}

pub fn startall(name: &'static str, count: c_int, requests: *mut c_void, call: impl FnOnce() -> c_int) -> c_int {
    if !requests::any() || requests.is_null() || count <= 0 {
        return call();
    }
    let abi = abi::get();
    let mut started = Vec::new();
    let mut served = Vec::new();
    for i in 0..count as usize {
        // SAFETY: the caller passes `count` requests.
        let h = unsafe { abi.request_at(requests, i) };
        let Some(mut e) = requests::remove(h) else { continue };
        if serve_at_start(name, &mut e) {
            requests::put_back(h, e);
            served.push(i);
            continue;
        }
        let filled = e.start();
        requests::put_back(h, e);
        if let Err(rc) = filled {
            undo_start(&started);
            return rc;
        }
        started.push(h);
    }
    let rc = if served.is_empty() { call() } else { start_others(requests, count, &served) };
    if rc != 0 {
        undo_start(&started);
    }
    rc
}

/// A persistent receive whose message a probe already took out of MPI's queue gets it now, as
/// a receive posted at this start would have; MPI's request is then not started, and the
/// completion reports the served receive (`requests::Served`).
fn serve_at_start(name: &'static str, e: &mut requests::Entry) -> bool {
    let Some(a) = e.matching.filter(|_| held::any()) else { return false };
    let from = Matching::Tag(a.source, a.tag, a.comm);
    let Some(h) = held::take(from) else { return false };
    let mut status = abi::Status::zeroed();
    let rc = p2p::recv_into(name, a.buf, a.count, a.datatype, from, status.as_mut_ptr(), |p, n: i64, t, st| h.unpack(p, n, t, st));
    e.serve(status, rc, true);
    true
}

/// Starts the requests of the array that were not served at their start.
fn start_others(requests: *const c_void, count: c_int, served: &[usize]) -> c_int {
    let abi = abi::get();
    let Some(p) = crate::mpi::real::pmpi() else { return abi.err_other };
    let mut rest = Vec::with_capacity(count as usize * abi.request_size);
    for i in (0..count as usize).filter(|i| !served.contains(i)) {
        // SAFETY: element i of the caller's array, of the family's handle width.
        rest.extend_from_slice(unsafe { std::slice::from_raw_parts(requests.cast::<u8>().add(i * abi.request_size), abi.request_size) });
    }
    if rest.is_empty() {
        return 0;
    }
    // SAFETY: an array of the caller's requests in the family's width.
    unsafe { (p.startall)((rest.len() / abi.request_size) as c_int, rest.as_mut_ptr().cast()) }
}

fn undo_start(handles: &[Handle]) {
    for &h in handles {
        requests::with(h, |e| e.active = false);
    }
}

pub fn pready(name: &'static str, partition: c_int, request: Handle, call: impl FnOnce() -> c_int) -> c_int {
    pready_each(name, request, std::iter::once(partition), call)
}

pub fn pready_range(name: &'static str, low: c_int, high: c_int, request: Handle, call: impl FnOnce() -> c_int) -> c_int {
    pready_each(name, request, low..=high, call)
}

pub fn pready_list(name: &'static str, length: c_int, partitions: *const c_int, request: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let list: &[c_int] = if partitions.is_null() || length <= 0 {
        &[]
    } else {
        // SAFETY: the caller passes `length` partition numbers.
        unsafe { std::slice::from_raw_parts(partitions, length as usize) }
    };
    pready_each(name, request, list.iter().copied(), call)
}

/// Copies each partition of a staged partitioned send to the host before MPI is told it is
/// ready. Partition numbers out of range go to MPI untouched, which rejects them.
fn pready_each(name: &'static str, request: Handle, partitions: impl Iterator<Item = c_int>, call: impl FnOnce() -> c_int) -> c_int {
    if !requests::any() {
        return call();
    }
    for i in partitions {
        let copy = requests::with(request, |e| match (&e.kind, &e.send) {
            (Kind::Partitioned(p), Some(s)) if e.active && i >= 0 && (i as usize) < p.delivered.len() => {
                Some((s.window(), p.range(i as usize), e.comm))
            }
            _ => None,
        });
        let Some(Some((window, (at, len), comm))) = copy else { break };
        if let Err(rc) = window.to_host(name, comm, at, len) {
            return rc;
        }
    }
    call()
}

/// When MPI reports a partition of a staged partitioned receive arrived, its bytes are copied
/// to the device before the caller hears of it.
pub fn parrived(name: &'static str, request: Handle, partition: c_int, flag: *mut c_int, call: impl FnOnce() -> c_int) -> c_int {
    let rc = call();
    if rc != 0 || !requests::any() || out(flag, 0) == 0 {
        return rc;
    }
    let copy = requests::with(request, |e| match (&mut e.kind, &e.recv) {
        (Kind::Partitioned(p), Some(r)) if e.active && partition >= 0 && (partition as usize) < p.delivered.len() => {
            let first = !std::mem::replace(&mut p.delivered[partition as usize], true);
            first.then(|| (r.window(), p.range(partition as usize), e.comm))
        }
        _ => None,
    });
    match copy {
        Some(Some((window, (at, len), comm))) => outcome(rc, window.to_device(name, comm, at, len)),
        _ => rc,
    }
}
