//! Waiting for a small copy by watching host memory instead of asking the driver.
//!
//! A staged message of a few bytes costs two copies, each a GPU round trip, and most of a
//! small message's time is spent learning that a copy is done. After the copies on the legacy
//! stream, `cuStreamWriteValue32` has the GPU write a fresh value into a word of pinned host
//! memory once everything before it on the stream is done (the write is fenced after them);
//! the calling thread polls that word, with no driver call while it waits. On one H100
//! (2026-11-23, GPU run `2026-11-23-aa`, polling both copies of the turn-around) an 8-byte ping-pong turn-around got 0.5 us faster
//! than with `cuStreamSynchronize`, where polling `cuStreamQuery` gained nothing.
//!
//! Only copies of at most [`MAX_BYTES`] wait this way: the thread spins while it waits, which
//! is what the driver does anyway for so short a wait, while a long one keeps the context's own
//! scheduling (a program may have asked the driver to yield or block). Every thread has its own
//! word, so concurrent waits never see each other's values. Where the driver lacks the calls,
//! or the first write fails, copies are waited for with `cuStreamSynchronize` as before.
//!
//! The smallest copies to the device skip the copy engine: [`write_to_device`] has the stream
//! write the values itself, in the same batch as the word.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use cudarc::driver::sys::CUstreamBatchMemOpType;

use super::copy::{check, CudaError};
use super::driver::{Driver, MemOp, Signals, CUDA_SUCCESS};

/// Copies up to this size are waited for by polling.
pub const MAX_BYTES: usize = 64 << 10;

const PAGE: usize = 4096;
const WORDS: u32 = (PAGE / 4) as u32;
/// `CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP`: one mapping serves every context.
const REGISTER_FLAGS: u32 = 0x1 | 0x2;
/// `CUDA_ERROR_NOT_READY`.
const NOT_READY: u32 = 600;
/// Spins between looks at the stream for an error that would keep the word from being written.
const SPINS_PER_QUERY: u32 = 1024;

const UNTRIED: u8 = 0;
const READY: u8 = 1;
const UNAVAILABLE: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNTRIED);
static WORDS_HOST: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());
static WORDS_DEVICE: AtomicU64 = AtomicU64::new(0);
static NEXT_WORD: AtomicU32 = AtomicU32::new(0);
static SETUP: Mutex<()> = Mutex::new(());

thread_local! {
    /// This thread's word, plus one (0: none yet).
    static WORD: Cell<u32> = const { Cell::new(0) };
    /// The last value this thread asked for.
    static SEQUENCE: Cell<u32> = const { Cell::new(0) };
}

/// Shaped work (pitched copies, the pack kernel) on a GPU another rank shares is waited for by
/// polling up to this size.
const SHARED_SHAPED_POLL_BYTES: usize = 256;

/// The largest shaped work [`wait_shaped`] waits for by polling: [`MAX_BYTES`], or on a GPU
/// another rank of the job shares [`SHARED_SHAPED_POLL_BYTES`]. There the stream's write of
/// the word after a pitched copy cost a column exchange about 10 us (2 x H200, both ranks on
/// GPU 0, `bench/datatypes`, two rounds each way: an 8 KiB column 40.9-42.4 us polling,
/// 31.6-32.5 synchronising, the `cudaMemcpy2D` recipe 29.6-30.7; 32 KiB 63.3-63.5 against
/// 53.1). Plain copies there poll up to [`MAX_BYTES`] like anywhere else: synchronising them
/// made a 64 KiB ping-pong 34 us one way against 28 polling, and 4 KiB messages both ways at
/// once (`bench/bw -b`) 44 MB/s against 224 (2 x H200, both ranks on GPU 0, 2026-11-26).
fn shaped_poll_limit() -> usize {
    if gpu_shared() {
        SHARED_SHAPED_POLL_BYTES
    } else {
        MAX_BYTES
    }
}

/// Waits until the `bytes` copied by the work queued so far on the legacy default stream of
/// the current context are in place: by polling up to [`MAX_BYTES`] where it can, else with
/// `cuStreamSynchronize`.
pub fn wait(d: &Driver, bytes: usize) -> Result<(), CudaError> {
    wait_up_to(d, bytes, MAX_BYTES)
}

