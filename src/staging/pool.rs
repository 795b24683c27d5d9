//! Pinned host buffers for staging device data, reused across calls.
//!
//! Buffers come in power-of-two size classes and stay cached after use, so steady traffic pays
//! for pinning once. The pool never holds more than `CUDAMPI_POOL_BYTES` of pinned
//! memory: beyond that (or when the driver cannot pin more) a staging buffer is ordinary
//! pageable memory, which the driver copies through its own pinned chunks, so a message larger
//! than the bound still works, only slower. Pageable buffers of the size classes are kept for
//! reuse too, up to `PAGEABLE_TIMES` the bound: freshly mapped memory costs the driver's
//! pageable copies four times as long as memory used before (16 MiB from a fresh mapping took
//! 20.7 ms, from a reused `malloc` block 5.3 ms, on an H200 host). Only when even pageable
//! memory cannot be had does a call fail, with `MPI_ERR_NO_MEM`. The locks are held for list
//! operations only, never across a copy or an MPI call. A span staged through a packed buffer
//! (`stage::lease_form`) gets a pageable buffer of its own cache, bounded in address space
//! only: just the pages its datatype's blocks touch ever hold memory.
//!
//! Every staging buffer is followed by `OVERRUN_TAIL` bytes of address space that is mapped but
//! never touched, so it costs no memory (where a limit on address space refuses the tail, the
//! buffer goes without). Open MPI (ob1 with single-copy shared memory, 4.1 and
//! 5.0) writes a whole message into a receive posted for less of it, past the posted count,
//! before it reports `MPI_ERR_TRUNCATE`; on host buffers that overruns the user's memory, on a
//! staged receive it lands in the tail instead of in whatever the process mapped next.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::base::stats;
use crate::cuda::InContext;
use crate::cuda::driver::{CUcontext, CUDA_SUCCESS};

const MIN_CLASS: u32 = 12; // 4 KiB
const CLASSES: usize = 48;
/// Untouched address space after each buffer, for a receive that the MPI overruns. Address
/// space only: even the pool's bound of 4 KiB buffers stays far inside a 47-bit address space.
const OVERRUN_TAIL: usize = 256 << 20;
/// How many times `CUDAMPI_POOL_BYTES` of pageable buffers are kept for reuse.
const PAGEABLE_TIMES: usize = 4;

struct Pinned {
    ptr: *mut u8,
    /// Bytes of its mapping, tail included.
    mapped: usize,
    /// The context that pinned it, made current again to unpin it.
    ctx: CUcontext,
}

// SAFETY: pinned host memory is plain memory usable from any thread; the context handle is an
// opaque driver token.
unsafe impl Send for Pinned {}

/// Buffers of the size classes kept for reuse, and the bytes of those cached or leased.
struct Classes<T> {
    free: [Vec<T>; CLASSES],
    held: usize,
}

/// What `Classes::take` found.
enum Take<T> {
    Cached(T),
    /// Room for a new buffer, now counted in `held`.
    Reserved,
    Full,
}

impl<T> Classes<T> {
    const fn new() -> Classes<T> {
        Classes { free: [const { Vec::new() }; CLASSES], held: 0 }
    }

    /// A cached buffer of `class`, or room for a new one of `cap` bytes within `bound`, made by
    /// moving cached buffers of other sizes to `evicted`; none moves when all of them together
    /// would not make room (the rest is leased).
    fn take(&mut self, class: usize, cap: usize, bound: usize, evicted: &mut Vec<T>) -> Take<T> {
        if let Some(b) = self.free[class].pop() {
            return Take::Cached(b);
        }
        let cached: usize = (0..CLASSES).map(|c| self.free[c].len() << (c as u32 + MIN_CLASS)).sum();
        if self.held - cached + cap > bound {
            return Take::Full;
        }
        for c in (0..CLASSES).rev() {
            while self.held + cap > bound {
                let Some(b) = self.free[c].pop() else { break };
                self.held -= 1usize << (c as u32 + MIN_CLASS);
                evicted.push(b);
            }
        }
        if self.held + cap > bound {
            return Take::Full;
        }
        self.held += cap;
        Take::Reserved
    }

