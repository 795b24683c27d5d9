//! The owner's side of a served window (`served.rs`): the mailbox, host memory the owner of a
//! device part exposes through the library, in which origins write the operations on that
//! part, and the progress thread that carries them out on the device memory.
//!
//! A mailbox is a header of three counters and a ring. An origin reserves an entry by adding
//! its length to `reserved` (`MPI_Fetch_and_op`), waits until `released` says the space is
//! free, writes the entry with `MPI_Put`, and then, after a flush, the entry's first word: its
//! state. The thread answers in another word of the entry, its reply, so that no word of a
//! mailbox has two writers: when the thread answered in the state word, MPICH 4.0 over UCX, on
//! two loaded cores, once left it reading `FILLED` again after the thread had written `OLD`
//! there (the origin's put landing a second time before its flush returned), and both sides
//! waited for ever. The thread takes entries in the order of their positions, one at a time, so
//! operations on one part never interleave, from any number of origins, and each origin's
//! apply in its program order. It advances `applied` past the entries it carried out, and
//! `released` past those whose space may be reused (a get's once the origin read its bytes, or
//! was told it failed).
//!
//! The thread makes no MPI call, so it needs no thread level of the library: the library
//! writes the mailbox as it writes any window, and the thread reads host memory. A state word
//! carries its entry's position in its high bits, and the thread zeroes the first word of
//! every 64-byte grain it releases, so no word left from an earlier round of the ring reads
//! as a later entry's.
//!
//! It may use every layer below the handlers; `served.rs` uses it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::base::{log, threads};
use crate::cuda::copy::check;
use crate::cuda::driver::{self, CUdeviceptr};
use crate::cuda::{CudaError, Device, InContext};
use crate::handlers::side::lock;

/// Byte offsets of the header's counters, absolute positions in the ring's bytes.
pub const RESERVED_AT: usize = 0;
pub const APPLIED_AT: usize = 8;
pub const RELEASED_AT: usize = 16;
/// The ring starts here; entries start on grains of the ring.
pub const HEAD: usize = 64;
pub const GRAIN: usize = 64;

/// Entry kinds.
pub const PAD: u32 = 0;
pub const PUT: u32 = 1;
pub const GET: u32 = 2;
/// Read-modify-write: the thread reads the old bytes into the payload (`OLD`) and waits for
/// the origin's new ones (`NEW`, or `SAME` to leave them), holding every later entry back.
pub const UPDATE: u32 = 3;

/// An entry's state, written by its origin, and the thread's reply: the low bits of the
/// entry's first word and of its `reply` word (the entry's position is the rest).
pub const FILLED: u64 = 1;
pub const NEW: u64 = 3;
pub const SAME: u64 = 4;
pub const TAKEN: u64 = 6;
/// Replies.
pub const OLD: u64 = 2;
pub const APPLIED: u64 = 5;
pub const FAILED: u64 = 7;

/// An entry's first 64 bytes; `runs` pairs `(offset in the part, bytes)` follow, then the
/// payload, in the runs' order.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct EntryHead {
    pub state: u64,
    /// The entry's bytes, a multiple of [`GRAIN`].
    pub len: u64,
    pub kind: u32,
    pub runs: u32,
    pub bytes: u64,
    /// The thread's reply, zero as the origin writes the head.
    pub reply: u64,
    pub _pad: [u64; 3],
}

pub const ENTRY_HEAD: usize = std::mem::size_of::<EntryHead>();
/// Where the reply lies in an entry.
pub const REPLY_AT: usize = std::mem::offset_of!(EntryHead, reply);
const _: () = assert!(ENTRY_HEAD == GRAIN);

/// `CUDA_ERROR_NOT_READY`.
const NOT_READY: u32 = 600;

/// The length of an entry of `runs` runs and `bytes` payload bytes.
pub fn entry_len(runs: usize, bytes: usize) -> usize {
    (ENTRY_HEAD + 16 * runs + bytes).div_ceil(GRAIN) * GRAIN
}

/// Where an entry's payload starts, from the entry's start.
pub fn payload_at(runs: usize) -> usize {
    ENTRY_HEAD + 16 * runs
}

pub struct Mailbox {
    mem: *mut u8,
    bytes: usize,
    ring: usize,
    /// The GPU of the memory served and the thread's stream there, set once: at the window's
    /// creation, or for a dynamic window when device memory is first attached. The thread's
    /// copies run on that stream, apart from the program's work on the legacy default stream
    /// (the owner waits for that at its synchronisation calls), and are waited for by polling:
    /// a blocking wait in the driver took a scheduler tick (4 ms) to return on an H200 host
    /// while the rank's main thread spun in a blocking MPI call.
    device: OnceLock<(Device, usize)>,
    pinned: AtomicBool,
    /// What origins name: an offset from `base` (a created window's part), or for a dynamic
    /// window (`base` 0) an address within attached device memory; `ranges` are the spans
    /// (start, length) they may name.
    base: CUdeviceptr,
    ranges: Mutex<Vec<(u64, u64)>>,
    /// The thread's cursors: the next entry to carry out, the first not released.
    next: AtomicU64,
    free: AtomicU64,
}

