//! Windows whose device memory every member maps: one-sided communication inside a node at the
//! cost of the bytes it moves.
//!
//! When every process of a window's communicator runs on this node, `MPI_Win_create` exchanges
//! one record per process (`Record`) over the real library: device memory gets a CUDA IPC
//! handle, and each process opens the handles of the others. If every process opened every
//! handle (one `MPI_Allreduce` says so), the window is *mapped*: a process whose part is device
//! memory gives the library a window of no bytes, and an operation on such a target is a copy
//! the origin makes itself between its buffer and the target's memory. No public copy exists,
//! so no synchronisation call copies a window, and the model is `MPI_WIN_UNIFIED`. Otherwise
//! (a process on another node, a handle that does not open, `CUDAMPI_IPC=0`) every process keeps
//! the path of `windows.rs`, decided alike everywhere.
//!
//! What the library no longer sees, cudampi synchronises:
//! - *Completion.* An origin's copies run on the legacy default stream of the context the
//!   peers' memory is mapped in (after what the program queued there before the call, as for
//!   every copy of cudampi's); every call that completes operations (fence, complete, unlock,
//!   flush) waits for it first, and so does every call after which peers may read this
//!   process's part (those, post and sync), so that a copy the program made into its own part
//!   has landed.
//! - *Fence.* A barrier on the window's own communicator, after the copies are done: no
//!   process reads or writes a part before its owner reached the fence, nor leaves it before
//!   every copy into its part is done.
//! - *Post-start-complete-wait.* `MPI_Win_post` sends each origin of its group a message and
//!   `MPI_Win_start` waits for those of its targets (not with `MPI_MODE_NOCHECK`);
//!   `MPI_Win_complete` sends each target a message once the copies are done, and
//!   `MPI_Win_wait` (or a successful `MPI_Win_test`) takes one from each origin.
//! - *Passive target.* A reader-writer lock per part in a shared-memory segment of the node:
//!   `MPI_LOCK_EXCLUSIVE` takes it as a writer, `MPI_LOCK_SHARED` and `MPI_Win_lock_all` as a
//!   reader. A waiting process keeps the library progressing, since its peers may need that.
//! - *Accumulates* are atomic per target, as MPI requires of concurrent accumulates: each one
//!   holds the target's accumulate lock (in the same segment) while it reads the target's
//!   bytes to host memory, combines them with `MPI_Reduce_local` of the real library (any
//!   predefined operation, any type) and writes them back.
//!
//! A window whose parts are all device memory leaves the library's synchronisation calls out:
//! it has nothing of the window. One with host parts too calls them as well, for the operations
//! on those parts, which go through the library as before.
//!
//! It may use every layer below the handlers; `windows.rs` and `rma.rs` call it.

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::base::{config, log, shm};
use crate::cuda::copy::check;
use crate::cuda::driver::{self, CUdeviceptr, IpcMemHandle};
use crate::cuda::{self, reduce, CudaError, Device, InContext, Location};
use crate::engine::kinds;
use crate::fastpath::{self, held};
use crate::mpi::abi::{self, Handle};
pub use crate::handlers::side::{Buf, Target};
use crate::handlers::side::{accumulate_element, device_window_attribute, lock, reduce_local, settle_stream, Carried, Table, element_of, matching, Side};
use crate::mpi::{errors, real};

/// One process's account of its part, as exchanged at `MPI_Win_create`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Record {
    /// 1: the part is device memory with an IPC handle; 2: device memory without one (or
    /// memory no one can read); 0: host memory, or none.
    kind: u32,
    /// The process can map its peers' memory (it has a GPU context to map it in).
    maps: u32,
    /// Rank 0's: its process id and window number, which name the window's lock segment, and
    /// whether it made the segment.
    pid: u32,
    serial: u32,
    locks: u32,
    _pad: u32,
    size: u64,
    disp_unit: i64,
    /// The part's offset in the allocation the handle names.
    offset: u64,
    handle: [u8; 64],
}

const RECORD_BYTES: c_int = std::mem::size_of::<Record>() as c_int;

/// One target's part as this process reaches it.
struct Part {
    /// The part's first byte in this process (mapped, or the process's own device memory); 0
    /// for a host part, reached through the library.
    base: CUdeviceptr,
    size: usize,
    disp_unit: i64,
    /// The allocation this process opened, to close at the free (0: nothing opened).
    opened: CUdeviceptr,
}

/// The per-target words of the lock segment.
#[repr(C)]
struct Slot {
    /// Passive-target lock: `WRITER`, or the number of readers.
    lock: AtomicU32,
    /// Held by one accumulate at a time.
    acc: AtomicU32,
}

const WRITER: u32 = 1 << 31;
/// The legacy default stream.
const LEGACY: *mut c_void = std::ptr::null_mut();
const POSTED_TAG: c_int = 1;
const DONE_TAG: c_int = 2;

