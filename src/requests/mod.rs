//! Requests whose operations staged device buffers, from posting to completion.
//!
//! A nonblocking operation on a device buffer gives MPI a staging buffer; the request's entry
//! here owns that buffer until MPI reports completion, when a receive's data is copied to the
//! device. Entries are keyed by the request handle.
//!
//! MPI reuses a handle as soon as it frees the request, so an entry for a one-shot request is
//! taken out of the table *before* the completion call and put back only if the request is
//! still pending; another thread can then never find a stale entry under a handle MPI has
//! handed out again. Persistent requests keep their handle until `MPI_Request_free` and stay
//! in the table; their copies are made from a [`Window`] taken under the lock, never with the
//! lock held.
//!
//! A host-only program never creates an entry, and every completion call checks one atomic
//! counter before anything else. Its nonblocking receives into host memory, which an envelope
//! may reach, are noted at less cost in `watch`.
//!
//! This layer may use `fastpath` (a receive that got an envelope, the envelope a send still
//! reads), `staging`, `mpi` and `base`; the handlers and cudampi's C API use it.

pub mod on_gpu;
pub mod watch;

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

use crate::cuda::Deferred;
use crate::fastpath;
use crate::mpi::abi::{self, Handle};
use crate::mpi::{errors, real};
use crate::staging::stage::{self, Back, Form, Runs, Staged, Window};

/// Entries alive anywhere: in the table, held by a completion call, or orphaned.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Entries made so far: each entry's number, which orders the receives still waiting.
static MADE: AtomicU64 = AtomicU64::new(0);
static TABLE: Mutex<BTreeMap<Handle, Entry>> = Mutex::new(BTreeMap::new());
/// Requests the program freed while their operation was still in flight.
static ORPHANS: Mutex<Vec<(Handle, Entry)>> = Mutex::new(Vec::new());
static ORPHAN_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Entries served at their start with MPI's request left inactive (see [`Served`]).
static SERVED_IDLE: AtomicUsize = AtomicUsize::new(0);
/// Entries alive of point-to-point receives that an envelope may reach (`Entry::enveloped`).
static ENVELOPED: AtomicUsize = AtomicUsize::new(0);

fn table() -> MutexGuard<'static, BTreeMap<Handle, Entry>> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

fn orphans() -> MutexGuard<'static, Vec<(Handle, Entry)>> {
    ORPHANS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether any request has a staged buffer: when not, completion calls go straight through.
#[inline(always)]
pub fn any() -> bool {
    LIVE.load(Relaxed) != 0
}

/// Whether any point-to-point receive alive may get an envelope: when not, `MPI_Waitall` has
/// no receive to complete ahead of the others.
#[inline(always)]
pub fn any_enveloped() -> bool {
    ENVELOPED.load(Relaxed) != 0
}

/// Entries alive now (for statistics and the soak test).
pub fn tracked() -> usize {
    LIVE.load(Relaxed)
}

pub enum Kind {
    /// A nonblocking operation: the request is freed when it completes.
    Once,
    /// Started any number of times until `MPI_Request_free`.
    Persistent,
    /// Persistent, with the buffer in partitions marked ready or arrived one by one.
    Partitioned(Partitions),
}

/// Where the partitions lie in the staged span. Partition `i` covers `len` bytes at
/// `first + i * stride`.
pub struct Partitions {
    pub first: i64,
    pub stride: i64,
    pub len: usize,
    /// Receive side: the partitions already copied to the device since the last start.
    pub delivered: Vec<bool>,
}

impl Partitions {
    /// (offset in the staged span, bytes) of partition `i`.
    pub fn range(&self, i: usize) -> (usize, usize) {
        ((self.first + i as i64 * self.stride) as usize, self.len)
    }
}

pub struct Entry {
    pub name: &'static str,
    pub comm: Option<Handle>,
    /// The buffer MPI reads.
    pub send: Option<Staged>,
    /// The buffer MPI writes (for a replace operation, the one buffer).
    pub recv: Option<Staged>,
    pub kind: Kind,
    /// Posted or started, and not yet completed.
    pub active: bool,
    /// `MPI_Request_get_status` has already copied the data back.
    pub delivered: bool,
    /// The bytes that early copy found arrived, which the completion reports again (an IPC
    /// envelope's message is larger than what MPI saw).
    arrived: Option<usize>,
    /// A point-to-point receive, whose status says whether it was cancelled and how much
    /// arrived; a collective's status says nothing.
    pub p2p: bool,
    /// A nonblocking file access: its request is the library's own, never shared, and is
    /// completed only by the completion calls (with MPICH 5.0, `MPI_Request_get_status` right
    /// after `MPI_File_iread_shared` leaves the request broken for the `MPI_Test` that follows).
    file: bool,
    /// A receive into host memory that an IPC envelope may reach.
    pub host: Option<HostRecv>,
    /// The envelope a chunked send is sending, kept until the send completes.
    _envelope: Option<crate::fastpath::Kept>,
    /// A copy of the bytes a send reads, kept until the send completes.
    _copy: Option<Vec<u8>>,
    /// A persistent receive's arguments, which a start matches against the messages a probe
    /// already took out of MPI's queue (`fastpath::held`).
    pub matching: Option<RecvArgs>,
    /// What the completion reports when cudampi served the receive itself.
    served: Option<Served>,
    /// A collective running on NCCL (`on_gpu`).
    pub gpu: Option<on_gpu::Gpu>,
    /// Made after every entry with a smaller number.
    number: u64,
    /// A point-to-point receive that an envelope may reach: into host memory, or into device
    /// memory and large enough for a fast path (`fastpath::may_get_envelope`).
    enveloped: bool,
}