/// [`wait`] after shaped work: pitched copies or the pack kernel.
pub fn wait_shaped(d: &Driver, bytes: usize) -> Result<(), CudaError> {
    wait_up_to(d, bytes, shaped_poll_limit())
}

fn wait_up_to(d: &Driver, bytes: usize, limit: usize) -> Result<(), CudaError> {
    if bytes > limit {
        return synchronize(d);
    }
    match (d.signals.as_ref(), word(d)) {
        (Some(s), Some(i)) => poll(d, s, i),
        _ => synchronize(d),
    }
}

pub fn synchronize(d: &Driver) -> Result<(), CudaError> {
    // SAFETY: the legacy default stream of the current context.
    check("cuStreamSynchronize", unsafe { (d.stream_synchronize)(std::ptr::null_mut()) })
}

/// The next value for this thread's word, and the word's device address.
fn next_value(i: u32) -> (u32, u64) {
    let want = SEQUENCE.with(|c| {
        let v = c.get().wrapping_add(1);
        c.set(v);
        v
    });
    (want, WORDS_DEVICE.load(Ordering::Acquire) + 4 * i as u64)
}

fn poll(d: &Driver, s: &Signals, i: u32) -> Result<(), CudaError> {
    let (want, device) = next_value(i);
    // SAFETY: the device address of this thread's word, in memory mapped for every context.
    let rc = unsafe { (s.stream_write_value32)(std::ptr::null_mut(), device, want, 0) };
    if rc != CUDA_SUCCESS {
        // Not supported here, or the stream already failed: either way the driver's own wait
        // tells, and nothing is lost by never polling again.
        STATE.store(UNAVAILABLE, Ordering::Release);
        return synchronize(d);
    }
    spin(s, i, want)
}

/// Small host-to-device copies are written by the stream itself, as 64- and 32-bit stream
/// memory writes whose values travel in the command, followed in the same batch by the write of
/// this thread's word: one driver call, no copy engine and no read of host memory by the GPU.
/// Each write carries a system-wide fence (this driver refuses the flag that drops it,
/// `CUDA_ERROR_INVALID_VALUE`), about 0.6 us of GPU time apiece, so only copies of at most
/// [`MAX_WRITES`] writes go this way. One H100 (GPU run `2026-11-24-ap`, `bench/copy_paths`),
/// copy-engine copy waited by the word against the batch, us, alone / followed by an 8-byte
/// copy back: 4 B 6.19/12.97 against 4.94/11.56, 8 B 6.04/12.68 against 5.63/11.52, 16 B
/// 6.63/12.93 against 5.68/12.16, 32 B 6.51/13.37 against 7.01/13.34, 64 B 7.16/12.99 against
/// 9.66/15.73.
pub const MAX_WRITES: usize = 2;
/// Writes allowed where another rank of the job shares this process's GPU (`gpu_shared`): a
/// copy to the device of up to 16 KiB then waits for the GPU to switch from the other process,
/// whatever its size, while stream writes do not. One H100 shared by two ranks (2026-11-25,
/// `bench/turns`, each process in turn, us): a 16 B to 16 KiB copy 144-147, from 32 KiB 10-11;
/// writes of 16, 64, 256 and 1024 B 7.9, 12.3, 29.4 and 97.4 (alone 4.1, 6.2, 14.4, 48.7, where
/// a copy takes 4-5). In a ping-pong on that GPU a 64 B message then took 19.3 us one way and a
/// 256 B one 36.7 (copied: 152); when the GPU happens to be idle, 256 B cost at most 10 us more
/// than a copy.
pub const SHARED_MAX_WRITES: usize = 32;
/// Bytes the stream may write for the receives of one completion call (`copy::Deferred`);
/// the rest are copied. On a shared GPU the writes spare a receive the wait for the GPU to
/// switch from the other process, but take about 0.09 us a byte there, while the copies of one
/// call wait for the switch once: with every receive of up to [`SHARED_MAX_WRITES`] words
/// written, windows of 64 messages of 256 B moved 7.9 MB/s one way and 8.0 both ways at once,
/// copied 21.0 and 23.0 (2 x H200, both ranks on GPU 0, `bench/bw`, 2026-11-26). Two receives
/// of 256 B still write (about 60 us against one switch of about 145).
pub const BATCH_WRITE_BYTES: usize = 512;
/// The writes one copy may take: [`MAX_WRITES`], or [`SHARED_MAX_WRITES`] once the GPU is
/// known to be shared.
static WRITE_LIMIT: AtomicUsize = AtomicUsize::new(MAX_WRITES);
/// Set when another rank of the job runs on this node (`node_shared`).
static NODE_SHARED: AtomicBool = AtomicBool::new(false);

