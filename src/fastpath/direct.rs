//! IPC from the program's own buffer: the receiver copies the message straight out of the
//! sender's device buffer, so the message crosses in one copy and the sender's GPU does no copy
//! at all. Two processes sharing one GPU take turns on it, and a copy by each side per message
//! made them switch twice (on one H100, 178 GB/s at 64 MiB against 1,381 GB/s for one copy).
//!
//! The program may reuse its buffer once its send completes, so the send completes only when
//! the receiver has copied (the slot in `claims` says so). A receiver can copy only inside its
//! own MPI calls, and it may be in none of them (in `MPI_Barrier`, say, with its receive
//! posted, while the sender waits for its send): a send that waits longer than its patience
//! (`CUDAMPI_PIPELINE_WAIT`, shortened while waits go unrewarded) withdraws the message,
//! copies it into its exported memory (`exported`), and completes; the receiver, finding it
//! moved, copies it from there. No rank ever waits on another for long.
//!
//! Blocking sends wait in the send; nonblocking ones in the call that completes them, where
//! `MPI_Waitall` has already taken the receives it holds, so two ranks exchanging messages do
//! not wait for each other. Buffered sends must complete at once and never come here.
//!
//! The receiver maps each sender allocation once and keeps a few mappings (the program's
//! allocations come and go; a mapping keeps the memory alive, so at most [`MAPPINGS`] are
//! kept, the least recently used closed first).
//!
//! This module may use `claims`, `exported`, `imported`, `patience`, `peers`, `queued`, `envelope`,
//! `cuda`, `mpi` and `base`.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::envelope::{self, Envelope};
use super::imported::LAZY_ENABLE_PEER_ACCESS;
use super::patience::Patience;
use super::{claims, exported, imported, peers, pipeline, queued};
use crate::base::{log, stats};
use crate::cuda::copy::check;
use crate::cuda::driver::{self, CUcontext, CUdeviceptr, CuResult, IpcMemHandle};
use crate::cuda::{CudaError, Device, InContext};

/// `CUDA_ERROR_ALREADY_MAPPED`.
const ALREADY_MAPPED: CuResult = cudarc::driver::sys::cudaError_enum::CUDA_ERROR_ALREADY_MAPPED as CuResult;

/// Sender allocations a receiver keeps mapped.
const MAPPINGS: usize = 16;

/// Handles of the sender's own allocations, by the driver's id of each (ids are never reused
/// within a process), and one event per context to order a send after the program's work.
struct Exports {
    handles: Vec<(u64, IpcMemHandle)>,
    events: Vec<(usize, usize)>,
}

static EXPORTS: Mutex<Exports> = Mutex::new(Exports { handles: Vec::new(), events: Vec::new() });

fn exports() -> MutexGuard<'static, Exports> {
    EXPORTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long the next send waits for its receiver, counted from its posting.
static PATIENCE: Patience = Patience::new();

/// How long a message below `CUDAMPI_IPC_BYTES` waits for a receiver that was waiting for it
/// (`claims::Listening`): such a receiver copies within microseconds, unless what it waited
/// for was another message of the sender (on another communicator, or after this one in a
/// completion call's order). The send then completes as an eager one would, only later.
pub const AWAITED_PATIENCE: Duration = Duration::from_micros(100);

/// Set before the library's `MPI_Finalize`: a send the program never completed is dropped
/// without waiting or calling MPI.
static FINALIZING: AtomicBool = AtomicBool::new(false);

/// Before the library's `MPI_Finalize`.
pub fn finalizing() {
    FINALIZING.store(true, Relaxed);
}

/// A message announced from the program's buffer, until its receiver has copied it or its
/// sender has withdrawn it. Dropping it finishes it (`finish`): the send's completion.
pub struct Send {
    slot: u32,
    dev: Device,
    src: *const c_void,
    bytes: usize,
    /// World rank of the receiver.
    dest: c_int,
    envelope: Box<[u8; envelope::BYTES]>,
    open: bool,
    posted: Instant,
    /// Sent to a receiver waiting for it, below `CUDAMPI_IPC_BYTES` ([`AWAITED_PATIENCE`]).
    awaited: bool,
    /// The slot is POSTED ([`Send::publish`]).
    published: bool,
}

// SAFETY: the program's device address, read only by the driver while the send is open.
unsafe impl std::marker::Send for Send {}

impl Send {
    pub fn envelope(&self) -> *const c_void {
        self.envelope.as_ptr().cast()
    }

    /// Whether completing the send now takes no wait: the receiver has copied, or the sender's
    /// patience has run out since the send was posted (the send then withdraws at once).
    pub fn settled(&self) -> bool {
        !self.open || claims::is_done(self.slot) || self.posted.elapsed() > self.patience()
    }