/// A host receive buffer, looked at when its receive completes.
#[derive(Clone, Copy)]
pub struct HostRecv {
    pub buf: *mut c_void,
    pub count: i64,
    pub datatype: Handle,
}

// SAFETY: the program's buffer address, used only when its receive completes.
unsafe impl Send for HostRecv {}

/// A persistent receive as the program set it up.
#[derive(Clone, Copy)]
pub struct RecvArgs {
    pub buf: *mut c_void,
    pub count: i64,
    pub datatype: Handle,
    pub source: c_int,
    pub tag: c_int,
    pub comm: Handle,
}

// SAFETY: the program's buffer address, written only when a start serves the receive.
unsafe impl Send for RecvArgs {}

/// A receive cudampi served from a held message: the status and result its completion reports.
/// `idle`: MPI's request was never started (a persistent receive served at its start), so MPI
/// skips it in `MPI_Waitany` and the like and reports it empty elsewhere; otherwise MPI's
/// request is the send of a send-receive, and completes as usual.
pub struct Served {
    pub status: abi::Status,
    pub rc: c_int,
    idle: bool,
}

impl Entry {
    #[inline]
    pub fn new(name: &'static str, comm: Option<Handle>, send: Option<Staged>, recv: Option<Staged>, kind: Kind) -> Entry {
        LIVE.fetch_add(1, Relaxed);
        let active = matches!(kind, Kind::Once);
        let number = MADE.fetch_add(1, Relaxed);
        let enveloped = recv.as_ref().is_some_and(|r| crate::fastpath::may_get_envelope(r.span.len));
        if enveloped {
            ENVELOPED.fetch_add(1, Relaxed);
        }
        Entry {
            name,
            comm,
            send,
            recv,
            kind,
            active,
            delivered: false,
            arrived: None,
            p2p: true,
            file: false,
            host: None,
            _envelope: None,
            _copy: None,
            matching: None,
            served: None,
            gpu: None,
            number,
            enveloped,
        }
    }

    fn set_enveloped(&mut self, on: bool) {
        if on != self.enveloped {
            match on {
                true => ENVELOPED.fetch_add(1, Relaxed),
                false => ENVELOPED.fetch_sub(1, Relaxed),
            };
            self.enveloped = on;
        }
    }

    /// See the field of that name.
    pub fn enveloped(&self) -> bool {
        self.enveloped
    }

    /// The entry of a nonblocking or persistent receive into host memory (see [`HostRecv`]),
    /// with the staged buffer of the send that goes with it, if any.
    pub fn host(name: &'static str, comm: Option<Handle>, send: Option<Staged>, host: HostRecv, kind: Kind) -> Entry {
        let mut e = Entry::new(name, comm, send, None, kind);
        e.host = Some(host);
        e.set_enveloped(true);
        e
    }

    /// The entry of a nonblocking send whose envelope MPI may still read.
    pub fn envelope(name: &'static str, comm: Option<Handle>, envelope: crate::fastpath::Kept) -> Entry {
        let mut e = Entry::new(name, comm, None, None, Kind::Once);
        e._envelope = Some(envelope);
        e
    }

    /// The entry of a nonblocking file read or write: no message, so nothing of the fast paths
    /// concerns it, but a read's status counts the bytes read (`Back::Read`).
    pub fn file(name: &'static str, comm: Option<Handle>, send: Option<Staged>, recv: Option<Staged>) -> Entry {
        let mut e = Entry::new(name, comm, send, recv, Kind::Once);
        e.p2p = false;
        e.file = true;
        e.set_enveloped(false);
        e
    }

    /// The entry of a nonblocking or persistent collective.
    pub fn collective(name: &'static str, comm: Option<Handle>, send: Option<Staged>, recv: Option<Staged>, kind: Kind) -> Entry {
        let mut e = Entry::new(name, comm, send, recv, kind);
        e.p2p = false;
        e.set_enveloped(false);
        e
    }

    /// The entry of a nonblocking or persistent collective that runs on NCCL.
    pub fn on_gpu(name: &'static str, comm: Option<Handle>, gpu: on_gpu::Gpu, kind: Kind) -> Entry {
        let mut e = Entry::collective(name, comm, None, None, kind);
        e.gpu = Some(gpu);
        e
    }

