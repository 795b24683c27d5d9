//! Messages cudampi took out of MPI's queue to read them, so that probes tell the true size.
//!
//! An envelope's size is not the size of the message it stands for, and only its content tells
//! an envelope from a program's own message of the same size. MPI cannot put a received message
//! back, so a probe that finds an envelope-sized message from a rank that may send envelopes
//! receives it:
//! - `MPI_Probe`/`MPI_Iprobe` receive it, with every earlier message from the same source on the
//!   communicator, and hold them here in arrival order. What is held from a source is always
//!   the front of that source's queue, so a receive that finds its match here takes the message
//!   MPI would have given it.
//! - `MPI_Mprobe`/`MPI_Improbe` receive the matched message and hand out a message handle of
//!   cudampi's own, which `MPI_Mrecv`/`MPI_Imrecv` recognise.
//!
//! While anything is held, receives look here first. A held message is unpacked into the
//! receive's buffer where MPI would have written it, and the receive completes as if MPI had
//! delivered it (an envelope then lands as usual). A nonblocking receive served from here is
//! complete at once: its request is a generalized request, already completed. A persistent
//! receive is served at its start and its request reports it at completion without MPI ever
//! starting it; `MPI_Isendrecv` and `MPI_Isendrecv_replace` post their send alone and the
//! send's request reports the served receive (`requests::Served`). Partitioned receives need
//! not look here: only partitioned sends match them, and those never send envelopes.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

use super::envelope::{self, Envelope};
use super::peers;
use crate::mpi::matching::Matching;
use crate::mpi::abi::{self, Family, Handle};
use crate::mpi::{datatype, errors, real};
use crate::staging::stage::{received_bytes, OwnStatus};

pub struct Held {
    comm: Handle,
    source: c_int,
    tag: c_int,
    /// The message as MPI delivered it, received as `MPI_PACKED`.
    data: Vec<u8>,
    /// Its true size: the envelope's when it is one.
    bytes: usize,
    /// Held after every message with a smaller number.
    number: u64,
}

/// Messages held so far: each one's number, which keeps the queue's order when one goes back.
static HELD: AtomicU64 = AtomicU64::new(0);

impl Held {
    fn new(comm: Handle, source: c_int, tag: c_int, data: Vec<u8>) -> Held {
        let bytes = if data.len() == envelope::BYTES {
            // SAFETY: data holds BYTES bytes.
            match unsafe { Envelope::read(data.as_ptr().cast()) } {
                Some(e) => e.bytes as usize,
                None => data.len(),
            }
        } else {
            data.len()
        };
        Held { comm, source, tag, data, bytes, number: HELD.fetch_add(1, Relaxed) }
    }

    fn matches(&self, source: c_int, tag: c_int, comm: Handle) -> bool {
        let abi = abi::get();
        abi.same(self.comm, comm) && (source == abi.any_source || source == self.source) && (tag == abi.any_tag || tag == self.tag)
    }

    /// Fills a probe's status as MPI would for this message.
    fn describe(&self, status: *mut c_void) {
        let Some(p) = real::pmpi() else { return };
        let abi = abi::get();
        // SAFETY: a full status of the caller's or cudampi's own.
        unsafe {
            abi.set_status_source_tag(status, self.source, self.tag);
            (p.status_set_elements_x)(status, abi.byte, self.bytes as i64);
            (p.status_set_cancelled)(status, 0);
        }
    }