pub struct Mapped {
    /// The window's communicator duplicated: barriers and the post/complete messages.
    comm: Handle,
    group: Handle,
    rank: c_int,
    parts: Vec<Part>,
    /// Every part is device memory (or none): the library's window holds nothing.
    all: bool,
    /// The context the peers' memory is mapped in. The window's copies and kernels run on its
    /// legacy default stream, as cudampi's other copies do: after the work the program queued
    /// there (or on any blocking stream) before the call.
    dev: Device,
    /// Bytes queued since the stream was last waited for.
    queued: AtomicUsize,
    slots: *mut Slot,
    slots_bytes: usize,
    /// This process's own part's device address, for `MPI_WIN_BASE`.
    own: Option<*mut c_void>,
    /// Its bytes: the value `MPI_WIN_SIZE` points to.
    size_attribute: isize,
    /// Origins of the exposure epoch (`MPI_Win_post`) whose completion is not yet taken.
    origins: Vec<c_int>,
    /// Targets of the access epoch (`MPI_Win_start`).
    targets: Vec<c_int>,
    /// Passive-target locks held: (target, exclusive).
    held: Vec<(c_int, bool)>,
}

// SAFETY: handles and addresses, used under the window's mutex.
unsafe impl Send for Mapped {}

static MAPPED: Table<Mapped> = Table::new();
/// Windows this process made, which name the lock segments of those it is rank 0 of.
static SERIAL: AtomicU32 = AtomicU32::new(0);

/// Whether any window is mapped.
pub fn any() -> bool {
    MAPPED.any()
}

/// The mapped window `win`, if it is one.
pub fn get(win: Handle) -> Option<Arc<Mutex<Mapped>>> {
    MAPPED.get(win)
}

fn segment_name(pid: u32, serial: u32) -> CString {
    CString::new(format!("/cudampi-win-{pid}-{serial}")).unwrap_or_default()
}

/// What `MPI_Win_create` gives the library for this process once the processes agreed.
pub enum Plan {
    /// Not mapped: the path of `windows.rs`.
    Declined,
    /// Mapped: the library gets a window of no bytes from a process with a device part.
    Mapped(Box<Mapped>),
}