    /// A point-to-point send's alone: nothing comes back to the program's buffers.
    fn send_only(&self) -> bool {
        matches!(self.kind, Kind::Once) && self.p2p && !self.file && self.recv.is_none() && self.host.is_none()
    }

    /// Whether something of the operation must happen after MPI's request is complete: a send
    /// from the program's device buffer still waiting for its receiver to copy it, or a served
    /// receive to report.
    fn outlives_mpi(&self) -> bool {
        self.served.is_some() || self._envelope.as_ref().is_some_and(|k| !k.settled())
    }

    /// Names the entry among all made: a handle MPI hands out again gets a new number.
    pub fn number(&self) -> u64 {
        self.number
    }

    fn persistent(&self) -> bool {
        !matches!(self.kind, Kind::Once)
    }

    /// The receive was served from a held message: its completion reports `status` and `rc`
    /// and copies nothing. `idle`: see [`Served`]; the operation is active from now on.
    pub fn serve(&mut self, status: abi::Status, rc: c_int, idle: bool) {
        self.take_served();
        if idle {
            self.active = true;
            SERVED_IDLE.fetch_add(1, Relaxed);
        }
        self.served = Some(Served { status, rc, idle });
    }

    fn take_served(&mut self) -> Option<Served> {
        let s = self.served.take()?;
        if s.idle {
            SERVED_IDLE.fetch_sub(1, Relaxed);
        }
        Some(s)
    }

    /// Prepares one start of a persistent request: copies in what MPI will read and marks it
    /// active.
    pub fn start(&mut self) -> Result<(), c_int> {
        self.fill()?;
        if let Some(g) = &mut self.gpu {
            g.start()?;
        }
        if let Kind::Partitioned(p) = &mut self.kind {
            p.delivered.iter_mut().for_each(|d| *d = false);
        }
        self.active = true;
        self.delivered = false;
        self.arrived = None;
        Ok(())
    }

    /// Copies in what MPI will read. Partitioned sends copy each partition when it is marked
    /// ready instead.
    fn fill(&self) -> Result<(), c_int> {
        if let (Some(s), false) = (&self.send, matches!(self.kind, Kind::Partitioned(_))) {
            s.fill(self.name, self.comm)?;
        }
        if let Some(r) = &self.recv {
            r.fill(self.name, self.comm)?;
        }
        Ok(())
    }

    /// The copy to the device this completion owes, marking it done.
    fn take_delivery(&mut self) -> Option<Delivery> {
        if !self.active || self.delivered {
            return None;
        }
        self.delivered = true;
        if let Some(host) = self.host {
            return Some(Delivery { name: self.name, comm: self.comm, target: Target::Host(host), p2p: self.p2p });
        }
        let r = self.recv.as_ref()?;
        let ranges = match &mut self.kind {
            Kind::Partitioned(p) => {
                let mut ranges: Vec<(usize, usize)> = Vec::new();
                for i in 0..p.delivered.len() {
                    if std::mem::replace(&mut p.delivered[i], true) {
                        continue;
                    }
                    let (at, len) = p.range(i);
                    match ranges.last_mut() {
                        Some(last) if last.0 + last.1 == at => last.1 += len,
                        _ => ranges.push((at, len)),
                    }
                }
                Some(ranges)
            }
            _ => None,
        };
        let target = Target::Staged { window: r.window(), back: r.back, runs: r.runs.clone(), form: r.form.clone(), ranges };
        Some(Delivery { name: self.name, comm: self.comm, target, p2p: self.p2p })
    }

    /// Marks the operation complete; returns the copy still owed, or what a served receive
    /// reports instead.
    fn complete(&mut self) -> (Option<Delivery>, Option<Served>) {
        let served = self.take_served();
        let d = if served.is_none() { self.take_delivery() } else { None };
        self.active = false;
        self.delivered = false;
        (d, served)
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Relaxed);
        self.set_enveloped(false);
        self.take_served();
    }
}

/// A copy of received data to the device, made with no lock held.
pub struct Delivery {
    name: &'static str,
    comm: Option<Handle>,
    target: Target,
    p2p: bool,
}

enum Target {
    Staged {
        window: Window,
        back: Back,
        runs: Option<Runs>,
        form: Option<Form>,
        /// Partitioned receives: the byte ranges still to copy.
        ranges: Option<Vec<(usize, usize)>>,
    },
    Host(HostRecv),
}

impl Delivery {
    fn truncated(&self) {
        if let Target::Staged { window, back, .. } = &self.target {
            if *back != Back::Nothing {
                errors::truncated(self.name, window.user());
            }
        }
    }

    /// `status` is the completed request's status, or null when the call gives none.
    pub fn run(self, status: *mut c_void) -> Result<(), c_int> {
        self.run_then(status, None)
    }