// SAFETY: the memory is the mailbox's own; the device part is the program's, reached only by
// the thread, through the driver.
unsafe impl Send for Mailbox {}
unsafe impl Sync for Mailbox {}

impl Mailbox {
    /// A mailbox with a ring of `ring` bytes (a multiple of [`GRAIN`]) for `size` bytes at
    /// `base` (a created window's part), or for attached memory (`base` null), not yet bound to
    /// a GPU ([`Mailbox::bind`]). `None` where memory is not to be had.
    pub fn new(ring: usize, base: *mut c_void, size: usize) -> Option<Mailbox> {
        let bytes = HEAD + ring;
        // SAFETY: a fresh anonymous mapping, zeroed by the kernel.
        let mem = unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if mem == libc::MAP_FAILED {
            return None;
        }
        let ranges = if base.is_null() { Vec::new() } else { vec![(0, size as u64)] };
        Some(Mailbox {
            mem: mem.cast(),
            bytes,
            ring,
            device: OnceLock::new(),
            pinned: AtomicBool::new(false),
            base: base as CUdeviceptr,
            ranges: Mutex::new(ranges),
            next: AtomicU64::new(0),
            free: AtomicU64::new(0),
        })
    }

    /// Binds the mailbox to `dev`: its memory pinned, the thread's stream made there. False if
    /// it is bound to another GPU already, or no stream can be made.
    pub fn bind(&self, dev: Device) -> bool {
        if let Some((d, _)) = self.device.get() {
            return d.ordinal == dev.ordinal;
        }
        let (Some(d), Ok(_ctx)) = (driver::get(), InContext::enter(&dev)) else { return false };
        let mut stream: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid out-pointer (1: non-blocking); the mailbox's own mapping.
        unsafe {
            if (d.stream_create)(&mut stream, 1) != 0 {
                return false;
            }
            let rc = (d.mem_host_register)(self.mem.cast(), self.bytes, 0);
            self.pinned.store(rc == 0, Ordering::Relaxed);
            if rc != 0 && !PIN_FAILURE_REPORTED.swap(true, Ordering::Relaxed) {
                log::warn(format_args!(
                    "cannot pin the {} bytes of a device window's mailbox ({}); one-sided operations on that window copy through pageable memory, which is slower",
                    self.bytes,
                    d.error_name(rc)
                ));
            }
        }
        self.device.set((dev, stream as usize)).is_ok()
    }

    /// The GPU the mailbox is bound to, once it is.
    pub fn device(&self) -> Option<Device> {
        self.device.get().map(|&(dev, _)| dev)
    }

    /// Device memory attached to a dynamic window, which origins may now name.
    pub fn attach(&self, start: u64, len: u64) {
        lock(&self.ranges).push((start, len));
    }

    /// Attached memory detached again; its length, if it was attached.
    pub fn detach(&self, start: u64) -> Option<u64> {
        let mut r = lock(&self.ranges);
        let i = r.iter().position(|x| x.0 == start)?;
        Some(r.remove(i).1)
    }

    /// The spans origins may name.
    pub fn ranges(&self) -> Vec<(u64, u64)> {
        lock(&self.ranges).clone()
    }

    /// The memory the library's window exposes.
    pub fn memory(&self) -> (*mut c_void, usize) {
        (self.mem.cast(), self.bytes)
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        // SAFETY: an aligned word within the mapping, which lives as long as `self`.
        unsafe { &*self.mem.add(at).cast::<AtomicU64>() }
    }

    /// The first byte of the entry at `pos`.
    fn entry(&self, pos: u64) -> *mut u8 {
        // SAFETY: within the ring.
        unsafe { self.mem.add(HEAD + (pos % self.ring as u64) as usize) }
    }

    fn state(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: entries start on grains, within the ring.
        unsafe { &*self.entry(pos).cast::<AtomicU64>() }
    }

    fn reply_word(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: an aligned word of the entry's head, within the ring.
        unsafe { &*self.entry(pos).add(REPLY_AT).cast::<AtomicU64>() }
    }

    /// Answers the entry at `pos` with `reply`.
    fn reply(&self, pos: u64, reply: u64) {
        self.reply_word(pos).store(pos | reply, Ordering::Release);
    }