/// Set when another rank of the job sees only the one GPU this process sees
/// (`gpu_shared_by_ranks`).
static GPU_SHARED: AtomicBool = AtomicBool::new(false);

/// Another rank of the job runs on this node: where the node has one GPU, the two share it.
pub fn node_shared() {
    NODE_SHARED.store(true, Ordering::Relaxed);
}

/// Another rank of this node sees only the one GPU this process sees (the same
/// `CUDA_VISIBLE_DEVICES`): the two share it.
pub fn gpu_shared_by_ranks() {
    GPU_SHARED.store(true, Ordering::Relaxed);
}

/// Whether another rank of the job shares this process's GPU: one GPU on the node and another
/// rank on it, or another rank made to see the same one GPU.
pub fn gpu_shared() -> bool {
    GPU_SHARED.load(Ordering::Relaxed) || (NODE_SHARED.load(Ordering::Relaxed) && super::driver::one_gpu())
}

/// How many stream writes a copy may take on this process's GPU.
fn write_limit() -> usize {
    let limit = WRITE_LIMIT.load(Ordering::Relaxed);
    if limit == MAX_WRITES && gpu_shared() {
        WRITE_LIMIT.store(SHARED_MAX_WRITES, Ordering::Relaxed);
        return SHARED_MAX_WRITES;
    }
    limit
}
const WRITE_VALUE_32: u32 = CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_32 as u32;
const WRITE_VALUE_64: u32 = CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_64 as u32;
/// Cleared once the driver refused a batch.
static WRITES: AtomicBool = AtomicBool::new(true);

/// Copies the byte runs `(offset, len)` of `src` to the same offsets of device memory at `dst`
/// (queued on the legacy default stream of the current context) with stream memory writes, and
/// with `wait` waits for them by polling. `None` when they cannot be written that way (a run
/// not whole 4-byte words at a 4-byte aligned address, more writes than [`write_limit`], no
/// batches in this driver, or the batch refused): then nothing was queued that the caller's
/// copy will not overwrite with the same bytes.
pub fn write_to_device(d: &Driver, dst: u64, src: *const u8, runs: &[(usize, usize)], wait: bool) -> Option<Result<(), CudaError>> {
    let s = d.signals.as_ref()?;
    let batch = s.stream_batch_mem_op?;
    let limit = write_limit();
    if !WRITES.load(Ordering::Relaxed) || runs.len() > limit {
        return None;
    }
    let mut ops = [MemOp::default(); SHARED_MAX_WRITES + 1];
    let mut n = 0;
    for &(at, len) in runs {
        let (mut a, end) = (dst + at as u64, dst + (at + len) as u64);
        if a % 4 != 0 || len % 4 != 0 {
            return None;
        }
        while a < end {
            let wide = a % 8 == 0 && end - a >= 8;
            if n == limit {
                return None;
            }
            // SAFETY: 8 or 4 readable bytes of the run, at the same offset in the source.
            let value = unsafe {
                let p = src.add((a - dst) as usize);
                if wide { p.cast::<u64>().read_unaligned() } else { p.cast::<u32>().read_unaligned() as u64 }
            };
            ops[n] = MemOp::write(if wide { WRITE_VALUE_64 } else { WRITE_VALUE_32 }, a, value);
            n += 1;
            a += if wide { 8 } else { 4 };
        }
    }
    let mut word_and_value = None;
    if wait {
        let i = word(d)?;
        let (want, device) = next_value(i);
        ops[n] = MemOp::write(WRITE_VALUE_32, device, want as u64);
        n += 1;
        word_and_value = Some((i, want));
    }
    // SAFETY: n operations on the legacy default stream of the current context.
    let rc = unsafe { batch(std::ptr::null_mut(), n as u32, ops.as_mut_ptr(), 0) };
    if rc != CUDA_SUCCESS {
        // A refused batch costs as much as a copy: once refused, copies only.
        WRITES.store(false, Ordering::Relaxed);
        return None;
    }
    crate::base::stats::add(&crate::base::stats::BYTES_STREAM_WRITTEN, runs.iter().map(|r| r.1).sum());
    Some(match word_and_value {
        Some((i, want)) => spin(s, i, want),
        None => Ok(()),
    })
}

