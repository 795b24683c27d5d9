//! Pinned host buffers for staging device data, reused across calls.
//!
//! Buffers come in power-of-two size classes and stay cached after use, so steady traffic pays
//! for pinning once. The pool never holds more than `CUDAMPI_POOL_BYTES` of pinned
//! memory: beyond that (or when the driver cannot pin more) a staging buffer is ordinary
//! pageable memory, which the driver copies through its own pinned chunks, so a message larger
//! than the bound still works, only slower. Only when even pageable memory cannot be had does a
//! call fail, with `MPI_ERR_NO_MEM`. The lock is held for list operations only, never across a
//! copy or an MPI call.
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

use crate::cuda::driver::{CUcontext, CUDA_SUCCESS};
use crate::cuda::InContext;
use crate::stats;

const MIN_CLASS: u32 = 12; // 4 KiB
const CLASSES: usize = 48;
/// Untouched address space after each buffer, for a receive that the MPI overruns. Address
/// space only: even the pool's bound of 4 KiB buffers stays far inside a 47-bit address space.
const OVERRUN_TAIL: usize = 256 << 20;

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

struct Pool {
    free: [Vec<Pinned>; CLASSES],
    /// Pinned bytes owned by the pool, cached or leased.
    held: usize,
    high_water: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { free: [const { Vec::new() }; CLASSES], held: 0, high_water: 0 });
static PIN_FAILURE_REPORTED: AtomicBool = AtomicBool::new(false);
/// Leases alive now, pinned or pageable.
static LEASED: AtomicUsize = AtomicUsize::new(0);

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A staging buffer; returned to the pool (or freed) on drop.
pub struct Lease {
    ptr: *mut u8,
    /// `Some(class)` for pool memory, `None` for a pageable fallback.
    class: Option<(usize, CUcontext)>,
    /// Bytes of its mapping, tail included.
    mapped: usize,
}

impl Lease {
    pub fn ptr(&self) -> *mut c_void {
        self.ptr.cast()
    }
    pub fn is_pinned(&self) -> bool {
        self.class.is_some()
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
    let lease = lease_from_pool_or_pageable(len, ctx);
    if lease.is_some() {
        LEASED.fetch_add(1, Ordering::Relaxed);
    }
    lease
}

/// Staging buffers leased now.
pub fn leased() -> usize {
    LEASED.load(Ordering::Relaxed)
}

fn lease_from_pool_or_pageable(len: usize, ctx: &InContext) -> Option<Lease> {
    let bound = crate::config::get().pool_bytes;
    if let Some((class, cap)) = class_of(len).filter(|&(_, cap)| cap <= bound) {
        let mut evicted = Vec::new();
        let reserved = {
            let mut p = pool();
            if let Some(b) = p.free[class].pop() {
                return Some(Lease { ptr: b.ptr, class: Some((class, b.ctx)), mapped: b.mapped });
            }
            // Make room by giving cached buffers of other sizes back to the driver.
            for c in (0..CLASSES).rev() {
                while p.held + cap > bound {
                    let Some(b) = p.free[c].pop() else { break };
                    p.held -= 1usize << (c as u32 + MIN_CLASS);
                    evicted.push(b);
                }
            }
            let fits = p.held + cap <= bound;
            if fits {
                p.held += cap;
                p.high_water = p.high_water.max(p.held);
            }
            fits
        };
        free_pinned(ctx, evicted);
        if reserved {
            match alloc_pinned(ctx, cap) {
                Some((ptr, mapped)) => return Some(Lease { ptr, class: Some((class, ctx.context())), mapped }),
                None => pool().held -= cap,
            }
        }
    }
    stats::add(&stats::PAGEABLE_FALLBACKS, 1);
    let (ptr, mapped) = map_with_tail(len.max(1))?;
    Some(Lease { ptr, class: None, mapped })
}

impl Drop for Lease {
    fn drop(&mut self) {
        LEASED.fetch_sub(1, Ordering::Relaxed);
        match self.class {
            Some((class, ctx)) => pool().free[class].push(Pinned { ptr: self.ptr, mapped: self.mapped, ctx }),
            None => unmap(self.ptr, self.mapped),
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
        crate::log::warn(format_args!(
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
    (p.held, p.high_water)
}

/// Gives every cached buffer back to the driver (`MPI_Finalize`). Each is freed with the
/// context that pinned it current.
pub fn release_all() {
    let buffers: Vec<Pinned> = {
        let mut p = pool();
        let mut all = Vec::new();
        for c in 0..CLASSES {
            let list = std::mem::take(&mut p.free[c]);
            p.held -= list.len() << (c as u32 + MIN_CLASS);
            all.extend(list);
        }
        all
    };
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
    use super::{class_of, map_with_tail, unmap, OVERRUN_TAIL};

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
    fn classes() {
        assert_eq!(class_of(1), Some((0, 4096)));
        assert_eq!(class_of(4096), Some((0, 4096)));
        assert_eq!(class_of(4097), Some((1, 8192)));
        assert_eq!(class_of(1 << 20), Some((8, 1 << 20)));
        assert_eq!(class_of(usize::MAX), None);
    }
}
