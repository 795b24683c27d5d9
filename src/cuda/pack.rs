//! cudampi's pack kernel: the byte runs of a datatype's blocks gathered from device memory
//! into one packed buffer, or scattered from it, by the GPU itself in one launch, where the
//! copy engines would take one driver call per run.
//!
//! The kernel (`PTX`, loaded with `cuModuleLoadData` once per context) reads a table of runs
//! (offset in the program's buffer, offset in the packed buffer, length) and gives each run to
//! one warp, which copies it in 4-byte words when the run allows and in bytes otherwise. The
//! packed buffer and the table live in device memory owned here, so the kernel touches device
//! memory only and the bus carries the payload in one DMA copy on the legacy default stream
//! (as `copy` and `strided` order theirs). The table is made once per datatype's blocks and
//! context and kept while the blocks live, so a message sent again costs no pass over its
//! runs. No device byte outside the runs is written. Scratch buffers, tables and their pinned
//! host copies are kept for reuse and released in `MPI_Finalize`.
//!
//! Where the kernel cannot run (no module entry points in the driver, the PTX refused, no
//! device memory to spare, `CUDAMPI_PACK_KERNEL=0`), [`to_host`] and [`to_device`] say so and
//! the caller makes its copies block by block. It may use `base` and the other `cuda` modules.

use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use std::sync::{Arc, Weak};

use super::copy::{check, CudaError, InContext};
use super::driver::{self, CUcontext, CUdeviceptr, Driver, CUDA_SUCCESS};
use super::modules::Module;
use super::signal;
use super::strided::{summary, Blocks, Strided, Summary};
use crate::base::{config, stats};

/// The kernel. PTX of a low target that has every instruction it uses; the driver compiles it
/// for the GPU at hand. `%TARGET%` is replaced by each target `modules` tries in turn until
/// one loads (a newer driver may have dropped the older targets). Parameters: the program's buffer, the
/// packed buffer, the table (16 bytes a run: u64 offset in the program's buffer, u32 offset in
/// the packed buffer, u32 bytes), the runs, and 1 to gather (program to packed) or 0 to
/// scatter.
const PTX: &str = r#"
.version 6.4
.target %TARGET%
.address_size 64

.visible .entry cudampi_runs(
	.param .u64 p_user,
	.param .u64 p_packed,
	.param .u64 p_table,
	.param .u64 p_n,
	.param .u32 p_gather
)
{
	.reg .pred 	%p<5>;
	.reg .b32 	%r<16>;
	.reg .b64 	%rd<24>;

	ld.param.u64 	%rd1, [p_user];
	ld.param.u64 	%rd2, [p_packed];
	ld.param.u64 	%rd3, [p_table];
	ld.param.u64 	%rd4, [p_n];
	ld.param.u32 	%r14, [p_gather];
	setp.ne.u32 	%p4, %r14, 0;
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mov.u32 	%r4, %nctaid.x;
	mad.lo.u32 	%r5, %r1, %r2, %r3;
	shr.u32 	%r6, %r5, 5;
	and.b32 	%r7, %r3, 31;
	mul.lo.u32 	%r8, %r4, %r2;
	shr.u32 	%r9, %r8, 5;
	cvt.u64.u32 	%rd5, %r6;
	cvt.u64.u32 	%rd6, %r7;
	cvt.u64.u32 	%rd7, %r9;
RUN:
	setp.ge.u64 	%p1, %rd5, %rd4;
	@%p1 bra 	DONE;
	shl.b64 	%rd8, %rd5, 4;
	add.s64 	%rd8, %rd3, %rd8;
	ld.global.u64 	%rd9, [%rd8];
	ld.global.u32 	%r12, [%rd8+8];
	ld.global.u32 	%r13, [%rd8+12];
	cvt.u64.u32 	%rd10, %r12;
	cvt.u64.u32 	%rd11, %r13;
	add.s64 	%rd18, %rd1, %rd9;
	add.s64 	%rd19, %rd2, %rd10;
	selp.b64 	%rd12, %rd19, %rd18, %p4;
	selp.b64 	%rd13, %rd18, %rd19, %p4;
	or.b64 	%rd14, %rd12, %rd13;
	or.b64 	%rd14, %rd14, %rd11;
	and.b64 	%rd14, %rd14, 3;
	setp.eq.s64 	%p2, %rd14, 0;
	@%p2 bra 	WORDS;
	mov.u64 	%rd15, %rd6;
BYTE:
	setp.ge.u64 	%p3, %rd15, %rd11;
	@%p3 bra 	NEXT;
	add.s64 	%rd16, %rd13, %rd15;
	ld.global.u8 	%r10, [%rd16];
	add.s64 	%rd17, %rd12, %rd15;
	st.global.u8 	[%rd17], %r10;
	add.s64 	%rd15, %rd15, 32;
	bra 	BYTE;
WORDS:
	shl.b64 	%rd15, %rd6, 2;
WORD:
	setp.ge.u64 	%p3, %rd15, %rd11;
	@%p3 bra 	NEXT;
	add.s64 	%rd16, %rd13, %rd15;
	ld.global.u32 	%r11, [%rd16];
	add.s64 	%rd17, %rd12, %rd15;
	st.global.u32 	[%rd17], %r11;
	add.s64 	%rd15, %rd15, 128;
	bra 	WORD;
NEXT:
	add.s64 	%rd5, %rd5, %rd7;
	bra 	RUN;
DONE:
	ret;
}
"#;