/// The collective step of `MPI_Win_create(_c)` on `comm`, before the library's: every process
/// of `comm` calls it, whatever its memory, and all reach the same plan. `Err` is an MPI code
/// (raised on `comm`).
pub fn prepare(name: &'static str, base: *mut c_void, size: isize, disp_unit: i64, comm: Handle) -> Result<Plan, c_int> {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return Ok(Plan::Declined) };
    if !config::get().ipc || !fastpath::node_mates(comm) {
        return Ok(Plan::Declined);
    }
    let (mut rank, mut n) = (0, 0);
    // SAFETY: valid out-pointers; the caller's communicator.
    unsafe {
        (p.comm_rank)(comm, &mut rank);
        (p.comm_size)(comm, &mut n);
    }
    let mine = describe(base, size, disp_unit);
    let mut me = mine.record;
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    let mut segment: Option<(*mut c_void, usize)> = None;
    let slots_bytes = std::mem::size_of::<Slot>() * n as usize;
    // Rank 0 makes the lock segment before it knows whether the window will be mapped, sparing
    // a round of messages; a process that never loaded CUDA makes none (and its window is not
    // mapped: some process of a mapped window has device memory, and rank 0 maps it too).
    if rank == 0 && driver::get().is_some() {
        me.pid = std::process::id();
        me.serial = serial;
        segment = shm::create(&segment_name(me.pid, serial), slots_bytes).map(|at| (at, slots_bytes));
        me.locks = segment.is_some() as u32;
    }
    let mut all = vec![me; n as usize];
    // SAFETY: one record in, `n` out, as bytes.
    let rc = unsafe { (p.allgather)((&me as *const Record).cast(), RECORD_BYTES, abi.byte, all.as_mut_ptr().cast(), RECORD_BYTES, abi.byte, comm) };
    let head = all[0];
    let cleanup = |segment: Option<(*mut c_void, usize)>| {
        if let Some((at, bytes)) = segment {
            shm::unmap(at, bytes);
        }
        if rank == 0 && head.locks == 1 {
            shm::unlink(&segment_name(head.pid, head.serial));
        }
    };
    if rc != 0 {
        cleanup(segment);
        return Err(rc);
    }
    let wanted = all.iter().any(|r| r.kind == 1) && all.iter().all(|r| r.kind != 2 && r.maps == 1) && head.locks == 1;
    if !wanted {
        cleanup(segment);
        return Ok(Plan::Declined);
    }
    if rank != 0 {
        segment = shm::open(&segment_name(head.pid, head.serial), slots_bytes).map(|at| (at, slots_bytes));
    }
    let dev = mine.dev;
    let mut parts: Vec<Part> = Vec::with_capacity(n as usize);
    let mut ok = segment.is_some();
    let ctx = InContext::enter(&dev);
    let d = driver::get();
    for (r, rec) in all.iter().enumerate() {
        let mut part = Part { base: 0, size: rec.size as usize, disp_unit: rec.disp_unit, opened: 0 };
        if rec.kind == 1 && ok {
            if r as c_int == rank {
                part.base = base as CUdeviceptr;
            } else if let (Ok(_), Some(d)) = (&ctx, d) {
                let mut at: CUdeviceptr = 0;
                // SAFETY: valid out-pointer; the handle names a live allocation of a peer.
                match check("cuIpcOpenMemHandle", unsafe { (d.ipc_open_mem_handle)(&mut at, IpcMemHandle(rec.handle), fastpath::LAZY_ENABLE_PEER_ACCESS) }) {
                    Ok(()) => {
                        part.opened = at;
                        part.base = at + rec.offset;
                    }
                    Err(e) => {
                        log::debug(format_args!("{name}: rank {r}'s device memory cannot be mapped here ({}): the window stages", e.name()));
                        ok = false;
                    }
                }
            } else {
                ok = false;
            }
        }
        parts.push(part);
    }
    drop(ctx);
    let mine_ok = ok as u8;
    let mut oks = vec![0u8; n as usize];
    // SAFETY: one byte in, `n` out.
    let rc = unsafe { (p.allgather)((&mine_ok as *const u8).cast(), 1, abi.byte, oks.as_mut_ptr().cast(), 1, abi.byte, comm) };
    if rank == 0 {
        shm::unlink(&segment_name(head.pid, head.serial));
    }
    let mut m = Mapped {
        comm: 0,
        group: 0,
        rank,
        all: all.iter().all(|r| r.kind == 1 || r.size == 0),
        parts,
        dev,
        queued: AtomicUsize::new(0),
        slots: segment.map_or(std::ptr::null_mut(), |(at, _)| at.cast()),
        slots_bytes: segment.map_or(0, |(_, b)| b),
        own: (mine.record.kind == 1).then_some(base),
        size_attribute: size,
        origins: Vec::new(),
        targets: Vec::new(),
        held: Vec::new(),
    };
    if rc != 0 || oks.iter().any(|&b| b != 1) {
        m.release();
        return if rc != 0 { Err(rc) } else { Ok(Plan::Declined) };
    }
    // SAFETY: valid out-pointers; the caller's communicator.
    let rc = unsafe { (p.comm_dup)(comm, &mut m.comm) };
    if rc != 0 {
        m.comm = 0;
        m.release();
        return Err(rc);
    }
    // SAFETY: as above; errors on cudampi's own communicator return to it.
    unsafe {
        (p.comm_set_errhandler)(m.comm, abi.errors_return);
        (p.comm_group)(m.comm, &mut m.group);
    }
    Ok(Plan::Mapped(Box::new(m)))
}

struct Mine {
    record: Record,
    /// The context this process maps its peers' memory in.
    dev: Device,
}

/// This process's record: its part, and whether it can map the others'.
fn describe(base: *mut c_void, size: isize, disp_unit: i64) -> Mine {
    let mut record = Record { kind: 0, maps: 0, pid: 0, serial: 0, locks: 0, _pad: 0, size: size.max(0) as u64, disp_unit, offset: 0, handle: [0; 64] };
    let mut dev = Device::primary(0);
    let d = driver::get();
    match cuda::locate(base) {
        Location::Device(own) if size > 0 && !own.managed => {
            dev = own;
            record.kind = 2;
            if let (Some(d), Ok(_ctx)) = (d, InContext::enter(&own)) {
                let (mut start, mut len): (CUdeviceptr, usize) = (0, 0);
                let mut handle = IpcMemHandle([0; 64]);
                // SAFETY: valid out-pointers; `base` is device memory of the current context.
                let named = unsafe { (d.mem_get_address_range)(&mut start, &mut len, base as CUdeviceptr) == 0 && (d.ipc_get_mem_handle)(&mut handle, start) == 0 };
                if named {
                    record.kind = 1;
                    record.offset = base as u64 - start;
                    record.handle = handle.0;
                }
            }
        }
        // Freed device memory: the path of `windows.rs` refuses it.
        Location::Unreadable if size > 0 => record.kind = 2,
        _ => {}
    }
    // A host part maps its peers' memory in its first GPU's primary context, which it enters
    // only once the window is to be mapped: a host window must not cost a context.
    record.maps = d.is_some() as u32;
    Mine { record, dev }
}

impl Carried for Mapped {
    fn register(self, win: Handle) {
        MAPPED.insert(win, self);
    }

    fn own_device(&self) -> bool {
        self.own.is_some()
    }