    /// [`Delivery::run`]; a plain copy of the span is left for `later` to wait for.
    fn run_then(self, status: *mut c_void, later: Option<&mut Deferred>) -> Result<(), c_int> {
        // A collective's status counts nothing; a file read's counts the bytes read.
        let counted = self.p2p || matches!(self.target, Target::Staged { back: Back::Read, .. });
        let status = if counted { status } else { std::ptr::null_mut() };
        match self.target {
            Target::Host(h) => crate::fastpath::host_received(self.name, h.buf, h.count, h.datatype, self.comm, status),
            Target::Staged { window, back, runs, form, ranges: None } => stage::deliver(window, back, runs.as_deref(), form.as_ref(), self.name, self.comm, status, later),
            Target::Staged { window, ranges: Some(mut ranges), .. } => {
                // Partitions of a negative stride come in descending order.
                ranges.sort_unstable();
                window.runs_to_device(self.name, self.comm, &ranges)
            }
        }
    }
}

/// Starts tracking the request MPI just wrote to `*request`.
///
/// A collective MPI completed while posting it (on one process, say) may come back as a
/// request handle the library shares among all such operations, so it is finished here
/// instead: its data is copied now and nothing is tracked. `Err` is a failed copy's error
/// code.
pub fn insert(request: *const c_void, mut entry: Entry) -> Result<(), c_int> {
    if request.is_null() {
        return Ok(());
    }
    let abi = abi::get();
    // SAFETY: MPI has just written the handle of a successfully posted request there.
    let h = abi.key(unsafe { abi.request_at(request, 0) });
    // Point-to-point requests are never shared, and their status from MPI_Request_get_status
    // would not carry a truncation error; they complete in the completion calls.
    if matches!(entry.kind, Kind::Once) && !entry.p2p && !entry.file {
        if let Some(p) = real::pmpi() {
            let (mut flag, mut status) = (0, abi::Status::zeroed());
            // SAFETY: a live request; valid out-pointers. The request is not freed.
            let rc = unsafe { (p.request_get_status)(h, &mut flag, status.as_mut_ptr()) };
            if rc == 0 && flag != 0 {
                return match entry.complete().0 {
                    Some(d) => d.run(status.as_mut_ptr()),
                    None => Ok(()),
                };
            }
        }
    }
    let h = match entry.send_only() {
        true => match own_handle_if_done(request, h, entry.outlives_mpi()) {
            Some(h) => h,
            None => return Ok(()),
        },
        false => h,
    };
    // An entry the handle held before (MPI reuses handles) is dropped after the lock: dropping
    // a send from the program's buffer may wait for its receiver and look at the table.
    let old = table().insert(h, entry);
    drop(old);
    Ok(())
}

/// A send's request that MPI completed as it posted it may be a handle MPI gives every such
/// send of the process at once: MPICH returns one built-in request (0x6c000001 on MPICH 4.0)
/// for every eager send that completes at its post, in every thread. Keyed by it, one
/// thread's entry would replace another's, and a completion call would find another thread's
/// entry or none; a send from the program's device buffer would then complete before its
/// receiver copied it, and the program overwrite the message. So a send found complete here
/// is not tracked under MPI's handle: when nothing of it must outlive MPI's part (`outlives`
/// false: a staging buffer, an envelope MPI has sent) it is dropped now and the program keeps
/// MPI's handle; otherwise the program gets a generalized request of its own, already complete
/// and reporting MPI's status, and MPI's request is completed here. Returns the handle to
/// track the entry under, or `None` when it needs no tracking.
fn own_handle_if_done(request: *const c_void, h: Handle, outlives: bool) -> Option<Handle> {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return Some(h) };
    let (mut flag, mut status) = (0, abi::Status::zeroed());
    // SAFETY: a live request MPI has just handed out; valid out-pointers. It is not freed.
    let rc = unsafe { (p.request_get_status)(h, &mut flag, status.as_mut_ptr()) };
    if rc != 0 || flag == 0 {
        return Some(h);
    }
    if !outlives {
        return None;
    }
    if crate::fastpath::held::completed(request.cast_mut(), &status, 0) != 0 {
        // The program keeps MPI's handle, and the send completes here, waiting for its receiver.
        return None;
    }
    let mut done = h;
    // SAFETY: MPI's request, complete; the program now holds the generalized one instead.
    unsafe { (p.wait)((&mut done as *mut Handle).cast(), status.as_mut_ptr()) };
    // SAFETY: the request the generalized request's start just stored.
    Some(abi.key(unsafe { abi.request_at(request, 0) }))
}

/// What [`gate`] found among a completion call's requests.
#[derive(Default)]
pub struct Gated {
    /// Collectives still running.
    pub left: usize,
    /// The first that failed: the call's error.
    pub error: Option<c_int>,
}