/// Waits until this thread's word `i` holds `want`.
fn spin(s: &Signals, i: u32, want: u32) -> Result<(), CudaError> {
    // SAFETY: word i of the registered page, which lives until `release`.
    let word = unsafe { &*WORDS_HOST.load(Ordering::Acquire).add(i as usize) };
    let mut spins = 0u32;
    loop {
        if word.load(Ordering::Acquire) == want {
            return Ok(());
        }
        spins += 1;
        if spins == SPINS_PER_QUERY {
            spins = 0;
            // SAFETY: the legacy default stream of the current context.
            match unsafe { (s.stream_query)(std::ptr::null_mut()) } {
                NOT_READY => {}
                // Done: the word's write is done too, and so is every copy before it.
                CUDA_SUCCESS => return Ok(()),
                rc => return check("cuStreamQuery", rc),
            }
        }
        std::hint::spin_loop();
    }
}

/// This thread's word, setting up the page on first use; `None`: wait the driver's way.
fn word(d: &Driver) -> Option<u32> {
    let w = WORD.with(Cell::get);
    if w != 0 && STATE.load(Ordering::Acquire) == READY {
        return Some(w - 1);
    }
    if !ready(d) {
        return None;
    }
    if w != 0 {
        return Some(w - 1);
    }
    let i = NEXT_WORD.fetch_add(1, Ordering::Relaxed);
    if i >= WORDS {
        // More threads than words: this one waits the driver's way.
        return None;
    }
    WORD.with(|c| c.set(i + 1));
    Some(i)
}

fn ready(d: &Driver) -> bool {
    match STATE.load(Ordering::Acquire) {
        READY => return true,
        UNAVAILABLE => return false,
        _ => {}
    }
    let Some(s) = d.signals.as_ref() else {
        STATE.store(UNAVAILABLE, Ordering::Release);
        return false;
    };
    let _setup = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    if STATE.load(Ordering::Acquire) != UNTRIED {
        return STATE.load(Ordering::Acquire) == READY;
    }
    let ok = map_page(d, s);
    STATE.store(if ok { READY } else { UNAVAILABLE }, Ordering::Release);
    ok
}

/// Maps a zeroed page, pins it for every context and learns its device address.
fn map_page(d: &Driver, s: &Signals) -> bool {
    // SAFETY: a fresh private anonymous mapping of one page.
    let page = unsafe { libc::mmap(std::ptr::null_mut(), PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    if page == libc::MAP_FAILED {
        return false;
    }
    let mut device = 0u64;
    // SAFETY: the page just mapped; a context is current (the caller copies in one).
    let ok = unsafe {
        (d.mem_host_register)(page, PAGE, REGISTER_FLAGS) == CUDA_SUCCESS
            && ((s.mem_host_get_device_pointer)(&mut device, page, 0) == CUDA_SUCCESS || {
                (d.mem_host_unregister)(page);
                false
            })
    };
    if !ok {
        // SAFETY: the page mapped above, not registered.
        unsafe { libc::munmap(page, PAGE) };
        return false;
    }
    WORDS_DEVICE.store(device, Ordering::Release);
    WORDS_HOST.store(page.cast(), Ordering::Release);
    true
}

/// Unpins and unmaps the page (`MPI_Finalize`, after the last copy); a later wait maps a new one.
pub fn release() {
    let _setup = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    if STATE.load(Ordering::Acquire) != READY {
        return;
    }
    STATE.store(UNTRIED, Ordering::Release);
    let page: *mut c_void = WORDS_HOST.swap(std::ptr::null_mut(), Ordering::AcqRel).cast();
    if let Some(d) = super::driver::get() {
        // SAFETY: the page this module registered; no wait is in progress after finalize.
        unsafe { (d.mem_host_unregister)(page) };
    }
    // SAFETY: the page this module mapped.
    unsafe { libc::munmap(page, PAGE) };
}