    fn patience(&self) -> Duration {
        match self.awaited {
            true => AWAITED_PATIENCE,
            false => PATIENCE.now(),
        }
    }

    pub fn source(&self) -> (Device, *const c_void, usize) {
        (self.dev, self.src, self.bytes)
    }

    /// The envelope is on its way: once the program's work on the buffer is done, the
    /// receiver may copy. Made after the envelope left, the check overlaps its journey (on
    /// 2 x H200 a wait for the legacy stream cost 3.9 us of a 14 us message at 16 KiB). On an
    /// error the receive fails too.
    pub fn publish(&mut self) -> Result<(), CudaError> {
        let settled = settle(&self.dev);
        match settled {
            Ok(()) => {
                claims::publish(self.slot);
                self.published = true;
            }
            Err(_) => {
                claims::moved(self.slot, 0, 0, &[0; 64]);
                self.open = false;
            }
        }
        settled
    }

    /// The send of the envelope failed: nobody will take the message.
    pub fn unsent(mut self) {
        claims::forget(self.slot);
        self.open = false;
    }

    /// Waits until the receiver has copied the message or, past the sender's patience, takes
    /// it back and moves it to exported memory. `meanwhile`: lands what peers sent this rank
    /// while it waits (not while the caller holds the request table).
    pub fn finish(&mut self, meanwhile: bool) {
        if !self.open || FINALIZING.load(Relaxed) {
            return;
        }
        self.open = false;
        if !self.published {
            // Never published (its send failed on the way): a receiver that got the envelope
            // fails its receive instead of waiting for the slot.
            claims::moved(self.slot, 0, 0, &[0; 64]);
            return;
        }
        // The receiver may be waiting, in a send of its own, for a copy this thread queued.
        queued::flush();
        let wait = self.patience();
        let mut spins = 0u32;
        loop {
            spins = spins.wrapping_add(1);
            if meanwhile && spins % 64 == 0 {
                pipeline::land_meanwhile();
                queued::flush();
            }
            match claims::look(self.slot) {
                claims::Seen::Done { same_gpu } => {
                    if let Some(p) = peers::get() {
                        p.set_shares_gpu(self.dest, same_gpu);
                    }
                    if !self.awaited {
                        PATIENCE.rewarded();
                    }
                    return;
                }
                claims::Seen::Taken => {}
                claims::Seen::Posted if self.posted.elapsed() > wait && claims::withdraw(self.slot) => {
                    if !self.awaited {
                        PATIENCE.unrewarded(wait);
                    }
                    stats::add(&stats::IPC_WITHDRAWN, 1);
                    match exported::withdrawn(&self.dev, self.src, self.bytes) {
                        Ok((arena, offset, handle)) => claims::moved(self.slot, arena, offset, &handle),
                        Err(e) => {
                            log::error(format_args!("{} failed with {} while a device message waited for its receiver; the receive fails", e.call, e.name()));
                            claims::moved(self.slot, 0, 0, &[0; 64]);
                        }
                    }
                    return;
                }
                claims::Seen::Posted => {}
            }
            std::hint::spin_loop();
        }
    }
}

impl Drop for Send {
    fn drop(&mut self) {
        self.finish(true);
    }
}