/// Settles the collectives on NCCL among `n` requests before a completion call looks at them
/// (`on_gpu`): waits for each (`block`) or looks once. Each one found done has its results in
/// place and its request complete in MPI.
pub fn gate(reqs: *const c_void, n: c_int, block: bool) -> Gated {
    let mut out = Gated::default();
    if !on_gpu::any() || reqs.is_null() || n <= 0 {
        return out;
    }
    let abi = abi::get();
    for i in 0..n as usize {
        // SAFETY: the caller passes n requests.
        let h = abi.key(unsafe { abi.request_at(reqs, i) });
        if !table().get(&h).is_some_and(|e| e.gpu.as_ref().is_some_and(|g| g.in_flight())) {
            continue;
        }
        // Out of the table while it is waited for: no lock is held across the wait, and only
        // the thread completing a request settles it.
        let Some(mut e) = table().remove(&h) else { continue };
        let settled = match &mut e.gpu {
            Some(g) => g.settle(block),
            None => Ok(true),
        };
        table().insert(h, e);
        match settled {
            Ok(true) => (),
            Ok(false) => out.left += 1,
            Err(rc) => {
                out.error.get_or_insert(rc);
            }
        }
    }
    out
}

/// Runs `f` on the entry of a handle with the table locked; `f` must not copy or call MPI.
pub fn with<R>(h: Handle, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
    table().get_mut(&abi::get().key(h)).map(f)
}

/// The point-to-point receives into device memory that are posted and not yet completed,
/// oldest first, each with its staged span: for a send that waits for pinned buffers and
/// meanwhile takes the chunks its peers send (`fastpath::pipeline`). Receives whose datatype leaves
/// gaps, and partitioned ones, are left out.
pub fn waiting_device_receives() -> Vec<(Handle, Window)> {
    let mut found: Vec<(u64, Handle, Window)> = table()
        .iter()
        .filter(|(_, e)| e.p2p && e.active && !e.delivered && e.host.is_none() && !matches!(e.kind, Kind::Partitioned(_)))
        .filter_map(|(&h, e)| e.recv.as_ref().filter(|r| r.back != Back::Nothing && r.runs.is_none() && r.form.is_none()).map(|r| (e.number, h, r.window())))
        .collect();
    found.sort_unstable_by_key(|f| f.0);
    found.into_iter().map(|(_, h, w)| (h, w)).collect()
}

/// Whether any of the `n` requests is a send from the program's device buffer still waiting for
/// its receiver to copy (`fastpath::Kept::settled`): a call that must not wait then reports
/// nothing complete.
pub fn send_waiting(reqs: *const c_void, n: c_int) -> bool {
    if reqs.is_null() || n <= 0 {
        return false;
    }
    let abi = abi::get();
    let t = table();
    // SAFETY (the closure): the caller passes n requests.
    (0..n as usize).any(|i| t.get(&abi.key(unsafe { abi.request_at(reqs, i) })).is_some_and(|e| e._envelope.as_ref().is_some_and(|k| !k.settled())))
}

/// Completes the settled sends from the program's device buffer among the `n` requests
/// (`fastpath::Kept::finish_settled`).
pub fn finish_sends(reqs: *const c_void, n: c_int) {
    if reqs.is_null() || n <= 0 {
        return;
    }
    let abi = abi::get();
    for i in 0..n as usize {
        // SAFETY: the caller passes n requests.
        let h = abi.key(unsafe { abi.request_at(reqs, i) });
        // Out of the table while it finishes (a send past its patience withdraws its message:
        // MPI calls and a copy), as a completion call takes its entries; only the thread
        // completing the request finishes it.
        let taken = {
            let mut t = table();
            match t.get(&h).and_then(|e| e._envelope.as_ref()) {
                Some(k) if k.settled() && k.is_direct() => t.remove(&h),
                _ => None,
            }
        };
        if let Some(mut e) = taken {
            if let Some(k) = e._envelope.as_mut() {
                k.finish_settled();
            }
            put_back(h, e);
        }
    }
}

/// One request of a completion call's array that cudampi tracks.
pub struct Taken {
    pub index: usize,
    handle: Handle,
    /// One-shot entries travel with the call; persistent ones stay in the table.
    once: Option<Entry>,
}

impl Taken {
    /// Whether the completion call left this request pending: MPI still holds its handle in
    /// `reqs`, the array the call was given.
    fn pending(&self, reqs: *const c_void) -> bool {
        let abi = abi::get();
        // SAFETY: the same array the call was given, which holds this request at `index`.
        abi.key(unsafe { abi.request_at(reqs, self.index) }) == self.handle
    }
}