    /// Carries out the entries written since the last call, releases what it can; whether
    /// there was anything to do.
    fn serve(&self) -> bool {
        let Some(&(dev, stream)) = self.device.get() else { return false };
        let stream = stream as *mut c_void;
        let mut next = self.next.load(Ordering::Relaxed);
        let start = next;
        let mut ctx: Option<Result<InContext<'static>, CudaError>> = None;
        let mut queued = false;
        loop {
            let state = self.state(next).load(Ordering::Acquire);
            if state != next | FILLED {
                break;
            }
            // SAFETY: the origin wrote the head before the state, and the state was read with
            // acquire ordering.
            let head = unsafe { self.entry(next).cast::<EntryHead>().read_volatile() };
            let len = head.len as usize;
            if len == 0 || len % GRAIN != 0 || len > self.ring {
                log::error(format_args!("a one-sided operation on this rank's device window arrived damaged (entry of {len} bytes); it is left out"));
                self.reply(next, FAILED);
                next += GRAIN as u64;
                continue;
            }
            if head.kind != PAD {
                let ctx = ctx.get_or_insert_with(|| InContext::enter(&dev));
                let done = match ctx {
                    Ok(c) => self.carry_out(c, stream, next, &head, &mut queued),
                    Err(e) => Err(*e),
                };
                if let Err(e) = done {
                    log::error(format_args!("a one-sided operation on this rank's device window failed: {} ({})", e.call, e.name()));
                    if head.kind != PUT {
                        self.reply(next, FAILED);
                    }
                }
            }
            next += len as u64;
        }
        if queued {
            if let Some(Ok(c)) = &ctx {
                if let Err(e) = self.wait(c, stream) {
                    log::error(format_args!("a one-sided operation on this rank's device window failed: {} ({})", e.call, e.name()));
                }
            }
        }
        if next != start {
            self.next.store(next, Ordering::Relaxed);
            self.word(APPLIED_AT).store(next, Ordering::Release);
        }
        let released = self.release(next);
        next != start || released
    }

    /// One entry. Puts are queued (`queued`); a get or an update first waits for them, since
    /// it may read their bytes.
    fn carry_out(&self, c: &InContext, stream: *mut c_void, pos: u64, head: &EntryHead, queued: &mut bool) -> Result<(), CudaError> {
        let d = c.driver();
        let runs = self.runs(pos, head)?;
        // SAFETY: within the entry, whose length was checked against the ring.
        let payload = unsafe { self.entry(pos).add(payload_at(runs.len())) };
        let to_device = || -> Result<(), CudaError> {
            let mut at = 0;
            for &(off, n) in &runs {
                // SAFETY: the run lies in the part (`runs`), the bytes in the entry.
                check("cuMemcpyHtoDAsync", unsafe { (d.memcpy_htod_async)(self.base + off, payload.add(at).cast(), n, stream) })?;
                at += n;
            }
            Ok(())
        };
        if head.kind == PUT {
            *queued = true;
            return to_device();
        }
        if std::mem::take(queued) {
            self.wait(c, stream)?;
        }
        let mut at = 0;
        for &(off, n) in &runs {
            // SAFETY: as above.
            check("cuMemcpyDtoHAsync", unsafe { (d.memcpy_dtoh_async)(payload.add(at).cast(), self.base + off, n, stream) })?;
            at += n;
        }
        self.wait(c, stream)?;
        if head.kind == GET {
            self.reply(pos, APPLIED);
            return Ok(());
        }
        self.reply(pos, OLD);
        let answer = wait_for(|| {
            let s = self.state(pos).load(Ordering::Acquire);
            (s == pos | NEW || s == pos | SAME).then_some(s)
        });
        if answer == pos | NEW {
            to_device()?;
            self.wait(c, stream)?;
        }
        self.reply(pos, APPLIED);
        Ok(())
    }

    /// Waits for the thread's copies by polling its stream.
    fn wait(&self, c: &InContext, stream: *mut c_void) -> Result<(), CudaError> {
        let d = c.driver();
        let Some(sig) = d.signals.as_ref() else {
            // SAFETY: the mailbox's stream.
            return check("cuStreamSynchronize", unsafe { (d.stream_synchronize)(stream) });
        };
        let mut round = 0u32;
        loop {
            // SAFETY: the mailbox's stream.
            match unsafe { (sig.stream_query)(stream) } {
                0 => return Ok(()),
                NOT_READY => pause(&mut round),
                code => return Err(CudaError { call: "cuStreamQuery", code }),
            }
        }
    }