/// Announces `bytes` of the program's device memory at `src` for the receiver to copy:
/// `None` when the buffer cannot be exported as it is (no slot free, memory from a pool or
/// VMM), and the message takes the other paths.
/// `awaited`: a message below `CUDAMPI_IPC_BYTES` to a receiver waiting for it.
pub fn offer(dev: &Device, src: *const c_void, bytes: usize, sender: c_int, token: [u8; envelope::TOKEN_BYTES], dest: c_int, awaited: bool) -> Option<Result<Send, CudaError>> {
    if !claims::ready() {
        return None;
    }
    let (id, base, handle) = match exported_allocation(dev, src)? {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    let (slot, seq) = claims::post()?;
    let mut e = Envelope::new(sender as u32, envelope::DIRECT, bytes as u64, id, src as u64 - base, handle.0, token);
    e.pid = std::process::id();
    e.slot = slot;
    e.seq = seq;
    let mut out = Box::new([0u8; envelope::BYTES]);
    e.write(&mut out);
    Some(Ok(Send { slot, dev: *dev, src, bytes, dest, envelope: out, open: true, posted: Instant::now(), awaited, published: false }))
}

/// The allocation holding device memory `at` of `dev`: its id, start and IPC handle (made once
/// per allocation). `None` when it cannot be exported as it is (memory from a pool or VMM).
pub fn exported_allocation(dev: &Device, at: *const c_void) -> Option<Result<(u64, u64, IpcMemHandle), CudaError>> {
    let d = driver::get()?;
    let a = crate::cuda::pointer::ipc_allocation(at)?;
    let (id, base) = (a.id, a.start);
    let handle = (|| {
        let ctx = InContext::enter(dev)?;
        let mut ex = exports();
        let handle = match ex.handles.iter().find(|h| h.0 == id) {
            Some(&(_, h)) => h,
            None => {
                let mut h = IpcMemHandle([0; 64]);
                // SAFETY: the start of a live allocation of this context.
                check("cuIpcGetMemHandle", unsafe { (d.ipc_get_mem_handle)(&mut h, base) })?;
                if ex.handles.len() >= 1024 {
                    ex.handles.clear();
                }
                ex.handles.push((id, h));
                h
            }
        };
        drop(ex);
        drop(ctx);
        Ok(handle)
    })();
    Some(handle.map(|h| (id, base, h)))
}

/// Waits until the program's work on the legacy default stream, which CUDA orders after that
/// of every blocking stream of the context, is done, as the staged path's copy waits for it.
/// An idle stream says so when asked, without a GPU round trip; a busy one gets an event and a
/// wait.
fn settle(dev: &Device) -> Result<(), CudaError> {
    let d = driver::get().ok_or(CudaError { call: "cuInit", code: 3 })?;
    let ctx = InContext::enter(dev)?;
    // SAFETY: the legacy default stream of the current context.
    if d.signals.as_ref().is_some_and(|s| unsafe { (s.stream_query)(std::ptr::null_mut()) } == driver::CUDA_SUCCESS) {
        return Ok(());
    }
    let key = ctx.context() as usize;
    let mut ex = exports();
    let event = match ex.events.iter().find(|e| e.0 == key) {
        Some(&(_, ev)) => ev as *mut c_void,
        None => {
            let mut ev: *mut c_void = std::ptr::null_mut();
            // SAFETY: valid out-pointer; CU_EVENT_DISABLE_TIMING.
            check("cuEventCreate", unsafe { (d.event_create)(&mut ev, 2) })?;
            ex.events.push((key, ev as usize));
            ev
        }
    };
    drop(ex);
    // SAFETY: an event of the current context; the legacy default stream.
    check("cuEventRecord", unsafe { (d.event_record)(event, std::ptr::null_mut()) })?;
    // SAFETY: the legacy default stream of the current context.
    check("cuStreamSynchronize", unsafe { (d.stream_synchronize)(std::ptr::null_mut()) })
}

// ---- the receiver's side -----------------------------------------------------------------

/// A mapping of allocation `id` of world rank `owner`.
struct Mapping {
    owner: u32,
    id: u64,
    ctx: usize,
    ptr: CUdeviceptr,
    ordinal: i32,
    used: u64,
}

struct Mapped {
    list: Vec<Mapping>,
    clock: u64,
}

// SAFETY: device addresses, used under the mutex.
unsafe impl std::marker::Send for Mapped {}

static MAPPED: Mutex<Mapped> = Mutex::new(Mapped { list: Vec::new(), clock: 0 });

fn mapped() -> MutexGuard<'static, Mapped> {
    MAPPED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Allocation `id` of world rank `rank`, whose IPC handle is `handle`, mapped in the current
/// context `ctx`. The caller holds the lock until its copy is done or queued on the context's
/// legacy default stream (which [`close`] waits for), so that no other thread closes the
/// mapping meanwhile.
fn map(m: &mut Mapped, rank: u32, id: u64, handle: [u8; 64], ctx: &InContext, ordinal: i32) -> Result<CUdeviceptr, CudaError> {
    let key = ctx.context() as usize;
    m.clock += 1;
    let now = m.clock;
    if let Some(x) = m.list.iter_mut().find(|x| x.owner == rank && x.id == id && x.ctx == key) {
        x.used = now;
        return Ok(x.ptr);
    }
    if m.list.len() >= MAPPINGS {
        // Closing a mapping lets the sender's memory go once the sender frees it.
        if let Some(i) = (0..m.list.len()).min_by_key(|&i| m.list[i].used) {
            let old = m.list.swap_remove(i);
            close(&old);
        }
    }
    let mut p: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; the handle names a live allocation of the sender, which keeps
    // it until this receive is done.
    let open = |p: &mut CUdeviceptr| unsafe { (ctx.driver().ipc_open_mem_handle)(p, IpcMemHandle(handle), LAZY_ENABLE_PEER_ACCESS) };
    let mut rc = open(&mut p);
    if rc == ALREADY_MAPPED {
        // The driver carves small allocations from larger blocks and maps a block once per
        // process and device: another allocation of the sender in the same block is mapped
        // already (seen on an H100, driver 580). The sender's mappings go, in every context,
        // and this one takes their place.
        let (gone, kept): (Vec<Mapping>, Vec<Mapping>) = m.list.drain(..).partition(|x| x.owner == rank);
        m.list = kept;
        for x in &gone {
            close(x);
        }
        rc = open(&mut p);
    }
    check("cuIpcOpenMemHandle", rc)?;
    m.list.push(Mapping { owner: rank, id, ctx: key, ptr: p, ordinal, used: now });
    Ok(p)
}

fn close(x: &Mapping) {
    let Some(d) = driver::get() else { return };
    if let Ok(_c) = InContext::enter(&Device::new(x.ctx as CUcontext, x.ordinal)) {
        // Copies from the mapping that a completion call queued (`queued`), on this context's
        // legacy default stream, end first.
        // SAFETY: the legacy default stream of the current context; a mapping this module
        // opened in that context.
        unsafe {
            (d.stream_synchronize)(std::ptr::null_mut());
            (d.ipc_close_mem_handle)(x.ptr)
        };
    }
}

/// What a receive that got a direct envelope copies from.
pub enum Source {
    /// The sender's own buffer; the slot is this receiver's until [`Taken::done`].
    Taken(Taken),
    /// The sender moved the data to exported memory: this envelope names it as an IPC one.
    Moved(Envelope),
}

pub struct Taken {
    pid: u32,
    slot: u32,
}

impl Taken {
    /// The copy is over (or was not made): the sender's send may complete.
    pub fn done(self, on_senders_gpu: bool) {
        claims::done(self.pid, self.slot, on_senders_gpu);
    }
}

/// Claims a direct envelope's message. `None`: the sender's slot cannot be found, or the
/// sender could not move it, and the receive fails.
pub fn claim(e: &Envelope) -> Option<Source> {
    match claims::take(e.pid, e.slot, e.seq) {
        claims::Found::Mine => Some(Source::Taken(Taken { pid: e.pid, slot: e.slot })),
        claims::Found::Moved(0, _, _) | claims::Found::Lost => None,
        claims::Found::Moved(arena, offset, handle) => {
            let mut moved = Envelope::new(e.sender, envelope::IPC, e.bytes, arena, offset, handle, e.token);
            moved.pid = e.pid;
            Some(Source::Moved(moved))
        }
    }
}

/// Copies `len` bytes of the message to `dst` (device memory of `dev`, or host memory);
/// without `wait`, a copy to device memory is only started (`queued`).
///
/// The mappings' lock is held only until a copy into device memory is queued, not while it
/// runs: a mapping is closed only after the legacy default stream of its context, where the
/// copy is queued, is synchronised (`close`), so threads' copies overlap. A copy into host
/// memory, complete on return and not on that stream, keeps the lock throughout.
pub fn copy(e: &Envelope, dst: *mut c_void, dev: Option<Device>, len: usize, wait: bool) -> Result<(), CudaError> {
    {
        let mut m = mapped();
        imported::copy_from(e, dst, dev, len, false, |ctx, ordinal| Ok(map(&mut m, e.sender, e.arena, e.handle, ctx, ordinal)? + e.offset))?;
    }
    match (dev, wait) {
        (Some(dev), true) if len > 0 => imported::wait_copy(&dev, len),
        _ => Ok(()),
    }
}

/// Queues a copy of `len` bytes of this process's device memory `src` on `dev` to an offset in
/// an allocation of world rank `rank` (`(id, handle, offset)`: the allocation's id and IPC
/// handle), after a copy of the bytes there into `save`, pinned host memory, on the legacy
/// default stream of `dev`'s context: after the program's work there, and done when a later
/// wait there is.
pub fn copy_to_peer(rank: u32, (id, handle, offset): (u64, [u8; 64], u64), dev: &Device, src: *const c_void, len: usize, save: *mut c_void) -> Result<(), CudaError> {
    let ctx = InContext::enter(dev)?;
    let mut m = mapped();
    let dst = map(&mut m, rank, id, handle, &ctx, dev.ordinal)? + offset;
    let d = ctx.driver();
    // SAFETY: the receiver's buffer holds `len` bytes at `dst` (its door said so) and stays
    // allocated while its receive waits for these copies; `src` and `save` hold `len` bytes.
    unsafe {
        check("cuMemcpyDtoHAsync", (d.memcpy_dtoh_async)(save, dst, len, std::ptr::null_mut()))?;
        check("cuMemcpyDtoDAsync", (d.memcpy_dtod_async)(dst, src as CUdeviceptr, len, std::ptr::null_mut()))
    }
}

/// Closes every mapping and destroys the events (`MPI_Finalize`, after every rank is there).
pub fn release_all() {
    let list = std::mem::take(&mut mapped().list);
    for x in &list {
        close(x);
    }
    let mut ex = exports();
    ex.handles.clear();
    let Some(d) = driver::get() else { return };
    for (_, ev) in ex.events.drain(..) {
        // SAFETY: an event this module created.
        unsafe { (d.event_destroy)(ev as *mut c_void) };
    }
}