    /// Every cached buffer, no longer counted.
    fn drain(&mut self) -> Vec<T> {
        let mut all = Vec::new();
        for c in 0..CLASSES {
            let list = std::mem::take(&mut self.free[c]);
            self.held -= list.len() << (c as u32 + MIN_CLASS);
            all.extend(list);
        }
        all
    }
}

struct Pool {
    /// Pinned buffers; `held` counts the pinned bytes the pool owns.
    classes: Classes<Pinned>,
    high_water: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { classes: Classes::new(), high_water: 0 });

/// Pageable buffers of the size classes, cached or leased.
type Pageable = Classes<Mapping>;

struct Mapping {
    ptr: *mut u8,
    mapped: usize,
}

// SAFETY: plain memory, usable from any thread.
unsafe impl Send for Mapping {}

static PAGEABLE: Mutex<Pageable> = Mutex::new(Classes::new());
static PIN_FAILURE_REPORTED: AtomicBool = AtomicBool::new(false);
/// Leases alive now, pinned or pageable.
static LEASED: AtomicUsize = AtomicUsize::new(0);

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

fn pageable() -> std::sync::MutexGuard<'static, Pageable> {
    PAGEABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A staging buffer; returned to the pool (or freed) on drop.
pub struct Lease {
    ptr: *mut u8,
    kind: Kind,
    /// Bytes of its mapping, tail included.
    mapped: usize,
    /// Counted in `leased()`.
    counted: bool,
}

enum Kind {
    /// A pool buffer of this class, pinned by this context.
    Pinned(usize, CUcontext),
    /// A pageable buffer of this class, kept for reuse.
    Pageable(usize),
    /// A sparse span's pageable buffer of this class, kept for reuse.
    Sparse(usize),
    /// A pageable buffer unmapped after use.
    Once,
}

impl Lease {
    pub fn ptr(&self) -> *mut c_void {
        self.ptr.cast()
    }
    pub fn is_pinned(&self) -> bool {
        matches!(self.kind, Kind::Pinned(..))
    }

    /// Bytes the buffer holds (`None`: a pageable one of exactly the size asked for).
    pub fn capacity(&self) -> Option<usize> {
        match self.kind {
            Kind::Pinned(class, _) | Kind::Pageable(class) | Kind::Sparse(class) => Some(1 << (class as u32 + MIN_CLASS)),
            Kind::Once => None,
        }
    }

    /// Counted in `leased()` again (a buffer kept uncounted between uses).
    pub fn counted(mut self) -> Lease {
        if self.counted {
            return self;
        }
        LEASED.fetch_add(1, Ordering::Relaxed);
        self.counted = true;
        self
    }

    /// No longer counted in `leased()`, which counts what the program's operations hold: a
    /// chunk's buffer stays with its send on the private communicator after the program's send
    /// completed, until a later call sees that send complete.
    pub fn uncounted(mut self) -> Lease {
        if std::mem::replace(&mut self.counted, false) {
            LEASED.fetch_sub(1, Ordering::Relaxed);
        }
        self
    }
}

/// The size class of `len` bytes, if the pool may serve it.
fn class_of(len: usize) -> Option<(usize, usize)> {
    let cap = len.max(1 << MIN_CLASS).checked_next_power_of_two()?;
    let class = (cap.trailing_zeros() - MIN_CLASS) as usize;
    (class < CLASSES).then_some((class, cap))
}

/// A buffer of at least `len` bytes. `ctx` is the device context current for the copy; pinned
/// memory is allocated portable, so it serves every context afterwards. `None`: out of memory.
pub fn lease(len: usize, ctx: &InContext) -> Option<Lease> {
    lease_from_pool_or_pageable(len, ctx).map(Lease::counted)
}