/// The PTX for `target`.
fn ptx(target: &str) -> String {
    format!("{}\0", PTX.replace("%TARGET%", target))
}

fn entries() -> Vec<String> {
    vec!["cudampi_runs\0".into()]
}

static KERNEL: Module = Module::new(ptx, entries, "pack kernel; datatypes of many blocks are copied block by block, which is slower");

/// Threads per block: eight warps, eight runs at a time.
const THREADS: u32 = 256;
/// Most thread blocks a launch asks for; the warps loop over the runs beyond.
const MAX_GRID: u64 = 4096;
/// Bytes of one run in the table.
const ENTRY_BYTES: usize = 16;
/// Most runs one launch takes (a table of 16 MiB); past it, the caller's driver calls.
const MAX_RUNS: usize = 1 << 20;
/// Scratch buffers larger than this are freed after use instead of kept.
const KEEP_SCRATCH: usize = 64 << 20;
/// Scratch buffers kept for reuse, at most.
const KEPT_SCRATCH: usize = 4;

/// Pinned host tables not in use: (address, capacity in bytes).
static TABLES: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
/// Device scratch not in use: (context, address, capacity in bytes).
static SCRATCH: Mutex<Vec<(usize, CUdeviceptr, usize)>> = Mutex::new(Vec::new());

/// Whether a copy of many runs should count on the kernel: on unless `CUDAMPI_PACK_KERNEL=0`
/// or a driver refused it. Decided before any context is at hand, so a kernel that then cannot
/// run for one copy costs that copy its runs one by one, never correctness.
pub fn expected() -> bool {
    config::get().pack_kernel && !KERNEL.refused() && driver::get().is_some_and(|d| d.kernels.is_some())
}

/// Calls `f(offset, bytes)` for each run of `blocks` in packing order ([`Strided::ascending`]
/// blocks, each block's planes, then rows), as the kernel packs them.
pub fn each_run(blocks: &[Strided], mut f: impl FnMut(i64, usize)) {
    for b in blocks.iter().map(|b| b.ascending()).filter(|b| b.len > 0) {
        for k in 0..b.planes as i64 {
            for r in 0..b.rows as i64 {
                f(b.at + k * b.plane_pitch + r * b.pitch, b.len);
            }
        }
    }
}

