//! Addresses that are host memory for certain, recognised without asking the driver.
//!
//! The driver answers slowly for plain host memory (110–220 ns on an H200 host, against 40–80 ns
//! for memory it knows), which would dominate a host-buffer MPI call. Three regions can
//! never hold device memory while they exist, so a pointer inside one of them is host memory:
//! the `brk` heap (`[start_brk, sbrk(0))`, where small `malloc` blocks live), the calling
//! thread's stack, and the main program's writable segment (globals, Fortran COMMON blocks).
//! Everything else (large `mmap`-backed buffers, other threads' arenas) is asked of the driver
//! once per page: a page the driver does not know is remembered as plain host memory until
//! libcuda next creates a mapping (`mapwatch.rs`), since only a new driver mapping can put
//! device memory where plain host memory was.

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Once;

static HEAP_START: AtomicUsize = AtomicUsize::new(usize::MAX);
/// glibc's `__curbrk`, the break `sbrk(0)` returns, where the C library exports it: read in
/// place, it spares every check a call into the C library (`learn_process_regions`).
static CURBRK: AtomicPtr<*mut libc::c_void> = AtomicPtr::new(std::ptr::null_mut());
static DATA_LO: AtomicUsize = AtomicUsize::new(usize::MAX);
static DATA_HI: AtomicUsize = AtomicUsize::new(0);
static INIT: Once = Once::new();

thread_local! {
    /// This thread's stack as [lo, hi); (1, 0) until looked up. No destructor runs for it.
    static STACK: Cell<(usize, usize)> = const { Cell::new((1, 0)) };
}

/// True when `addr` is certainly host memory.
#[inline]
pub fn certainly_host(addr: usize) -> bool {
    INIT.call_once(learn_process_regions);
    if in_heap_or_data(addr, heap_end()) {
        return true;
    }
    let (lo, hi) = STACK.with(|s| {
        let mut v = s.get();
        if v.0 > v.1 {
            v = thread_stack();
            s.set(v);
        }
        v
    });
    addr >= lo && addr < hi
}

/// [`certainly_host`] for the heap and program data, from loads alone: false before the
/// regions are learnt or where the break cannot be read in place.
#[inline(always)]
pub fn plainly_host(addr: usize) -> bool {
    INIT.is_completed() && in_heap_or_data(addr, curbrk().unwrap_or(0))
}

/// Whether `addr` lies in the heap below the break `brk` or in the main program's data.
#[inline(always)]
fn in_heap_or_data(addr: usize, brk: usize) -> bool {
    (addr >= HEAP_START.load(Relaxed) && addr < brk) || (addr >= DATA_LO.load(Relaxed) && addr < DATA_HI.load(Relaxed))
}

/// The current break, as `sbrk(0)` gives it.
#[inline(always)]
fn heap_end() -> usize {
    // SAFETY: sbrk(0) only reads the current break.
    curbrk().unwrap_or_else(|| unsafe { libc::sbrk(0) } as usize)
}

/// The break read in place, where the C library's variable was found.
#[inline(always)]
fn curbrk() -> Option<usize> {
    let curbrk = CURBRK.load(Relaxed);
    // SAFETY: the C library's own variable, which lives as long as the process. The break
    // changes only inside malloc: a value read while another thread moves it is one side of
    // the move, and the program's live buffers lie below either.
    (!curbrk.is_null()).then(|| unsafe { std::ptr::read_volatile(curbrk) as usize })
}

