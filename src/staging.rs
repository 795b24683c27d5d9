//! Pinned host buffers for staging device data, reused across calls.
//!
//! Buffers come in power-of-two size classes and stay cached after use, so steady traffic pays
//! for `cuMemHostAlloc` once. The pool never holds more than `CUDAMPI_POOL_BYTES` of pinned
//! memory: beyond that (or when the driver cannot pin more) a staging buffer is ordinary
//! pageable memory, which the driver copies through its own pinned chunks, so a message larger
//! than the bound still works, only slower. Only when even pageable memory cannot be had does a
//! call fail, with `MPI_ERR_NO_MEM`. The lock is held for list operations only, never across a
//! copy or an MPI call.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::cuda::driver::{CUcontext, CUDA_SUCCESS};
use crate::cuda::InContext;
use crate::stats;

const MIN_CLASS: u32 = 12; // 4 KiB
const CLASSES: usize = 48;

struct Pinned {
    ptr: *mut u8,
    /// The context that allocated it, made current again to free it.
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
    /// `Some(class)` for pool memory, `None` for a pageable fallback from `malloc`.
    class: Option<(usize, CUcontext)>,
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
    let lease = lease_from_pool_or_heap(len, ctx);
    if lease.is_some() {
        LEASED.fetch_add(1, Ordering::Relaxed);
    }
    lease
}

/// Staging buffers leased now.
pub fn leased() -> usize {
    LEASED.load(Ordering::Relaxed)
}

fn lease_from_pool_or_heap(len: usize, ctx: &InContext) -> Option<Lease> {
    let bound = crate::config::get().pool_bytes;
    if let Some((class, cap)) = class_of(len).filter(|&(_, cap)| cap <= bound) {
        let mut evicted = Vec::new();
        let reserved = {
            let mut p = pool();
            if let Some(b) = p.free[class].pop() {
                return Some(Lease { ptr: b.ptr, class: Some((class, b.ctx)) });
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
                Some(ptr) => return Some(Lease { ptr, class: Some((class, ctx.context())) }),
                None => pool().held -= cap,
            }
        }
    }
    stats::add(&stats::PAGEABLE_FALLBACKS, 1);
    // SAFETY: plain allocation; a null result is handled.
    let ptr = unsafe { libc::malloc(len.max(1)) }.cast::<u8>();
    (!ptr.is_null()).then_some(Lease { ptr, class: None })
}

impl Drop for Lease {
    fn drop(&mut self) {
        LEASED.fetch_sub(1, Ordering::Relaxed);
        match self.class {
            Some((class, ctx)) => pool().free[class].push(Pinned { ptr: self.ptr, ctx }),
            // SAFETY: allocated with malloc in `lease`.
            None => unsafe { libc::free(self.ptr.cast()) },
        }
    }
}

fn alloc_pinned(ctx: &InContext, cap: usize) -> Option<*mut u8> {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: out-pointer valid; PORTABLE makes the memory pinned for every context.
    let rc = unsafe { (ctx.driver().mem_host_alloc)(&mut p, cap, cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE) };
    if rc == CUDA_SUCCESS && !p.is_null() {
        return Some(p.cast());
    }
    if !PIN_FAILURE_REPORTED.swap(true, Ordering::Relaxed) {
        crate::log::warn(format_args!(
            "cannot pin {cap} more bytes of host memory ({}); staging through pageable memory, which is slower",
            ctx.driver().error_name(rc)
        ));
    }
    None
}

fn free_pinned(ctx: &InContext, buffers: Vec<Pinned>) {
    for b in buffers {
        // SAFETY: returned by cuMemHostAlloc and no longer leased.
        unsafe { (ctx.driver().mem_free_host)(b.ptr.cast()) };
    }
}

/// Pinned bytes held now and at most, for statistics.
pub fn usage() -> (usize, usize) {
    let p = pool();
    (p.held, p.high_water)
}

/// Gives every cached buffer back to the driver (`MPI_Finalize`). Each is freed with the
/// context that allocated it current.
pub fn release_all() {
    let buffers: Vec<Pinned> = {
        let mut p = pool();
        let mut all = Vec::new();
        for (c, list) in p.free.iter_mut().enumerate() {
            for b in list.drain(..) {
                all.push((b, 1usize << (c as u32 + MIN_CLASS)));
            }
        }
        for (_, cap) in &all {
            p.held -= cap;
        }
        all.into_iter().map(|(b, _)| b).collect()
    };
    let Some(d) = crate::cuda::driver::get() else { return };
    for b in buffers {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: b.ctx allocated b.ptr; push/pop are balanced.
        unsafe {
            let pushed = !b.ctx.is_null() && (d.ctx_push_current)(b.ctx) == CUDA_SUCCESS;
            (d.mem_free_host)(b.ptr.cast());
            if pushed {
                (d.ctx_pop_current)(&mut popped);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::class_of;

    #[test]
    fn classes() {
        assert_eq!(class_of(1), Some((0, 4096)));
        assert_eq!(class_of(4096), Some((0, 4096)));
        assert_eq!(class_of(4097), Some((1, 8192)));
        assert_eq!(class_of(1 << 20), Some((8, 1 << 20)));
        assert_eq!(class_of(usize::MAX), None);
    }
}