/// Gathers the runs of `blocks` (offsets from `dev`) into `host`, one after the other, on the
/// legacy default stream of the context `ctx` made current, complete on return. `Ok(false)`:
/// the kernel cannot run here and nothing was done.
pub fn to_host(ctx: &InContext, dev: u64, blocks: &Blocks, host: *mut c_void) -> Result<bool, CudaError> {
    launch(ctx, true, dev, blocks, host)
}

/// Scatters the bytes at `host`, one run after the other, to the runs of `blocks` (offsets
/// from `dev`); no other device byte is written. As [`to_host`] otherwise.
pub fn to_device(ctx: &InContext, dev: u64, blocks: &Blocks, host: *const c_void) -> Result<bool, CudaError> {
    launch(ctx, false, dev, blocks, host.cast_mut())
}

fn launch(ctx: &InContext, gather: bool, dev: u64, blocks: &Blocks, host: *mut c_void) -> Result<bool, CudaError> {
    let Summary { bytes: payload, runs, .. } = summary(blocks);
    if !expected() || runs == 0 || runs > MAX_RUNS || u32::try_from(payload).is_err() {
        return Ok(false);
    }
    let d = ctx.driver();
    let Some(k) = d.kernels.as_ref() else { return Ok(false) };
    let Some((context, function)) = KERNEL.function(d, k, 0) else { return Ok(false) };
    let Some((table, users, filled)) = DeviceTable::get(d, context, blocks, runs) else { return Ok(false) };
    let release = |filled: Option<Table>| {
        users.fetch_sub(1, Ordering::AcqRel);
        if let Some(t) = filled {
            t.give_back();
        }
    };
    let Some(scratch) = Scratch::take(d, context, payload) else {
        // The table's copy may still be queued: it is waited for before its host side goes.
        if filled.is_some() {
            // SAFETY: the legacy default stream of the current context.
            unsafe { (d.stream_synchronize)(std::ptr::null_mut()) };
        }
        release(filled);
        return Ok(false);
    };
    let legacy = std::ptr::null_mut();
    let (mut p_user, mut p_packed, mut p_table, mut p_n, mut p_gather) = (dev, scratch.device, table, runs as u64, u32::from(gather));
    let mut params: [*mut c_void; 5] = [
        (&mut p_user as *mut u64).cast(),
        (&mut p_packed as *mut u64).cast(),
        (&mut p_table as *mut u64).cast(),
        (&mut p_n as *mut u64).cast(),
        (&mut p_gather as *mut u32).cast(),
    ];
    let grid = (runs as u64).div_ceil(u64::from(THREADS / 32)).min(MAX_GRID) as c_uint;
    // SAFETY: the scratch holds the payload, `host` too (the caller's); the function's five
    // parameters; all on the legacy default stream of the current context, after the table's
    // own copy if it was just made.
    let queued = unsafe {
        match gather {
            true => Ok(()),
            false => check("cuMemcpyHtoDAsync", (d.memcpy_htod_async)(scratch.device, host, payload, legacy)),
        }
        .and_then(|_| check("cuLaunchKernel", (k.launch_kernel)(function, grid, 1, 1, THREADS, 1, 1, 0, legacy, params.as_mut_ptr(), std::ptr::null_mut())))
        .and_then(|_| match gather {
            true => check("cuMemcpyDtoHAsync", (d.memcpy_dtoh_async)(host, scratch.device, payload, legacy)),
            false => Ok(()),
        })
    };
    // The scratch (and a table's host copy) may be reused only once the stream is done.
    let done = match queued {
        Ok(()) => signal::wait_shaped(d, payload),
        // SAFETY: the legacy default stream of the current context.
        Err(_) => check("cuStreamSynchronize", unsafe { (d.stream_synchronize)(legacy) }),
    };
    release(filled);
    scratch.give_back(d);
    queued.and(done)?;
    stats::add(&stats::KERNEL_RUNS, runs);
    Ok(true)
}