    /// Writes the message into a receive buffer of `count` `datatype` (host memory: the
    /// program's buffer or its staging buffer) where MPI would have written it, and fills
    /// `status` as MPI would have. Returns the receive's result.
    pub fn unpack(&self, buf: *mut c_void, count: i64, datatype: Handle, status: *mut c_void) -> c_int {
        let abi = abi::get();
        let Some(p) = real::pmpi() else { return abi.err_other };
        let t = match datatype::query(datatype) {
            Ok(t) => t,
            Err(rc) => return rc,
        };
        let size = t.size.max(0) as usize;
        let capacity = size.saturating_mul(count.max(0) as usize);
        let fit = self.data.len().min(capacity);
        let mut rc = 0;
        if t.named {
            // SAFETY: the buffer holds `count` elements, at least `fit` bytes.
            unsafe { std::ptr::copy_nonoverlapping(self.data.as_ptr(), buf.cast::<u8>(), fit) };
        } else if let Some(whole) = fit.checked_div(size) {
            // Whole elements in the datatype's own order, then the bytes of a last, partial
            // element along its runs, as MPI fills a receive that ends mid-element.
            if whole > 0 {
                let (Ok(inbytes), Ok(elements)) = (c_int::try_from(whole * size), c_int::try_from(whole)) else {
                    return errors::raise(Some(self.comm), abi.err_count);
                };
                let mut position: c_int = 0;
                // SAFETY: `data` holds `inbytes` packed bytes; the buffer holds `elements` elements.
                rc = unsafe { (p.unpack)(self.data.as_ptr().cast(), inbytes, &mut position, buf, elements, datatype, self.comm) };
            }
            if rc == 0 && fit > whole * size {
                let runs = match datatype::element_runs(datatype, &t) {
                    Ok(r) => r,
                    Err(e) => return e,
                };
                let element = buf.cast::<u8>().wrapping_offset((whole as i64 * t.extent) as isize);
                let mut left = &self.data[whole * size..fit];
                for (at, len) in runs {
                    let n = len.min(left.len());
                    // SAFETY: the run lies within element `whole` of the buffer, which holds `count`.
                    unsafe { std::ptr::copy_nonoverlapping(left.as_ptr(), element.wrapping_offset(at as isize), n) };
                    left = &left[n..];
                    if left.is_empty() {
                        break;
                    }
                }
            }
        }
        if !status.is_null() && !abi.is_status_ignore(status) {
            // SAFETY: a full status.
            unsafe {
                abi.set_status_source_tag(status, self.source, self.tag);
                (p.status_set_elements_x)(status, abi.byte, fit as i64);
                (p.status_set_cancelled)(status, 0);
            }
        }
        if rc == 0 && self.data.len() > capacity {
            rc = errors::raise(Some(self.comm), abi.err_truncate);
        }
        rc
    }
}

struct State {
    /// Held by probes, in the order they were received.
    queue: Vec<Held>,
    /// Handed out by matched probes, under their message handles.
    messages: Vec<(Handle, Held)>,
    next: usize,
}

static STATE: Mutex<State> = Mutex::new(State { queue: Vec::new(), messages: Vec::new(), next: 0 });
/// Messages in `STATE`: receives look there only when some are.
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Probes taking messages out of MPI's queue now (`pull`): a receive that looks while one is
/// under way waits for it in `take`, instead of going to MPI for a message being taken.
static PULLING: AtomicUsize = AtomicUsize::new(0);

#[inline(always)]
pub fn any() -> bool {
    COUNT.load(Relaxed) != 0 || PULLING.load(Relaxed) != 0
}

/// Whether threads may call MPI at once (`MPI_THREAD_MULTIPLE`), asked once.
fn concurrent() -> bool {
    static LEVEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| real::calls_overlap() == Some(true))
}

/// Message handles cudampi hands out, never equal to one of the library's: MPICH's `int`
/// handles with the kind bits clear (no valid handle has them clear), and elsewhere addresses
/// inside this array, which no MPI object occupies.
const HANDLES: usize = 4096;
static HANDLE_SPACE: [u8; HANDLES] = [0; HANDLES];

fn message_handle(i: usize) -> Handle {
    match abi::get().family {
        Family::Mpich => 0x0cd0_0000 + i,
        _ => HANDLE_SPACE.as_ptr() as usize + i,
    }
}

/// The held message a receive matches, taken out.
pub fn take(from: Matching) -> Option<Held> {
    let abi = abi::get();
    let mut s = state();
    let held = match from {
        Matching::Tag(source, tag, comm) => {
            let i = s.queue.iter().position(|h| h.matches(source, tag, comm))?;
            s.queue.remove(i)
        }
        Matching::Message(message) => {
            if message.is_null() {
                return None;
            }
            // SAFETY: the caller's MPI_Message.
            let handle = unsafe { abi.handle_at(message) };
            let i = s.messages.iter().position(|(h, _)| abi.same(*h, handle))?;
            // SAFETY: as above; MPI_Mrecv sets the handle to MPI_MESSAGE_NULL.
            unsafe { abi.set_handle(message, abi.message_null) };
            s.messages.remove(i).1
        }
    };
    COUNT.fetch_sub(1, Relaxed);
    Some(held)
}