/// A pageable buffer of at least `len` bytes, not counted as a fallback: for a receive that a
/// fast path's envelope will most likely reach, which then holds only the envelope, so a window
/// of such receives leaves the pinned pool to the chunks. `None`: out of memory.
pub fn lease_unpinned(len: usize) -> Option<Lease> {
    lease_pageable(len, crate::base::config::get().pool_bytes.saturating_mul(PAGEABLE_TIMES)).map(Lease::counted)
}

/// Staging buffers leased now.
pub fn leased() -> usize {
    LEASED.load(Ordering::Relaxed)
}

/// A pinned buffer of at least `len` bytes, or `None` when the pool is at its bound plus
/// `beyond` bytes (or the driver pins no more): for callers that would rather wait for a pinned
/// buffer to come back than stage through pageable memory, and for the few chunk buffers a
/// chunked receive cycles through, which may go `beyond` the bound.
pub fn lease_pinned(len: usize, ctx: &InContext, beyond: usize) -> Option<Lease> {
    lease_from_pool(len, ctx, crate::base::config::get().pool_bytes.saturating_add(beyond)).map(Lease::counted)
}

fn lease_from_pool_or_pageable(len: usize, ctx: &InContext) -> Option<Lease> {
    if let Some(lease) = lease_from_pool(len, ctx, crate::base::config::get().pool_bytes) {
        return Some(lease);
    }
    stats::add(&stats::PAGEABLE_FALLBACKS, 1);
    lease_pageable(len, crate::base::config::get().pool_bytes.saturating_mul(PAGEABLE_TIMES))
}

fn lease_from_pool(len: usize, ctx: &InContext, bound: usize) -> Option<Lease> {
    if let Some((class, cap)) = class_of(len).filter(|&(_, cap)| cap <= bound) {
        // Cached buffers of other sizes are given back to the driver to make room.
        let mut evicted = Vec::new();
        let take = {
            let mut p = pool();
            let take = p.classes.take(class, cap, bound, &mut evicted);
            p.high_water = p.high_water.max(p.classes.held);
            take
        };
        free_pinned(ctx, evicted);
        match take {
            Take::Cached(b) => return Some(Lease { ptr: b.ptr, kind: Kind::Pinned(class, b.ctx), mapped: b.mapped, counted: false }),
            Take::Reserved => match alloc_pinned(ctx, cap) {
                Some((ptr, mapped)) => return Some(Lease { ptr, kind: Kind::Pinned(class, ctx.context()), mapped, counted: false }),
                None => pool().classes.held -= cap,
            },
            Take::Full => {}
        }
    }
    None
}

/// A pageable buffer: a cached one of `len`'s class, a new one cached after use while the cache
/// stays within `bound`, or else one of exactly `len` bytes, unmapped after use.
fn lease_pageable(len: usize, bound: usize) -> Option<Lease> {
    lease_mapping(&PAGEABLE, Kind::Pageable, len, bound)
}

/// Address space of sparse spans' buffers kept for reuse. Only the pages a datatype's blocks
/// touch ever hold memory, so the bound is on address space, far above `CUDAMPI_POOL_BYTES`.
const SPARSE_BOUND: usize = 64 << 30;

static SPARSE: Mutex<Pageable> = Mutex::new(Classes::new());

/// A pageable buffer of at least `len` bytes of which only the pages of a datatype's blocks are
/// ever written (a span staged through a packed buffer), kept for reuse up to `SPARSE_BOUND`:
/// a fresh mapping would fault in every page the blocks touch again at every call (a column of
/// a 16384 x 16384 matrix touches 16384 pages of its 2 GiB span). `None`: out of memory.
pub fn lease_sparse(len: usize) -> Option<Lease> {
    lease_mapping(&SPARSE, Kind::Sparse, len, SPARSE_BOUND).map(Lease::counted)
}