/// Takes the tracked requests among `n` (see the module comment). Null or negative arguments
/// take nothing, so MPI answers them itself.
pub fn take(reqs: *const c_void, n: c_int) -> Vec<Taken> {
    let mut taken = Vec::new();
    if reqs.is_null() || n <= 0 {
        return taken;
    }
    let abi = abi::get();
    let mut t = table();
    for i in 0..n as usize {
        // SAFETY: the caller passes n requests.
        let h = abi.key(unsafe { abi.request_at(reqs, i) });
        let once = match t.get(&h) {
            None => continue,
            Some(e) if e.persistent() => None,
            Some(_) => t.remove(&h),
        };
        taken.push(Taken { index: i, handle: h, once });
    }
    taken
}

/// After the completion call: `done(index)` says whether the call reported request `index`
/// complete and gives its status (null if none). One-shot requests are complete exactly when
/// MPI has replaced their handle with `MPI_REQUEST_NULL`; those still pending go back into the
/// table. Returns the copies that failed: (index, error). The staged receives' copies are
/// waited for once, after all are queued: by `later` when given (its owner then reports their
/// failures, by handle), else before `settle` returns.
pub fn settle(taken: Vec<Taken>, reqs: *const c_void, rc: c_int, done: impl Fn(usize) -> Option<*mut c_void>, later: Option<&mut Later>) -> Vec<(usize, c_int)> {
    let abi = abi::get();
    let in_status = rc != 0 && errors::class(rc) == abi.err_in_status;
    let mut failed = Vec::new();
    let mut pending = Vec::new();
    let index_of: Vec<(Handle, usize)> = taken.iter().map(|t| (t.handle, t.index)).collect();
    let mut own = Later::new();
    let outer = later.is_some();
    // The stream writes a call's receives only where it can write them all.
    if !outer && arrived_bytes(&taken, reqs, &done) > crate::cuda::signal::BATCH_WRITE_BYTES {
        own.copies.copy_only();
    }
    let later = match later {
        Some(l) => l,
        None => &mut own,
    };
    fastpath::queue_begin();
    for t in taken {
        fastpath::queue_at(t.handle);
        let status = done(t.index);
        let left = t.once.is_some() && t.pending(reqs);
        // A completed one-shot entry is dropped, releasing its staging buffer, only after the
        // copy that reads it.
        let ((delivery, served), owner, arrived) = match t.once {
            Some(mut e) => {
                if left {
                    pending.push((t.handle, e));
                    continue;
                }
                let arrived = e.arrived.take();
                (e.complete(), Some(e), arrived)
            }
            None if status.is_some() => {
                let (d, a) = with(t.handle, |e| (e.complete(), e.arrived.take())).unwrap_or(((None, None), None));
                // A persistent request that MPI freed as it completed (Open MPI 4.1 does after
                // a truncated receive) takes its entry along: the handle is free for reuse.
                // SAFETY: the same array the call was given.
                let freed = abi.same(unsafe { abi.request_at(reqs, t.index) }, abi.request_null);
                (d, if freed { remove(t.handle) } else { None }, a)
            }
            None => ((None, None), None, None),
        };
        if let Some(s) = served {
            if let Some(st) = status.filter(|st| !st.is_null()) {
                s.write(st);
            }
            if s.rc != 0 {
                failed.push((t.index, s.rc));
            }
            continue;
        }
        if let (None, Some(n), Some(st)) = (&delivery, arrived, status) {
            if !st.is_null() {
                if let Some(p) = real::pmpi() {
                    // SAFETY: a status MPI filled for a completed request.
                    unsafe { (p.status_set_elements_x)(st, abi.byte, n as i64) };
                }
            }
        }
        if let Some(d) = delivery {
            let st = status.unwrap_or(std::ptr::null_mut());
            // The request's own error: in its status when the call says so, else the call's.
            // SAFETY: a status MPI filled for a completed request.
            let error = if in_status && !st.is_null() { unsafe { abi.status_error(st) } } else { rc };
            if error != 0 && errors::class(error) == abi.err_truncate {
                d.truncated();
                continue;
            }
            let (name, comm) = (d.name, d.comm);
            match d.run_then(st, Some(&mut later.copies)) {
                Ok(()) => later.copied.push((t.handle, name, comm)),
                Err(e) => failed.push((t.index, e)),
            }
        }
        later.owners.extend(owner);
    }
    let waited = if outer { Vec::new() } else { std::mem::take(later).finish() };
    for (h, rc) in waited.into_iter().chain(fastpath::queue_end()) {
        failed.extend(index_of.iter().find(|x| x.0 == h).map(|x| (x.1, rc)));
    }
    if !pending.is_empty() {
        table().extend(pending);
    }
    failed
}

/// The bytes the staged receives among `taken` that completed bring (as `settle` tells them):
/// a point-to-point receive's by its status, where one that gives no size counts as too many to
/// write; a collective's, whose status says nothing, by its buffer's span.
fn arrived_bytes(taken: &[Taken], reqs: *const c_void, done: &impl Fn(usize) -> Option<*mut c_void>) -> usize {
    let bytes = |e: &Entry, index: usize| match (&e.recv, e.p2p) {
        (None, _) => 0,
        (Some(r), false) => r.span.len,
        (Some(_), true) => done(index).map_or(0, |st| stage::received_bytes(st).unwrap_or(usize::MAX)),
    };
    taken
        .iter()
        .map(|t| match &t.once {
            Some(_) if t.pending(reqs) => 0,
            Some(e) => bytes(e, t.index),
            None => with(t.handle, |e| bytes(e, t.index)).unwrap_or(0),
        })
        .fold(0, usize::saturating_add)
}