/// Puts back a message taken for a receive that failed before it used it, where it was in the
/// queue, so that no message is lost and the order MPI gave them stays.
pub fn restore(held: Held) {
    let mut s = state();
    let at = s.queue.iter().position(|h| h.number > held.number).unwrap_or(s.queue.len());
    s.queue.insert(at, held);
    COUNT.fetch_add(1, Relaxed);
}

/// Gives a message handle for `held` and stores it in `message`.
fn hand_out(s: &mut State, held: Held, message: *mut c_void) -> Result<(), c_int> {
    let abi = abi::get();
    let free = (0..HANDLES).map(|k| (s.next + k) % HANDLES).find(|&i| !s.messages.iter().any(|(h, _)| *h == message_handle(i)));
    let Some(i) = free else { return Err(abi.err_intern) };
    s.next = i + 1;
    s.messages.push((message_handle(i), held));
    COUNT.fetch_add(1, Relaxed);
    // SAFETY: the caller's MPI_Message.
    unsafe { abi.set_handle(message, message_handle(i)) };
    Ok(())
}

/// Whether the message a status describes may be an envelope: envelope-sized, from another
/// rank of this node that may send them.
fn may_be_envelope(comm: Handle, status: *mut c_void) -> bool {
    if received_bytes(status) != Some(envelope::BYTES) {
        return false;
    }
    let Some(peers) = peers::get() else { return false };
    // SAFETY: a status MPI filled.
    let (source, _) = unsafe { abi::get().status_source_tag(status) };
    peers.world_rank(comm, source).is_some_and(|w| peers.may_send_here(w))
}

/// Receives the message `message` names (of `bytes` bytes) as packed bytes.
fn receive(message: *mut c_void, bytes: usize) -> Result<Vec<u8>, c_int> {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return Err(abi.err_other) };
    let Ok(n) = c_int::try_from(bytes) else { return Err(abi.err_count) };
    let mut data = vec![0u8; bytes];
    let mut status = abi::Status::zeroed();
    // SAFETY: a matched message of `bytes` bytes and a buffer of that size.
    match unsafe { (p.mrecv)(data.as_mut_ptr().cast(), n, abi.packed, message, status.as_mut_ptr()) } {
        0 => Ok(data),
        rc => Err(rc),
    }
}

/// Receives, from the source `status` names, every message up to the first with its tag
/// (which is the probed one) and holds them.
fn pull(s: &mut State, comm: Handle, status: *mut c_void) -> Result<(), c_int> {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return Err(abi.err_other) };
    // SAFETY: a status MPI filled.
    let (source, tag) = unsafe { abi.status_source_tag(status) };
    loop {
        let mut message: Handle = 0;
        let mut st = abi::Status::zeroed();
        // SAFETY: valid out-pointers; the message is there, so this returns at once.
        let rc = unsafe { (p.mprobe)(source, abi.any_tag, comm, (&mut message as *mut Handle).cast(), st.as_mut_ptr()) };
        if rc != 0 {
            return Err(rc);
        }
        let bytes = received_bytes(st.as_mut_ptr()).unwrap_or(0);
        // SAFETY: as above.
        let (_, got) = unsafe { abi.status_source_tag(st.as_mut_ptr()) };
        let data = receive((&mut message as *mut Handle).cast(), bytes)?;
        s.queue.push(Held::new(comm, source, got, data));
        COUNT.fetch_add(1, Relaxed);
        if got == tag {
            return Ok(());
        }
    }
}