fn lease_mapping(cache: &Mutex<Pageable>, kind: fn(usize) -> Kind, len: usize, bound: usize) -> Option<Lease> {
    let lock = || cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((class, cap)) = class_of(len).filter(|&(_, cap)| cap <= bound) {
        // Cached buffers of other sizes are unmapped to make room.
        let mut evicted = Vec::new();
        let take = lock().take(class, cap, bound, &mut evicted);
        for m in evicted {
            unmap(m.ptr, m.mapped);
        }
        match take {
            Take::Cached(m) => return Some(Lease { ptr: m.ptr, kind: kind(class), mapped: m.mapped, counted: false }),
            Take::Reserved => match map_with_tail(cap) {
                Some((ptr, mapped)) => return Some(Lease { ptr, kind: kind(class), mapped, counted: false }),
                None => lock().held -= cap,
            },
            Take::Full => {}
        }
    }
    let (ptr, mapped) = map_with_tail(len.max(1))?;
    Some(Lease { ptr, kind: Kind::Once, mapped, counted: false })
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.counted {
            LEASED.fetch_sub(1, Ordering::Relaxed);
        }
        match self.kind {
            Kind::Pinned(class, ctx) => pool().classes.free[class].push(Pinned { ptr: self.ptr, mapped: self.mapped, ctx }),
            Kind::Pageable(class) => pageable().free[class].push(Mapping { ptr: self.ptr, mapped: self.mapped }),
            Kind::Sparse(class) => SPARSE.lock().unwrap_or_else(|e| e.into_inner()).free[class].push(Mapping { ptr: self.ptr, mapped: self.mapped }),
            Kind::Once => unmap(self.ptr, self.mapped),
        }
    }
}

/// `len` bytes of fresh memory followed by the overrun tail; the mapping's length comes back
/// with it. Where the tail's address space cannot be had (a tight `ulimit -v`), just `len`.
fn map_with_tail(len: usize) -> Option<(*mut u8, usize)> {
    let map = |bytes: usize| {
        // SAFETY: a new private anonymous mapping; NORESERVE keeps the untouched tail free.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some((p.cast::<u8>(), bytes))
    };
    len.checked_add(OVERRUN_TAIL).and_then(map).or_else(|| map(len))
}

fn unmap(ptr: *mut u8, mapped: usize) {
    // SAFETY: the whole mapping made by map_with_tail, no longer leased.
    unsafe { libc::munmap(ptr.cast(), mapped) };
}

/// A pinned pool buffer of `cap` bytes and its mapping's length.
fn alloc_pinned(ctx: &InContext, cap: usize) -> Option<(*mut u8, usize)> {
    let (p, mapped) = map_with_tail(cap)?;
    // SAFETY: p holds cap mapped bytes; PORTABLE makes them pinned for every context.
    let rc = unsafe { (ctx.driver().mem_host_register)(p.cast(), cap, cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE) };
    if rc == CUDA_SUCCESS {
        return Some((p, mapped));
    }
    unmap(p, mapped);
    if !PIN_FAILURE_REPORTED.swap(true, Ordering::Relaxed) {
        crate::base::log::warn(format_args!(
            "cannot pin {cap} more bytes of host memory ({}); staging through pageable memory, which is slower",
            ctx.driver().error_name(rc)
        ));
    }
    None
}

/// Unpins and unmaps a pool buffer; its context must be current.
fn free_pinned_one(d: &crate::cuda::driver::Driver, b: Pinned) {
    // SAFETY: registered by alloc_pinned and no longer leased.
    unsafe { (d.mem_host_unregister)(b.ptr.cast()) };
    unmap(b.ptr, b.mapped);
}

fn free_pinned(ctx: &InContext, buffers: Vec<Pinned>) {
    for b in buffers {
        free_pinned_one(ctx.driver(), b);
    }
}

/// Pinned bytes held now and at most, for statistics.
pub fn usage() -> (usize, usize) {
    let p = pool();
    (p.classes.held, p.high_water)
}