/// Copies of staged receives left for one wait at the end of a completion call (`Deferred`),
/// with the entries that own the staging buffers they read, dropped only after it.
#[derive(Default)]
pub struct Later {
    copies: Deferred,
    owners: Vec<Entry>,
    /// The requests whose copies are queued, and what reports their error.
    copied: Vec<(Handle, &'static str, Option<Handle>)>,
}

impl Later {
    pub fn new() -> Later {
        Later::default()
    }

    /// Waits for the copies, then lets the staging buffers go. A copy that fails on the GPU
    /// after it was queued cannot be told from the others: every request whose copy was
    /// waited for reports the error, by handle.
    pub fn finish(self) -> Vec<(Handle, c_int)> {
        let Later { copies, owners, copied } = self;
        let waited = copies.wait();
        drop(owners);
        match (waited, copied.first()) {
            (Err(e), Some(&(_, name, comm))) => {
                let rc = errors::cuda_wait(name, comm, e);
                copied.iter().map(|c| (c.0, rc)).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// `MPI_Request_get_status` reported the operation complete without freeing the request:
/// the data is copied now, and the later completion copies nothing.
pub fn deliver_early(h: Handle, status: *mut c_void) -> Result<(), c_int> {
    let Some(d) = with(h, Entry::take_delivery).flatten() else { return Ok(()) };
    let r = d.run(status);
    // Only a receive's status counts what arrived: a collective's says nothing (Open MPI 4.1
    // leaves its count as it found it), and reporting that again would fail the completion.
    if let Some(n) = stage::received_bytes(status) {
        with(h, |e| {
            if e.p2p {
                e.arrived = Some(n)
            }
        });
    }
    r
}

/// An operation whose request the program has not completed yet was completed by another
/// call (a one-sided request by `MPI_Win_flush`, say): its data is copied now, and the later
/// completion copies nothing. `number` ([`Entry::number`]) leaves alone an entry that a handle
/// MPI has handed out again since carries.
pub fn deliver_now(h: Handle, number: u64) -> Result<(), c_int> {
    let Some(d) = with(h, |e| if e.number == number { e.take_delivery() } else { None }).flatten() else { return Ok(()) };
    d.run(std::ptr::null_mut())
}

/// Whether the request `h` still has the entry numbered `number` (its operation has not been
/// completed by a completion call).
pub fn is_live(h: Handle, number: u64) -> bool {
    with(h, |e| e.number == number).unwrap_or(false)
}

impl Served {
    /// Fills a status the way MPI would have for the served receive.
    pub fn write(&self, status: *mut c_void) {
        // SAFETY: a full status of the caller's or cudampi's own.
        unsafe { std::ptr::copy_nonoverlapping(self.status.0.as_ptr().cast::<u8>(), status.cast::<u8>(), abi::get().status_size) };
    }

    /// [`Served::write`] into a caller's status argument, unless it is null or
    /// `MPI_STATUS_IGNORE`.
    pub fn report(&self, status: *mut c_void) {
        if !status.is_null() && !abi::get().is_status_ignore(status) {
            self.write(status);
        }
    }
}

/// Which of `n` requests are persistent receives served at their start (see [`Served`]),
/// which the calls that skip inactive requests must report themselves.
pub fn served_idle(reqs: *const c_void, n: c_int) -> Vec<usize> {
    if SERVED_IDLE.load(Relaxed) == 0 || reqs.is_null() || n <= 0 {
        return Vec::new();
    }
    let abi = abi::get();
    let t = table();
    // SAFETY: the caller passes n requests.
    (0..n as usize).filter(|&i| t.get(&abi.key(unsafe { abi.request_at(reqs, i) })).is_some_and(|e| e.served.as_ref().is_some_and(|s| s.idle))).collect()
}

/// Completes a served persistent receive, giving what it reports; `peek` leaves it active
/// (`MPI_Request_get_status`).
pub fn complete_served(h: Handle, peek: bool) -> Option<Served> {
    with(h, |e| match peek {
        true => e.served.as_ref().map(|s| Served { status: s.status, rc: s.rc, idle: false }),
        false => {
            let s = e.take_served();
            e.active = false;
            e.delivered = false;
            s
        }
    })
    .flatten()
}

/// Keeps a persistent receive's arguments with its request (tracking it if it was not), so
/// that its starts look among the held messages.
pub fn match_at_start(request: *const c_void, name: &'static str, args: RecvArgs) {
    let abi = abi::get();
    // SAFETY: MPI has just written the new request there.
    let h = abi.key(unsafe { abi.request_at(request, 0) });
    let mut t = table();
    t.entry(h).or_insert_with(|| Entry::new(name, Some(args.comm), None, None, Kind::Persistent)).matching = Some(args);
}

/// A nonblocking send-receive whose receive cudampi served: the request MPI made for its send
/// reports the receive when it completes.
pub fn report_receive(request: *const c_void, name: &'static str, comm: Option<Handle>, status: abi::Status, rc: c_int, copy: Option<Vec<u8>>) {
    let abi = abi::get();
    // SAFETY: MPI has just written the send's request there.
    let h = abi.key(unsafe { abi.request_at(request, 0) });
    let serve = |e: &mut Entry, copy: Option<Vec<u8>>| {
        e.serve(status, rc, false);
        if copy.is_some() {
            e._copy = copy;
        }
    };
    if let Some(e) = table().get_mut(&h) {
        serve(e, copy);
        return;
    }
    // A new entry goes through `insert`, which keeps it apart from MPI's shared handles.
    let mut e = Entry::new(name, comm, None, None, Kind::Once);
    serve(&mut e, copy);
    let _ = insert(request, e);
}

/// Removes an entry (`MPI_Request_free`); `None` if untracked.
pub fn remove(h: Handle) -> Option<Entry> {
    table().remove(&abi::get().key(h))
}

pub fn put_back(h: Handle, e: Entry) {
    let old = table().insert(abi::get().key(h), e);
    drop(old);
}

/// The program freed an active request: MPI's request stays alive here, completed in later
/// calls ([`progress_orphans`]) or at `MPI_Finalize`, so the data still reaches the device and
/// the staging buffer is released exactly once.
pub fn orphan(h: Handle, e: Entry) {
    let mut o = orphans();
    o.push((h, e));
    ORPHAN_COUNT.store(o.len(), Relaxed);
}

/// Tests every orphaned request once. Called from completion calls; the list is taken out
/// while MPI is called, so no lock is held across it.
pub fn progress_orphans() {
    if ORPHAN_COUNT.load(Relaxed) == 0 {
        return;
    }
    let list = {
        let mut o = orphans();
        ORPHAN_COUNT.store(0, Relaxed);
        std::mem::take(&mut *o)
    };
    let Some(p) = real::pmpi() else { return };
    let mut left = Vec::new();
    for (h, mut e) in list {
        if let Some(g) = &mut e.gpu {
            // Nobody is left to hear of an error; the failure was reported on its own line.
            if !matches!(g.settle(false), Ok(true) | Err(_)) {
                left.push((h, e));
                continue;
            }
        }
        let mut req = h;
        let mut flag: c_int = 0;
        let mut status = abi::Status::zeroed();
        // SAFETY: a live request of this process; handle widths: MPI reads an int or a
        // pointer from the start of `req`, which is little-endian and zero-extended.
        let rc = unsafe { (p.test)((&mut req as *mut Handle).cast(), &mut flag, status.as_mut_ptr()) };
        if rc != 0 || flag != 0 {
            finish_orphan(h, e, status.as_mut_ptr());
        } else {
            left.push((h, e));
        }
    }
    if !left.is_empty() {
        let mut o = orphans();
        o.extend(left);
        ORPHAN_COUNT.store(o.len(), Relaxed);
    }
}

fn finish_orphan(h: Handle, mut e: Entry, status: *mut c_void) {
    if let (Some(d), _) = e.complete() {
        // Nobody is left to hear of an error; the copy reports it on its own line.
        let _ = d.run(status);
    }
    if e.persistent() {
        if let Some(p) = real::pmpi() {
            let mut req = h;
            // SAFETY: an inactive persistent request the program asked to free.
            unsafe { (p.request_free)((&mut req as *mut Handle).cast()) };
        }
    }
}

/// Completes every orphaned request (`MPI_Finalize`, before the real one).
pub fn finish_orphans() {
    let list = {
        let mut o = orphans();
        ORPHAN_COUNT.store(0, Relaxed);
        std::mem::take(&mut *o)
    };
    let Some(p) = real::pmpi() else { return };
    for (h, mut e) in list {
        if let Some(g) = &mut e.gpu {
            let _ = g.settle(true);
        }
        let mut req = h;
        let mut status = abi::Status::zeroed();
        // SAFETY: a live request of this process (see progress_orphans).
        unsafe { (p.wait)((&mut req as *mut Handle).cast(), status.as_mut_ptr()) };
        finish_orphan(h, e, status.as_mut_ptr());
    }
}

/// Drops every entry and its staging buffers (after the real `MPI_Finalize`).
pub fn clear() {
    let entries = std::mem::take(&mut *table());
    drop(entries);
    drop(std::mem::take(&mut *orphans()));
    ORPHAN_COUNT.store(0, Relaxed);
}