/// `MPI_Probe`, `MPI_Iprobe` (`flag` not null) and, with `message` not null, `MPI_Mprobe` and
/// `MPI_Improbe`. `call(flag, status)` runs the real probe.
fn look(source: c_int, tag: c_int, comm: Handle, flag: *mut c_int, message: *mut c_void, status: *mut c_void, call: impl FnOnce(*mut c_int, *mut c_void) -> c_int) -> c_int {
    let abi = abi::get();
    if !super::receiving() || source == abi.proc_null {
        return call(flag, status);
    }
    let mut own = OwnStatus::copy_of(status);
    if any() {
        let mut s = state();
        if let Some(i) = s.queue.iter().position(|h| h.matches(source, tag, comm)) {
            s.queue[i].describe(own.filled());
            if !message.is_null() {
                let held = s.queue.remove(i);
                COUNT.fetch_sub(1, Relaxed);
                if let Err(e) = hand_out(&mut s, held, message) {
                    return errors::raise(Some(comm), e);
                }
            }
            drop(s);
            if !flag.is_null() {
                // SAFETY: the caller's flag.
                unsafe { *flag = 1 };
            }
            own.publish();
            return 0;
        }
    }
    let mut found: c_int = 1;
    let rc = call(if flag.is_null() { flag } else { &mut found }, own.for_mpi());
    if !flag.is_null() {
        // SAFETY: the caller's flag.
        unsafe { *flag = found };
    }
    let st = own.filled();
    if rc != 0 || found == 0 || !may_be_envelope(comm, st) {
        own.publish();
        return rc;
    }
    PULLING.fetch_add(1, Relaxed);
    let mut s = state();
    let got = if message.is_null() {
        pull(&mut s, comm, st).map(|()| s.queue.last().map_or(0, |h| h.bytes))
    } else {
        // SAFETY: a status MPI filled.
        let (from, t) = unsafe { abi.status_source_tag(st) };
        receive(message, envelope::BYTES).and_then(|data| {
            let held = Held::new(comm, from, t, data);
            let bytes = held.bytes;
            hand_out(&mut s, held, message).map(|()| bytes)
        })
    };
    drop(s);
    PULLING.fetch_sub(1, Relaxed);
    let result = match got {
        Ok(bytes) => {
            if let Some(p) = real::pmpi() {
                // SAFETY: the status MPI filled.
                unsafe { (p.status_set_elements_x)(st, abi.byte, bytes as i64) };
            }
            0
        }
        Err(e) => errors::raise(Some(comm), e),
    };
    own.publish();
    result
}

pub fn probe(_: &'static str, source: c_int, tag: c_int, comm: Handle, status: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    if super::receiving() && concurrent() {
        return poll(source, tag, comm, std::ptr::null_mut(), status);
    }
    look(source, tag, comm, std::ptr::null_mut(), std::ptr::null_mut(), status, |_, st| call(st))
}

/// A blocking probe where threads call MPI at once: another thread's probe may take the
/// message this one waits for out of MPI's queue and hold it (`pull` takes every earlier
/// message of the source), and a probe waiting inside MPI would never see it. So it looks in
/// turn here and in MPI, without blocking, until one has the message.
fn poll(source: c_int, tag: c_int, comm: Handle, message: *mut c_void, status: *mut c_void) -> c_int {
    let Some(p) = real::pmpi() else { return abi::get().err_other };
    loop {
        let mut flag: c_int = 0;
        let rc = look(source, tag, comm, &mut flag, message, status, |f, st| match message.is_null() {
            // SAFETY: the caller's arguments; valid out-pointers.
            true => unsafe { (p.iprobe)(source, tag, comm, f, st) },
            // SAFETY: as above, with the caller's message handle.
            false => unsafe { (p.improbe)(source, tag, comm, f, message, st) },
        });
        if rc != 0 || flag != 0 {
            return rc;
        }
        std::thread::yield_now();
    }
}

pub fn iprobe(_: &'static str, source: c_int, tag: c_int, comm: Handle, flag: *mut c_int, status: *mut c_void, call: impl FnOnce(*mut c_int, *mut c_void) -> c_int) -> c_int {
    if flag.is_null() {
        return call(flag, status);
    }
    look(source, tag, comm, flag, std::ptr::null_mut(), status, call)
}

pub fn mprobe(_: &'static str, source: c_int, tag: c_int, comm: Handle, message: *mut c_void, status: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    if message.is_null() {
        return call(status);
    }
    if super::receiving() && concurrent() {
        return poll(source, tag, comm, message, status);
    }
    look(source, tag, comm, std::ptr::null_mut(), message, status, |_, st| call(st))
}