    fn discard(mut self) {
        self.release();
    }
}

impl Mapped {
    /// Closes what the window opened.
    fn release(&mut self) {
        if let Some(d) = driver::get() {
            if let Ok(_ctx) = InContext::enter(&self.dev) {
                for part in self.parts.iter_mut().filter(|p| p.opened != 0) {
                    // SAFETY: opened by `prepare`, no copy in flight (the stream is idle).
                    unsafe { (d.ipc_close_mem_handle)(part.opened) };
                    part.opened = 0;
                }
            }
        }
        if !self.slots.is_null() {
            shm::unmap(self.slots.cast(), self.slots_bytes);
            self.slots = std::ptr::null_mut();
        }
        if let Some(p) = real::pmpi() {
            if self.group != 0 {
                // SAFETY: the group made at `prepare`.
                unsafe { (p.group_free)(&mut self.group) };
                self.group = 0;
            }
            if self.comm != 0 {
                // SAFETY: the communicator made at `prepare`.
                unsafe { (p.comm_free)(&mut self.comm) };
                self.comm = 0;
            }
        }
    }

    /// Waits for this process's copies on the window (see [`Mapped::settle_for`]).
    fn settle(&self, name: &'static str, win: Handle) -> Result<(), c_int> {
        self.settle_for(name, errors::on_window(win))
    }

    /// Waits for the window's copies, and for the work the program queued on the stream, such
    /// as a copy of its own into its part, whose bytes peers may read once this returns (a
    /// copy from pageable memory is still landing when `cudaMemcpy` returns); errors go to
    /// `errh`. Where this process queued nothing it costs a query of the stream (a device part)
    /// or nothing (a host part).
    fn settle_for(&self, name: &'static str, errh: Option<Handle>) -> Result<(), c_int> {
        let bytes = self.queued.swap(0, Ordering::AcqRel);
        if bytes == 0 && self.own.is_none() {
            return Ok(());
        }
        settle_stream(name, errh, &self.dev, bytes)
    }

    fn slot(&self, target: c_int) -> &Slot {
        // SAFETY: one slot per rank of the window, mapped while the window lives.
        unsafe { &*self.slots.add(target as usize) }
    }

    /// The part of `target` if it is mapped.
    fn part(&self, target: c_int) -> Option<&Part> {
        self.parts.get(usize::try_from(target).ok()?).filter(|p| p.base != 0)
    }

    fn barrier(&self) -> c_int {
        real::pmpi().map_or(abi::get().err_intern, |p| {
            // SAFETY: the window's own communicator.
            unsafe { (p.barrier)(self.comm) }
        })
    }

    /// Ranks in the window of the members of `group`.
    fn ranks_of(&self, group: Handle) -> Vec<c_int> {
        let Some(p) = real::pmpi() else { return Vec::new() };
        let mut n = 0;
        // SAFETY: the caller's group; valid out-pointer.
        if unsafe { (p.group_size)(group, &mut n) } != 0 || n <= 0 {
            return Vec::new();
        }
        let ranks: Vec<c_int> = (0..n).collect();
        let mut out = vec![abi::UNDEFINED; n as usize];
        // SAFETY: n ranks in, n out.
        unsafe { (p.group_translate_ranks)(group, n, ranks.as_ptr(), self.group, out.as_mut_ptr()) };
        out.retain(|&r| r != abi::UNDEFINED && r != self.rank);
        out
    }
}