    /// The entry's runs, each checked to lie in the part, and their bytes against the entry's.
    fn runs(&self, pos: u64, head: &EntryHead) -> Result<Vec<(u64, usize)>, CudaError> {
        let bad = CudaError { call: "the entry's byte ranges", code: 1 };
        let n = head.runs as usize;
        if payload_at(n) + head.bytes as usize > head.len as usize {
            return Err(bad);
        }
        let mut runs = Vec::with_capacity(n);
        let mut total = 0u64;
        // SAFETY: the runs lie in the entry (checked above).
        let raw = unsafe { std::slice::from_raw_parts(self.entry(pos).add(ENTRY_HEAD).cast::<u64>(), 2 * n) };
        let ranges = lock(&self.ranges);
        for r in raw.chunks_exact(2) {
            let (off, len) = (r[0], r[1]);
            let inside = off.checked_add(len).is_some_and(|end| ranges.iter().any(|&(s, l)| off >= s && end <= s + l));
            if !inside {
                return Err(bad);
            }
            runs.push((off, len as usize));
            total += len;
        }
        if total != head.bytes {
            return Err(bad);
        }
        Ok(runs)
    }

    /// Releases the entries carried out before `next`, a get's once its origin took the bytes;
    /// whether any was.
    fn release(&self, next: u64) -> bool {
        let mut free = self.free.load(Ordering::Relaxed);
        let start = free;
        while free < next {
            // SAFETY: a carried-out entry, whose head is intact (only its state changes).
            let head = unsafe { self.entry(free).cast::<EntryHead>().read_volatile() };
            let state = self.state(free).load(Ordering::Acquire);
            let len = match head.len as usize {
                l if l == 0 || l % GRAIN != 0 || l > self.ring => GRAIN,
                l => l,
            };
            let failed = self.reply_word(free).load(Ordering::Acquire) == free | FAILED;
            if head.kind == GET && state != free | TAKEN && !failed {
                break;
            }
            for g in (0..len).step_by(GRAIN) {
                self.state(free + g as u64).store(0, Ordering::Relaxed);
            }
            free += len as u64;
        }
        if free == start {
            return false;
        }
        self.free.store(free, Ordering::Relaxed);
        self.word(RELEASED_AT).store(free, Ordering::Release);
        true
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        if let Some(&(dev, stream)) = self.device.get() {
            if let (Some(d), Ok(_ctx)) = (driver::get(), InContext::enter(&dev)) {
                // SAFETY: registered and made at `bind`; no copy is in flight (the thread is
                // done with a mailbox it no longer holds).
                unsafe {
                    if self.pinned.load(Ordering::Relaxed) {
                        (d.mem_host_unregister)(self.mem.cast());
                    }
                    (d.stream_destroy)(stream as *mut c_void);
                }
            }
        }
        // SAFETY: the mapping made at `new`.
        unsafe { libc::munmap(self.mem.cast(), self.bytes) };
    }
}

/// Polls `f` until it answers, spinning first, then sleeping a little longer each round (up
/// to 20 us), so that an idle wait costs little processor time.
pub fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let mut round = 0u32;
    loop {
        if let Some(v) = f() {
            return v;
        }
        pause(&mut round);
    }
}

fn pause(round: &mut u32) {
    *round = round.saturating_add(1);
    match *round {
        0..=256 => std::hint::spin_loop(),
        257..=1024 => std::thread::yield_now(),
        r => std::thread::sleep(Duration::from_micros(((r - 1024) as u64).min(20))),
    }
}

static BOXES: Mutex<Vec<Arc<Mailbox>>> = Mutex::new(Vec::new());
static RUNNING: AtomicBool = AtomicBool::new(false);
/// A mailbox that cannot be pinned still works; the first is reported, once per process.
static PIN_FAILURE_REPORTED: AtomicBool = AtomicBool::new(false);

fn boxes() -> MutexGuard<'static, Vec<Arc<Mailbox>>> {
    lock(&BOXES)
}

/// Serves `b` from now on, starting the thread if none runs; false if it cannot start.
pub fn serve(b: Arc<Mailbox>) -> bool {
    let mut t = boxes();
    t.push(b);
    if RUNNING.load(Ordering::Relaxed) {
        return true;
    }
    match std::thread::Builder::new().name("cudampi-rma".into()).spawn(run) {
        Ok(_) => {
            RUNNING.store(true, Ordering::Relaxed);
            true
        }
        Err(_) => {
            t.pop();
            false
        }
    }
}

/// Serves `b` no more.
pub fn forget(b: &Arc<Mailbox>) {
    boxes().retain(|x| !Arc::ptr_eq(x, b));
}

/// Serves none any more (after the library's `MPI_Finalize`).
pub fn clear() {
    boxes().clear();
}

/// The thread: serves every mailbox until none is left.
fn run() {
    threads::unbind();
    let mut round = 0u32;
    loop {
        let now: Vec<Arc<Mailbox>> = {
            let t = boxes();
            if t.is_empty() {
                RUNNING.store(false, Ordering::Relaxed);
                return;
            }
            t.clone()
        };
        let mut worked = false;
        for b in &now {
            worked |= b.serve();
        }
        drop(now);
        if worked {
            round = 0;
        } else {
            pause(&mut round);
        }
    }
}