#[allow(clippy::too_many_arguments)]
pub fn improbe(
    _: &'static str,
    source: c_int,
    tag: c_int,
    comm: Handle,
    flag: *mut c_int,
    message: *mut c_void,
    status: *mut c_void,
    call: impl FnOnce(*mut c_int, *mut c_void) -> c_int,
) -> c_int {
    if flag.is_null() || message.is_null() {
        return call(flag, status);
    }
    look(source, tag, comm, flag, message, status, call)
}

/// What a generalized request reports when waited for.
struct Done {
    status: abi::Status,
    rc: c_int,
}

unsafe extern "C" fn done_query(state: *mut c_void, status: *mut c_void) -> c_int {
    // SAFETY: the Done this module boxed; MPI passes a full status.
    unsafe {
        let done = &*state.cast::<Done>();
        std::ptr::copy_nonoverlapping(done.status.0.as_ptr(), status.cast::<u8>(), abi::get().status_size);
        done.rc
    }
}

unsafe extern "C" fn done_free(state: *mut c_void) -> c_int {
    // SAFETY: boxed by `completed`, freed once by MPI.
    drop(unsafe { Box::from_raw(state.cast::<Done>()) });
    0
}

unsafe extern "C" fn done_cancel(_: *mut c_void, _: c_int) -> c_int {
    // Already complete: nothing to cancel.
    0
}

/// Gives `request` a generalized request that is already complete, reporting `status` and
/// `rc`.
pub fn completed(request: *mut c_void, status: &abi::Status, rc: c_int) -> c_int {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return abi.err_other };
    let state = Box::into_raw(Box::new(Done { status: *status, rc }));
    // SAFETY: the callbacks match MPI's prototypes; `state` lives until done_free.
    let started = unsafe { (p.grequest_start)(done_query, done_free, done_cancel, state.cast(), request) };
    if started != 0 {
        // SAFETY: MPI did not take it.
        drop(unsafe { Box::from_raw(state) });
        return started;
    }
    // SAFETY: the request MPI just stored.
    unsafe { (p.grequest_complete)(abi.request_at(request, 0)) }
}

/// A generalized request whose operation finishes later ([`Pending::complete`]).
pub struct Pending {
    state: *mut Done,
    request: Handle,
}

// SAFETY: the state is MPI's until the request is freed, which it is only once complete; the
// owner alone writes it, before completing the request.
unsafe impl Send for Pending {}

/// Gives `request` a generalized request that is not complete yet.
pub fn pending(request: *mut c_void) -> Result<Pending, c_int> {
    let abi = abi::get();
    let p = real::pmpi().ok_or(abi.err_other)?;
    let state = Box::into_raw(Box::new(Done { status: abi::Status::zeroed(), rc: 0 }));
    // SAFETY: the callbacks match MPI's prototypes; `state` lives until done_free.
    let started = unsafe { (p.grequest_start)(done_query, done_free, done_cancel, state.cast(), request) };
    if started != 0 {
        // SAFETY: MPI did not take it.
        drop(unsafe { Box::from_raw(state) });
        return Err(started);
    }
    // SAFETY: the request MPI just stored.
    Ok(Pending { state, request: unsafe { abi.request_at(request, 0) } })
}

impl Pending {
    /// The request, as MPI handed it out.
    pub fn handle(&self) -> Handle {
        self.request
    }

    /// Reports `status` and `rc` and completes the request.
    pub fn complete(self, status: &abi::Status, rc: c_int) {
        // SAFETY: the request is not complete, so MPI has not freed the state.
        unsafe { *self.state = Done { status: *status, rc } };
        if let Some(p) = real::pmpi() {
            // SAFETY: a generalized request of this module, completed once.
            unsafe { (p.grequest_complete)(self.request) };
        }
    }
}

/// Drops everything held (`MPI_Finalize`).
pub fn clear() {
    let mut s = state();
    s.queue.clear();
    s.messages.clear();
    COUNT.store(0, Relaxed);
}