/// Waits on a word of the lock segment, keeping the library progressing (a peer's call may need
/// this process to progress before it lets the word go).
fn spin_until(comm: Handle, mut taken: impl FnMut() -> bool) {
    let p = real::pmpi();
    let mut round = 0u32;
    while !taken() {
        round += 1;
        if round % 64 == 0 {
            if let Some(p) = p {
                let mut flag = 0;
                let mut status = abi::Status::zeroed();
                // SAFETY: the window's own communicator; valid out-pointers.
                unsafe { (p.iprobe)(abi::get().any_source, abi::get().any_tag, comm, &mut flag, status.as_mut_ptr()) };
            }
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

fn take_shared(s: &Slot, comm: Handle) {
    spin_until(comm, || {
        let v = s.lock.load(Ordering::Acquire);
        v & WRITER == 0 && s.lock.compare_exchange(v, v + 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
    });
}

fn take_exclusive(s: &Slot, comm: Handle) {
    spin_until(comm, || s.lock.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok());
}

fn give_back(s: &Slot, exclusive: bool) {
    match exclusive {
        true => s.lock.store(0, Ordering::Release),
        false => {
            s.lock.fetch_sub(1, Ordering::Release);
        }
    }
}

/// The outcome of a synchronisation call: the library's code first, then cudampi's.
fn outcome(rc: c_int, mine: Result<(), c_int>) -> c_int {
    if rc != 0 {
        rc
    } else {
        mine.err().unwrap_or(0)
    }
}

/// `MPI_Win_fence`: the copies are done, then the library's fence (for host parts), then the
/// barrier (not when the fence neither ends nor starts an epoch).
pub fn fence(name: &'static str, assert: c_int, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let m = lock(&m);
    let settled = m.settle(name, win);
    let rc = if m.all { 0 } else { call() };
    let abi = abi::get();
    let quiet = assert & abi.mode_noprecede != 0 && assert & abi.mode_nosucceed != 0;
    let rc = if rc == 0 && !quiet { m.barrier() } else { rc };
    outcome(rc, settled)
}

/// `MPI_Win_post`: each origin of `group` hears that this part is exposed.
pub fn post(name: &'static str, group: Handle, assert: c_int, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let mut m = lock(&m);
    if let Err(rc) = m.settle(name, win) {
        return rc;
    }
    let rc = if m.all { 0 } else { call() };
    if rc != 0 {
        return rc;
    }
    m.origins = m.ranks_of(group);
    if assert & abi::get().mode_nocheck == 0 {
        message_each(&m.origins, POSTED_TAG, m.comm)
    } else {
        0
    }
}

/// `MPI_Win_start`: waits until each target of `group` has posted.
pub fn start(_name: &'static str, group: Handle, assert: c_int, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let mut m = lock(&m);
    let rc = if m.all { 0 } else { call() };
    if rc != 0 {
        return rc;
    }
    m.targets = m.ranks_of(group);
    if assert & abi::get().mode_nocheck == 0 {
        take_each(&m.targets, POSTED_TAG, m.comm)
    } else {
        0
    }
}

/// `MPI_Win_complete`: the copies are done, then each target hears so.
pub fn complete(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let mut m = lock(&m);
    let settled = m.settle(name, win);
    let targets = std::mem::take(&mut m.targets);
    let sent = message_each(&targets, DONE_TAG, m.comm);
    let rc = if m.all { 0 } else { call() };
    outcome(if rc != 0 { rc } else { sent }, settled)
}

/// `MPI_Win_wait`: each origin of the exposure epoch has completed.
pub fn wait(_name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let mut m = lock(&m);
    let rc = if m.all { 0 } else { call() };
    if rc != 0 {
        return rc;
    }
    let origins = std::mem::take(&mut m.origins);
    take_each(&origins, DONE_TAG, m.comm)
}

/// `MPI_Win_test`: as `wait` once every origin's message is there, else `flag` 0.
pub fn test(_name: &'static str, win: Handle, flag: *mut c_int, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let mut m = lock(&m);
    if !m.all {
        let rc = call();
        // SAFETY: the caller's flag, which the library has just set.
        if rc != 0 || flag.is_null() || unsafe { *flag } == 0 {
            return rc;
        }
    }
    let Some(p) = real::pmpi() else { return abi::get().err_intern };
    let comm = m.comm;
    let arrived = m.origins.iter().all(|&r| {
        let mut there = 0;
        let mut status = abi::Status::zeroed();
        // SAFETY: the window's communicator; valid out-pointers.
        unsafe { (p.iprobe)(r, DONE_TAG, comm, &mut there, status.as_mut_ptr()) == 0 && there != 0 }
    });
    if !flag.is_null() {
        // SAFETY: the caller's flag.
        unsafe { *flag = arrived as c_int };
    }
    if !arrived {
        return 0;
    }
    let origins = std::mem::take(&mut m.origins);
    take_each(&origins, DONE_TAG, comm)
}

fn message_each(ranks: &[c_int], tag: c_int, comm: Handle) -> c_int {
    let (Some(p), abi) = (real::pmpi(), abi::get()) else { return abi::get().err_intern };
    // SAFETY: no bytes, on the window's communicator.
    each(ranks, |r| unsafe { (p.send)(std::ptr::null(), 0, abi.byte, r, tag, comm) })
}

fn take_each(ranks: &[c_int], tag: c_int, comm: Handle) -> c_int {
    let (Some(p), abi) = (real::pmpi(), abi::get()) else { return abi::get().err_intern };
    each(ranks, |r| {
        let mut status = abi::Status::zeroed();
        let mut req: Handle = 0;
        // SAFETY: no bytes, on the window's communicator; waited for at once.
        unsafe {
            match (p.irecv)(std::ptr::null_mut(), 0, abi.byte, r, tag, comm, &mut req) {
                0 => (p.wait)((&mut req as *mut Handle).cast(), status.as_mut_ptr()),
                rc => rc,
            }
        }
    })
}

/// `call` for every rank, all of them whatever fails: the first failure's code, or 0.
fn each(ranks: &[c_int], mut call: impl FnMut(c_int) -> c_int) -> c_int {
    ranks.iter().fold(0, |first, &r| {
        let rc = call(r);
        if first != 0 {
            first
        } else {
            rc
        }
    })
}

/// `MPI_Win_lock` (`Some((lock_type, rank))`) and `MPI_Win_lock_all` (`None`).
pub fn lock_target(_name: &'static str, which: Option<(c_int, c_int)>, assert: c_int, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(w) = get(win) else { return call() };
    let abi = abi::get();
    let (slots, comm, all, wanted) = {
        let m = lock(&w);
        let wanted: Vec<(c_int, bool)> = match which {
            Some((kind, r)) => vec![(r, kind == abi.lock_exclusive)],
            None => (0..m.parts.len() as c_int).map(|r| (r, false)).collect(),
        };
        let mapped: Vec<(c_int, bool)> = wanted.into_iter().filter(|(r, _)| m.part(*r).is_some()).collect();
        (m.slots as usize, m.comm, m.all, mapped)
    };
    if assert & abi.mode_nocheck == 0 {
        // Not under the window's mutex: another thread of this process may hold a lock that a
        // peer waits for, and must be able to give it back meanwhile.
        for &(r, exclusive) in &wanted {
            // SAFETY: one slot per rank of the window, mapped while the window lives (it is not
            // freed while an epoch of this process is open on it).
            let slot = unsafe { &*(slots as *const Slot).add(r as usize) };
            match exclusive {
                true => take_exclusive(slot, comm),
                false => take_shared(slot, comm),
            }
        }
        lock(&w).held.extend(wanted);
    }
    if all {
        return 0;
    }
    call()
}

/// `MPI_Win_unlock` (`Some(rank)`) and `MPI_Win_unlock_all` (`None`): the copies are done, then
/// the locks go.
pub fn unlock(name: &'static str, target: Option<c_int>, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let mut m = lock(&m);
    let settled = m.settle(name, win);
    let rc = if m.all { 0 } else { call() };
    let held = std::mem::take(&mut m.held);
    let (gone, kept): (Vec<_>, Vec<_>) = held.into_iter().partition(|(r, _)| target.map_or(true, |t| t == *r));
    for (r, exclusive) in gone {
        give_back(m.slot(r), exclusive);
    }
    m.held = kept;
    outcome(rc, settled)
}

/// `MPI_Win_flush(_local)(_all)`: the copies are done.
pub fn flush(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let m = lock(&m);
    let settled = m.settle(name, win);
    let rc = if m.all { 0 } else { call() };
    outcome(rc, settled)
}

/// `MPI_Win_sync`: this process's copies, and its own stores into its part, are done. A window
/// with all its parts mapped is in no epoch of the library's, which some libraries check here,
/// so the library's routine runs only for a window with host parts.
pub fn sync(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let m = lock(&m);
    let settled = m.settle(name, win);
    std::sync::atomic::fence(Ordering::SeqCst);
    let rc = if m.all { 0 } else { call() };
    outcome(rc, settled)
}

/// `MPI_Win_free`: the copies are done and every process is past them, then the mappings go.
pub fn free(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(m) = get(win) else { return call() };
    let settled = lock(&m).settle(name, win);
    let synced = lock(&m).barrier();
    drop(m);
    // Out of the table before the library frees the handle: another thread's new window may
    // get the same handle the moment it is free.
    let taken = MAPPED.remove(win);
    let rc = call();
    if rc != 0 {
        if let Some(g) = taken {
            MAPPED.put_back(win, g);
        }
        return rc;
    }
    if let Some(g) = taken {
        lock(&g).release();
    }
    outcome(synced, settled)
}

/// `MPI_Win_get_attr` of a mapped window with a device part: its base, size and model.
pub fn attribute(win: Handle, keyval: c_int, value: *mut c_void) {
    let Some(m) = get(win) else { return };
    let m = lock(&m);
    if let Some(base) = m.own {
        device_window_attribute(keyval, value, base, &m.size_attribute);
    }
}

/// Forgets every window (after the library's `MPI_Finalize`, which freed its communicators).
pub fn clear() {
    for m in MAPPED.take_all() {
        let mut m = lock(&m);
        m.comm = 0;
        m.group = 0;
        m.release();
    }
}

// ---- the operations ----

/// A one-sided operation on a target that cudampi carries out (mapped and served windows).
#[derive(Clone, Copy)]
pub enum What {
    Put(Buf),
    Get(Buf),
    /// `MPI_Accumulate`: origin, operation.
    Accumulate(Buf, Handle),
    /// `MPI_Get_accumulate` and `MPI_Fetch_and_op`: origin, result, operation.
    GetAccumulate(Buf, Buf, Handle),
    /// `MPI_Compare_and_swap`: origin, compare, result (one element each).
    CompareAndSwap(Buf, Buf, Buf),
}

/// Carries out `what` on `target` of window `win` when that target's part is mapped; `None`
/// leaves it to the library's path (not a mapped window, a host part, `MPI_PROC_NULL`). A
/// request form (`request` not null) gets a request that is complete: its copies are done.
pub fn operate(name: &'static str, win: Handle, target: c_int, at: Target, what: What, request: *mut c_void) -> Option<c_int> {
    let m = get(win)?;
    let m = lock(&m);
    let part = m.part(target)?;
    let errh = errors::on_window(win);
    let rc = match run(name, &m, part, at, what, errh) {
        Ok(()) => 0,
        Err(rc) => return Some(rc),
    };
    if request.is_null() {
        return Some(rc);
    }
    if let Err(rc) = m.settle(name, win) {
        return Some(rc);
    }
    Some(held::completed(request, &abi::Status::zeroed(), 0))
}

fn run(name: &'static str, m: &Mapped, part: &Part, (disp, count, dt): Target, what: What, errh: Option<Handle>) -> Result<(), c_int> {
    let abi = abi::get();
    let at = (part.base as i64).wrapping_add((disp as i64).wrapping_mul(part.disp_unit));
    let target = Side::of(name, errh, (at as *const c_void, count, dt), Some(m.dev))?;
    let span = target.t.span(count).map_err(|e| errors::raise(errh, e))?;
    let first = disp as i64 * part.disp_unit + span.offset;
    if disp < 0 || first < 0 || first as u64 + span.len as u64 > part.size as u64 {
        log::error(format_args!(
            "{name}: bytes {first} to {} of the target's window, which has {} bytes",
            first + span.len as i64,
            part.size
        ));
        return Err(errors::raise(errh, abi.err_rma_range));
    }
    match what {
        What::Put(origin) => {
            let origin = matching(name, errh, origin, &target)?;
            copy(name, m, &origin, &target, errh)
        }
        What::Get(result) => {
            let result = matching(name, errh, result, &target)?;
            copy(name, m, &target, &result, errh)
        }
        What::Accumulate(origin, op) => {
            let origin = matching(name, errh, origin, &target)?;
            if abi.same(op, abi.op_no_op) {
                return Ok(());
            }
            let _held = Exclusive::take(m, part_rank(m, part));
            m.settle_for(name, errh)?;
            combine(name, m, errh, &origin, &target, op, None)?;
            m.settle_for(name, errh)
        }
        What::GetAccumulate(origin, result, op) => {
            let result = matching(name, errh, result, &target)?;
            let origin = if abi.same(op, abi.op_no_op) { None } else { Some(matching(name, errh, origin, &target)?) };
            let _held = Exclusive::take(m, part_rank(m, part));
            m.settle_for(name, errh)?;
            match origin {
                Some(origin) => combine(name, m, errh, &origin, &target, op, Some(&result))?,
                None => copy(name, m, &target, &result, errh)?,
            }
            m.settle_for(name, errh)
        }
        What::CompareAndSwap(origin, compare, result) => {
            let (origin, compare, result) = (matching(name, errh, origin, &target)?, matching(name, errh, compare, &target)?, matching(name, errh, result, &target)?);
            let _held = Exclusive::take(m, part_rank(m, part));
            m.settle_for(name, errh)?;
            let n = target.bytes();
            let (mut old, mut expected, mut new) = (vec![0u8; n], vec![0u8; n], vec![0u8; n]);
            target.read(name, errh, &mut old)?;
            compare.read(name, errh, &mut expected)?;
            origin.read(name, errh, &mut new)?;
            result.write(name, errh, &old)?;
            if old == expected {
                target.write(name, errh, &new)?;
            }
            Ok(())
        }
    }
}

fn part_rank(m: &Mapped, part: &Part) -> c_int {
    m.parts.iter().position(|p| std::ptr::eq(p, part)).unwrap_or(0) as c_int
}

/// Copies the payload of `from` to `to`: one GPU copy on the legacy default stream of the
/// window's context where both are contiguous and reachable from it, else packed through host
/// memory, each side in its own context (an origin buffer on another GPU of the process).
fn copy(name: &'static str, m: &Mapped, from: &Side, to: &Side, errh: Option<Handle>) -> Result<(), c_int> {
    let n = from.bytes();
    if n == 0 {
        return Ok(());
    }
    if from.contiguous() && to.contiguous() && from.reachable_from(&m.dev) && to.reachable_from(&m.dev) {
        let fail = |e| errors::cuda(name, errh, e, to.at, n, &m.dev);
        let d = driver::get().ok_or(CudaError { call: "cuInit", code: 3 }).map_err(fail)?;
        let _ctx = InContext::enter(&m.dev).map_err(fail)?;
        // SAFETY: both hold `n` bytes (the range was checked against the target's part); a copy
        // to host memory is complete on return, one to device memory on the stream
        // completes at the next synchronisation.
        let rc = unsafe {
            match (from.dev.is_some(), to.dev.is_some()) {
                (true, true) => {
                    m.queued.fetch_add(n, Ordering::AcqRel);
                    check("cuMemcpyDtoDAsync", (d.memcpy_dtod_async)(to.at as CUdeviceptr, from.at as CUdeviceptr, n, LEGACY))
                }
                // From pageable memory the driver returns once it holds the bytes, before they
                // are in device memory: on the stream, which the completion waits for.
                (false, true) => {
                    m.queued.fetch_add(n, Ordering::AcqRel);
                    check("cuMemcpyHtoDAsync", (d.memcpy_htod_async)(to.at as CUdeviceptr, from.at, n, LEGACY))
                }
                (true, false) => check("cuMemcpyDtoH", (d.memcpy_dtoh)(to.at, from.at as CUdeviceptr, n)),
                (false, false) => {
                    std::ptr::copy_nonoverlapping(from.at.cast::<u8>(), to.at.cast::<u8>(), n);
                    Ok(())
                }
            }
        };
        return rc.map_err(fail);
    }
    let mut bytes = vec![0u8; n];
    from.read(name, errh, &mut bytes)?;
    to.write(name, errh, &bytes)
}

/// `target = origin op target`, the old target bytes to `result` first where there is one:
/// with cudampi's reduction kernel on the legacy default stream where it has the type and the
/// operation and the buffers are contiguous device memory of the window's GPU, else in host
/// memory with the library's `MPI_Reduce_local`. The caller holds the target's accumulate lock
/// and waits for the stream.
fn combine(name: &'static str, m: &Mapped, errh: Option<Handle>, origin: &Side, target: &Side, op: Handle, result: Option<&Side>) -> Result<(), c_int> {
    let abi = abi::get();
    if abi.same(op, abi.op_replace) {
        if let Some(result) = result {
            copy(name, m, target, result, errh)?;
        }
        return copy(name, m, origin, target, errh);
    }
    let element = element_of(target);
    let here = |s: &Side| s.contiguous() && s.dev.is_some_and(|d| d.ordinal == m.dev.ordinal && !d.managed);
    if let Some((e, o)) = element.and_then(|(dt, _)| on_gpu(dt, op)).filter(|_| here(origin) && target.contiguous()) {
        if let Some(result) = result {
            copy(name, m, target, result, errh)?;
        }
        let n = target.bytes();
        let fail = |err| errors::cuda(name, errh, err, target.at, n, &m.dev);
        let ctx = InContext::enter(&m.dev).map_err(fail)?;
        m.queued.fetch_add(n.max(1), Ordering::AcqRel);
        if reduce::combine(&ctx, LEGACY, target.at as CUdeviceptr, origin.at as CUdeviceptr, n / e.bytes(), e, o).map_err(fail)? {
            return Ok(());
        }
        // No kernel here after all: the result, if any, is copied again below, the same bytes.
    }
    m.settle_for(name, errh)?;
    let n = target.bytes();
    let mut old = vec![0u8; n];
    target.read(name, errh, &mut old)?;
    if let Some(result) = result {
        result.write(name, errh, &old)?;
    }
    let mut new = vec![0u8; n];
    origin.read(name, errh, &mut new)?;
    let (element, size) = accumulate_element(name, errh, target)?;
    reduce_local(name, errh, &new, &mut old, element, size, op)?;
    target.write(name, errh, &old)
}

/// The reduction kernel's element type and operation for `datatype` and `op`, where it has
/// them (the types and operations NCCL has, less the 8-bit types).
fn on_gpu(datatype: Handle, op: Handle) -> Option<(reduce::Element, reduce::Op)> {
    use crate::cuda::nccl::{DataType, RedOp};
    let e = match kinds::reducible(datatype)? {
        DataType::ncclInt32 => reduce::Element::I32,
        DataType::ncclUint32 => reduce::Element::U32,
        DataType::ncclInt64 => reduce::Element::I64,
        DataType::ncclUint64 => reduce::Element::U64,
        DataType::ncclFloat32 => reduce::Element::F32,
        DataType::ncclFloat64 => reduce::Element::F64,
        _ => return None,
    };
    let o = match kinds::operation(op)? {
        RedOp::ncclSum => reduce::Op::Sum,
        RedOp::ncclProd => reduce::Op::Prod,
        RedOp::ncclMin => reduce::Op::Min,
        RedOp::ncclMax => reduce::Op::Max,
        _ => return None,
    };
    Some((e, o))
}

/// A target's accumulate lock, held for one operation.
struct Exclusive<'a>(&'a Slot);

impl<'a> Exclusive<'a> {
    fn take(m: &'a Mapped, target: c_int) -> Exclusive<'a> {
        let s = m.slot(target);
        spin_until(m.comm, || s.acc.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok());
        Exclusive(s)
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        self.0.acc.store(0, Ordering::Release);
    }
}