/// The runs' table in device memory, kept per blocks and context while the blocks live: a
/// datatype sent again and again (`mpi::typemap::message_of` gives the same blocks) pays for
/// its table once.
struct DeviceTable {
    blocks: Weak<[Strided]>,
    ctx: usize,
    device: CUdeviceptr,
    /// Launches using it now: it is not freed under them.
    users: Arc<AtomicUsize>,
}

static DEVICE_TABLES: Mutex<Vec<DeviceTable>> = Mutex::new(Vec::new());
/// Tables kept per context, at most; the oldest goes first.
const KEPT_TABLES: usize = 32;

impl DeviceTable {
    /// The table of `blocks` in the context `ctx` (current), its count of users (this launch
    /// counted, to be uncounted once it is done), and the host table it was just copied from,
    /// if it was (to be given back then too).
    fn get(d: &Driver, ctx: usize, blocks: &Blocks, runs: usize) -> Option<(CUdeviceptr, Arc<AtomicUsize>, Option<Table>)> {
        let same = |t: &DeviceTable| t.ctx == ctx && std::ptr::eq(t.blocks.as_ptr(), Arc::as_ptr(blocks));
        if let Some(t) = DEVICE_TABLES.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|t| same(t)) {
            t.users.fetch_add(1, Ordering::AcqRel);
            return Some((t.device, t.users.clone(), None));
        }
        let bytes = runs * ENTRY_BYTES;
        let host = Table::take(d, bytes)?;
        let mut at = 0u32;
        let mut i = 0;
        each_run(blocks, |off, len| {
            let mut e = [0u8; ENTRY_BYTES];
            e[..8].copy_from_slice(&(off as u64).to_le_bytes());
            e[8..12].copy_from_slice(&at.to_le_bytes());
            e[12..].copy_from_slice(&(len as u32).to_le_bytes());
            // SAFETY: the table holds runs * ENTRY_BYTES bytes, and is ours.
            unsafe { std::ptr::copy_nonoverlapping(e.as_ptr(), host.host.cast::<u8>().add(i * ENTRY_BYTES), ENTRY_BYTES) };
            at += len as u32;
            i += 1;
        });
        let mut device = 0;
        // SAFETY: an out-pointer; the context is current. The copy is queued on the legacy
        // default stream, before the launch that reads it.
        let ok = unsafe {
            (d.mem_alloc)(&mut device, bytes) == CUDA_SUCCESS
                && ((d.memcpy_htod_async)(device, host.host, bytes, std::ptr::null_mut()) == CUDA_SUCCESS || {
                    (d.mem_free)(device);
                    false
                })
        };
        if !ok {
            host.give_back();
            return None;
        }
        let mut tables = DEVICE_TABLES.lock().unwrap_or_else(|e| e.into_inner());
        // Tables of blocks no one holds any more, and past the limit the oldest of this
        // context, are freed (in this context, which is current).
        let mut mine = tables.iter().filter(|t| t.ctx == ctx).count();
        tables.retain(|t| {
            let unused = t.users.load(Ordering::Acquire) == 0;
            let drop = t.ctx == ctx && unused && (t.blocks.strong_count() == 0 || mine >= KEPT_TABLES);
            if drop {
                mine -= 1;
                // SAFETY: a table this module allocated in the current context, which no
                // launch uses now.
                unsafe { (d.mem_free)(t.device) };
            }
            !drop
        });
        let users = Arc::new(AtomicUsize::new(1));
        tables.push(DeviceTable { blocks: Arc::downgrade(blocks), ctx, device, users: users.clone() });
        Some((device, users, Some(host)))
    }
}

/// A pinned host table, from which the runs go to the device in one copy.
struct Table {
    host: *mut c_void,
    cap: usize,
}