/// Gives every cached buffer back to the driver and the system (`MPI_Finalize`). Each pinned one
/// is freed with the context that pinned it current.
pub fn release_all() {
    let mut mappings = pageable().drain();
    mappings.extend(SPARSE.lock().unwrap_or_else(|e| e.into_inner()).drain());
    for m in mappings {
        unmap(m.ptr, m.mapped);
    }
    let buffers = pool().classes.drain();
    let Some(d) = crate::cuda::driver::get() else { return };
    for b in buffers {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: b.ctx registered b.ptr; push/pop are balanced.
        unsafe {
            let pushed = !b.ctx.is_null() && (d.ctx_push_current)(b.ctx) == CUDA_SUCCESS;
            free_pinned_one(d, b);
            if pushed {
                (d.ctx_pop_current)(&mut popped);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{class_of, lease_pageable, map_with_tail, pageable, unmap, Classes, Kind, Take, OVERRUN_TAIL};

    #[test]
    fn cached_buffers_stay_when_evicting_them_cannot_make_room() {
        let mut c: Classes<u32> = Classes::new();
        let mut evicted = Vec::new();
        // 8 KiB cached (class 1), 16 KiB leased: 24 KiB held within 32 KiB.
        c.free[1].push(7);
        c.held = 24 << 10;
        assert!(matches!(c.take(4, 64 << 10, 32 << 10, &mut evicted), Take::Full));
        assert!(evicted.is_empty() && c.free[1] == [7] && c.held == 24 << 10);
        // 16 KiB fits once the cached 8 KiB goes.
        assert!(matches!(c.take(2, 16 << 10, 32 << 10, &mut evicted), Take::Reserved));
        assert_eq!(evicted, [7]);
        assert_eq!(c.held, 32 << 10);
    }

    #[test]
    fn tail_takes_an_overrun() {
        let (p, mapped) = map_with_tail(4096).expect("mmap");
        assert_eq!(mapped, 4096 + OVERRUN_TAIL);
        // SAFETY: within the mapping: what an MPI overrunning a 4 KiB receive by 1 MiB writes.
        unsafe { std::ptr::write_bytes(p, 0x5a, 4096 + (1 << 20)) };
        // SAFETY: the same bytes, just written.
        assert_eq!(unsafe { *p.add(4096 + (1 << 20) - 1) }, 0x5a);
        unmap(p, mapped);
    }

    #[test]
    fn pageable_buffers_are_reused_within_the_bound() {
        let bound = 64 << 10;
        let a = lease_pageable(5000, bound).expect("lease");
        assert!(matches!(a.kind, Kind::Pageable(1)));
        let first = a.ptr;
        // SAFETY: the lease's 8 KiB class buffer.
        unsafe { std::ptr::write_bytes(first, 0x11, 8192) };
        drop(a);
        let b = lease_pageable(8000, bound).expect("lease");
        assert_eq!(b.ptr, first, "the cached buffer of the class comes back");
        // A buffer that would take the cache past its bound while the rest is leased is used
        // once and unmapped.
        let big = lease_pageable(bound, bound).expect("lease");
        assert!(matches!(big.kind, Kind::Once));
        let held = pageable().held;
        assert!(held <= bound, "{held} bytes cached against a bound of {bound}");
        drop(big);
        drop(b);
        // Once the 8 KiB buffer is back in the cache, it is unmapped to make room.
        let big = lease_pageable(bound, bound).expect("lease");
        assert!(matches!(big.kind, Kind::Pageable(_)));
        assert_eq!(pageable().held, bound);
        drop(big);
    }

    #[test]
    fn classes() {
        assert_eq!(class_of(1), Some((0, 4096)));
        assert_eq!(class_of(4096), Some((0, 4096)));
        assert_eq!(class_of(4097), Some((1, 8192)));
        assert_eq!(class_of(1 << 20), Some((8, 1 << 20)));
        assert_eq!(class_of(usize::MAX), None);
    }
}