/// The heap start from /proc/self/stat (field 47, `start_brk`) and the main program's writable
/// PT_LOAD segment.
#[cold]
fn learn_process_regions() {
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // Fields after the parenthesised command name, which may itself contain spaces.
        if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) {
            // `rest` starts at field 3; start_brk is field 47.
            if let Some(v) = rest.split_whitespace().nth(47 - 3).and_then(|f| f.parse::<usize>().ok()) {
                if v != 0 {
                    HEAP_START.store(v, Relaxed);
                }
            }
        }
    }
    // Only where sbrk(0) is exactly that variable: glibc's sbrk returns `__curbrk` unless it was
    // never set, when it reads the break from the kernel first (then the variable holds it).
    // SAFETY: sbrk(0) only reads the current break; dlsym looks up a data symbol by name.
    unsafe {
        let brk = libc::sbrk(0);
        let curbrk = libc::dlsym(libc::RTLD_DEFAULT, c"__curbrk".as_ptr()).cast::<*mut libc::c_void>();
        if !curbrk.is_null() && brk != usize::MAX as *mut libc::c_void && std::ptr::read_volatile(curbrk) == brk {
            CURBRK.store(curbrk, Relaxed);
        }
    }
    // SAFETY: the callback only reads the headers glibc passes it and stops after the first
    // object, which is the main program.
    unsafe { libc::dl_iterate_phdr(Some(main_program_data), std::ptr::null_mut()) };
}

unsafe extern "C" fn main_program_data(info: *mut libc::dl_phdr_info, _size: usize, _data: *mut libc::c_void) -> libc::c_int {
    // SAFETY: glibc passes a valid dl_phdr_info whose dlpi_phdr has dlpi_phnum entries.
    let info = unsafe { &*info };
    // SAFETY: as above.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    for ph in phdrs {
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_W != 0 {
            let lo = info.dlpi_addr as usize + ph.p_vaddr as usize;
            DATA_LO.store(lo, Relaxed);
            DATA_HI.store(lo + ph.p_memsz as usize, Relaxed);
        }
    }
    1
}

#[cold]
fn thread_stack() -> (usize, usize) {
    // SAFETY: pthread_getattr_np fills attr for the calling thread; it is destroyed after use.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut base: *mut libc::c_void = std::ptr::null_mut();
        let mut size: usize = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut base, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            return (0, 0);
        }
        (base as usize, base as usize + size)
    }
}

/// Remembered plain-host pages, each slot `page << 28 | generation` (the generation's low 28
/// bits), so an entry from before the driver's last mapping never matches.
const REMEMBERED: usize = 256;
static PAGES: [AtomicU64; REMEMBERED] = [const { AtomicU64::new(0) }; REMEMBERED];
const GEN_BITS: u32 = 28;

fn entry(addr: usize, generation: u64) -> Option<(usize, u64)> {
    let page = (addr >> 12) as u64;
    if page >= 1 << (64 - GEN_BITS) {
        return None;
    }
    let slot = (page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % REMEMBERED;
    Some((slot, page << GEN_BITS | (generation & ((1 << GEN_BITS) - 1))))
}

/// True when `addr`'s page was found to be plain host memory since the driver's last mapping.
#[inline]
pub fn remembered(addr: usize) -> bool {
    if !super::mapwatch::watching() {
        return false;
    }
    entry(addr, super::mapwatch::generation()).is_some_and(|(slot, e)| PAGES[slot].load(Relaxed) == e)
}

/// Notes that the driver did not know `addr`; `generation` was read before asking it. Callers
/// check `mapwatch::watching()` first.
pub fn remember(addr: usize, generation: u64) {
    if let Some((slot, e)) = entry(addr, generation) {
        PAGES[slot].store(e, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::certainly_host;

    static mut GLOBAL: [u8; 64] = [7; 64];

    #[test]
    fn heap_stack_and_globals_are_host() {
        let local = [0u8; 64];
        assert!(certainly_host(local.as_ptr() as usize));
        assert!(certainly_host(std::ptr::addr_of!(GLOBAL) as usize));
        let small = Box::new([1u8; 32]);
        // The test harness may run on a thread whose allocations come from an mmap'd arena;
        // only the main thread's small blocks are in the brk heap, so this is not asserted.
        let _ = certainly_host(small.as_ptr() as usize);
        let mapped = unsafe {
            libc::mmap(std::ptr::null_mut(), 1 << 20, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert!(!certainly_host(mapped as usize));
        unsafe { libc::munmap(mapped, 1 << 20) };
    }
}