impl Table {
    fn take(d: &Driver, bytes: usize) -> Option<Table> {
        let spare = {
            let mut t = TABLES.lock().unwrap_or_else(|e| e.into_inner());
            t.iter().position(|e| e.1 >= bytes).map(|i| t.swap_remove(i))
        };
        if let Some((host, cap)) = spare {
            return Some(Table { host: host as *mut c_void, cap });
        }
        // Rounded up so that tables of similar sizes are reused.
        let cap = bytes.next_power_of_two().max(64 << 10);
        // SAFETY: a fresh private anonymous mapping.
        let host = unsafe { libc::mmap(std::ptr::null_mut(), cap, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if host == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: the mapping just made; a context is current (the caller's).
        if unsafe { (d.mem_host_register)(host, cap, cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE) } != CUDA_SUCCESS {
            // SAFETY: the mapping made above, not registered.
            unsafe { libc::munmap(host, cap) };
            return None;
        }
        Some(Table { host, cap })
    }

    fn give_back(self) {
        TABLES.lock().unwrap_or_else(|e| e.into_inner()).push((self.host as usize, self.cap));
    }
}

/// Device memory of the current context for the table and the packed payload.
struct Scratch {
    ctx: usize,
    device: CUdeviceptr,
    cap: usize,
}

impl Scratch {
    fn take(d: &Driver, ctx: usize, bytes: usize) -> Option<Scratch> {
        let spare = {
            let mut s = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
            s.iter().position(|e| e.0 == ctx && e.2 >= bytes).map(|i| s.swap_remove(i))
        };
        if let Some((ctx, device, cap)) = spare {
            return Some(Scratch { ctx, device, cap });
        }
        let cap = bytes.next_power_of_two().max(1 << 20);
        let mut device = 0;
        // SAFETY: an out-pointer; the context is current. Out of device memory, the caller
        // copies block by block.
        (unsafe { (d.mem_alloc)(&mut device, cap) } == CUDA_SUCCESS).then_some(Scratch { ctx, device, cap })
    }

    /// Keeps the buffer for the next copy, unless it is large or enough are kept.
    fn give_back(self, d: &Driver) {
        if self.cap <= KEEP_SCRATCH {
            let mut s = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
            if s.len() < KEPT_SCRATCH {
                s.push((self.ctx, self.device, self.cap));
                return;
            }
        }
        // SAFETY: memory this module allocated in the current context, no longer in use.
        unsafe { (d.mem_free)(self.device) };
    }
}

/// Unloads the kernel and frees the scratch in every context, and unpins the tables
/// (`MPI_Finalize`, after the last copy); a later copy loads and allocates them again.
pub fn release() {
    let Some(d) = driver::get() else { return };
    let scratch = std::mem::take(&mut *SCRATCH.lock().unwrap_or_else(|e| e.into_inner()));
    let tables = std::mem::take(&mut *TABLES.lock().unwrap_or_else(|e| e.into_inner()));
    let device_tables = std::mem::take(&mut *DEVICE_TABLES.lock().unwrap_or_else(|e| e.into_inner()));
    // Each in its own context, pushed for the call and popped; a context the program destroyed
    // refuses the push, and what was loaded or allocated in it went with it.
    let in_context = |ctx: usize, f: &dyn Fn()| {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: a context cudampi saw current; balanced push and pop.
        unsafe {
            if (d.ctx_push_current)(ctx as CUcontext) == CUDA_SUCCESS {
                f();
                (d.ctx_pop_current)(&mut popped);
            }
        }
    };
    if let Some(k) = d.kernels.as_ref() {
        KERNEL.release(d, k);
    }
    for t in device_tables {
        // SAFETY: a table allocated in this context, no longer in use after finalize.
        in_context(t.ctx, &|| unsafe {
            (d.mem_free)(t.device);
        });
    }
    for (ctx, device, _) in scratch {
        // SAFETY: device memory allocated in this context, no longer in use after finalize.
        in_context(ctx, &|| unsafe {
            (d.mem_free)(device);
        });
    }
    for (host, cap) in tables {
        // SAFETY: a table this module mapped and pinned, no longer in use after finalize.
        unsafe {
            (d.mem_host_unregister)(host as *mut c_void);
            libc::munmap(host as *mut c_void, cap);
        }
    }
}
