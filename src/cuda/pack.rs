//! cudampi's pack kernel: the byte runs of a datatype's blocks copied between device memory and
//! pinned host memory by the GPU itself, in one launch, where the copy engines would take one
//! driver call per run.
//!
//! The kernel (`PTX`, loaded with `cuModuleLoadData` once per context) reads a table of runs
//! (destination offset, source offset, length) and gives each run to one warp, which copies it
//! in 4-byte words when the run allows and in bytes otherwise. Both sides are addressed
//! directly: the device memory and the staging buffer, which the pool pins with
//! `CU_MEMHOSTREGISTER_DEVICEMAP`. So a gather writes the packed payload straight into the
//! staging buffer over the bus and a scatter reads it from there: no device scratch memory, no
//! second copy, and no device byte outside the runs is written. The table itself is pinned
//! host memory owned here, released in `MPI_Finalize`.
//!
//! Where the kernel cannot run (no module entry points in the driver, the PTX refused, host
//! memory that is not mapped, `CUDAMPI_PACK_KERNEL=0`), [`copy_runs`] says so and the caller
//! makes its copies block by block. It may use `base` and the other `cuda` modules.

use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

use super::copy::{check, CudaError, InContext};
use super::driver::{self, CUcontext, CUdeviceptr, Driver, Kernels, CUDA_SUCCESS};
use super::signal;
use crate::base::{config, log, stats};

/// The kernel. PTX of the lowest target that has every instruction it uses; the driver
/// compiles it for the GPU at hand. `%TARGET%` is replaced by each of [`TARGETS`] in turn
/// until one loads (a newer driver may have dropped the older targets).
const PTX: &str = r#"
.version 6.4
.target %TARGET%
.address_size 64

.visible .entry cudampi_runs(
	.param .u64 p_dst,
	.param .u64 p_src,
	.param .u64 p_table,
	.param .u64 p_n
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<12>;
	.reg .b64 	%rd<20>;

	ld.param.u64 	%rd1, [p_dst];
	ld.param.u64 	%rd2, [p_src];
	ld.param.u64 	%rd3, [p_table];
	ld.param.u64 	%rd4, [p_n];
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
	mul.lo.u64 	%rd8, %rd5, 24;
	add.s64 	%rd8, %rd3, %rd8;
	ld.u64 	%rd9, [%rd8];
	ld.u64 	%rd10, [%rd8+8];
	ld.u64 	%rd11, [%rd8+16];
	add.s64 	%rd12, %rd1, %rd9;
	add.s64 	%rd13, %rd2, %rd10;
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
	ld.u8 	%r10, [%rd16];
	add.s64 	%rd17, %rd12, %rd15;
	st.u8 	[%rd17], %r10;
	add.s64 	%rd15, %rd15, 32;
	bra 	BYTE;
WORDS:
	shl.b64 	%rd15, %rd6, 2;
WORD:
	setp.ge.u64 	%p3, %rd15, %rd11;
	@%p3 bra 	NEXT;
	add.s64 	%rd16, %rd13, %rd15;
	ld.u32 	%r11, [%rd16];
	add.s64 	%rd17, %rd12, %rd15;
	st.u32 	[%rd17], %r11;
	add.s64 	%rd15, %rd15, 128;
	bra 	WORD;
NEXT:
	add.s64 	%rd5, %rd5, %rd7;
	bra 	RUN;
DONE:
	ret;
}
"#;

const TARGETS: [&str; 2] = ["sm_75", "sm_52"];
const ENTRY: &[u8] = b"cudampi_runs\0";
/// Threads per block: eight warps, eight runs at a time.
const THREADS: u32 = 256;
/// Most thread blocks a launch asks for; the warps loop over the runs beyond.
const MAX_GRID: u64 = 4096;

/// One run: destination address, source address, bytes. The kernel adds the addresses to
/// bases it is given; cudampi gives it zero.
pub type Run = [u64; 3];

const UNTRIED: u8 = 0;
const READY: u8 = 1;
const UNAVAILABLE: u8 = 2;
/// Whether the kernel can be tried at all: set once the PTX was refused.
static STATE: AtomicU8 = AtomicU8::new(UNTRIED);

/// The kernel of each context it was loaded in: (context, module, function).
static MODULES: Mutex<Vec<(usize, usize, usize)>> = Mutex::new(Vec::new());
/// Pinned tables not in use: (host address, device address, capacity in runs).
static TABLES: Mutex<Vec<(usize, CUdeviceptr, usize)>> = Mutex::new(Vec::new());

/// Whether a copy of many runs should count on the kernel: on unless `CUDAMPI_PACK_KERNEL=0`
/// or a driver refused it. Decided before any context is at hand, so a kernel that then cannot
/// run for one copy costs that copy its runs one by one, never correctness.
pub fn expected() -> bool {
    config::get().pack_kernel && STATE.load(Ordering::Relaxed) != UNAVAILABLE && driver::get().is_some_and(|d| d.kernels.is_some())
}

/// Copies the `runs` with the kernel, on the legacy default stream of the context `ctx` made
/// current, complete on return. `host`: the host buffer the runs read or write, which must be
/// pinned and mapped at its own address. `Ok(false)`: the kernel cannot run here and nothing
/// was done.
pub fn copy_runs(ctx: &InContext, host: *const c_void, runs: &[Run]) -> Result<bool, CudaError> {
    if !expected() || runs.is_empty() {
        return Ok(false);
    }
    let d = ctx.driver();
    let Some(k) = d.kernels.as_ref() else { return Ok(false) };
    let mut mapped: CUdeviceptr = 0;
    // SAFETY: an out-pointer; the driver refuses memory it did not pin and map.
    if unsafe { (k.mem_host_get_device_pointer)(&mut mapped, host.cast_mut(), 0) } != CUDA_SUCCESS || mapped != host as u64 {
        return Ok(false);
    }
    let Some(function) = function(d, k) else { return Ok(false) };
    let Some(table) = Table::take(d, k, runs.len()) else { return Ok(false) };
    // SAFETY: the table holds at least runs.len() runs and is not in use elsewhere.
    unsafe { std::ptr::copy_nonoverlapping(runs.as_ptr(), table.host.cast::<Run>(), runs.len()) };
    let (mut p_dst, mut p_src, mut p_table, mut p_n) = (0u64, 0u64, table.device, runs.len() as u64);
    let mut params: [*mut c_void; 4] = [(&mut p_dst as *mut u64).cast(), (&mut p_src as *mut u64).cast(), (&mut p_table as *mut u64).cast(), (&mut p_n as *mut u64).cast()];
    let blocks = (runs.len() as u64).div_ceil(u64::from(THREADS / 32)).min(MAX_GRID) as c_uint;
    // SAFETY: the function's four u64 parameters; the legacy default stream of the current
    // context; both sides and the table addressable by the GPU.
    let launched = check("cuLaunchKernel", unsafe {
        (k.launch_kernel)(function, blocks, 1, 1, THREADS, 1, 1, 0, std::ptr::null_mut(), params.as_mut_ptr(), std::ptr::null_mut())
    });
    // The table may be reused only once the kernel has read it.
    let done = launched.and_then(|_| wait(d, runs));
    table.give_back();
    done?;
    stats::add(&stats::KERNEL_RUNS, runs.len());
    Ok(true)
}

fn wait(d: &Driver, runs: &[Run]) -> Result<(), CudaError> {
    if runs.iter().map(|r| r[2] as usize).sum::<usize>() <= signal::MAX_BYTES {
        return signal::wait(d);
    }
    // SAFETY: the legacy default stream of the current context.
    check("cuStreamSynchronize", unsafe { (d.stream_synchronize)(std::ptr::null_mut()) })
}

/// The kernel in the current context, loaded on first use.
fn function(d: &Driver, k: &Kernels) -> Option<*mut c_void> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: an out-pointer.
    if unsafe { (d.ctx_get_current)(&mut ctx) } != CUDA_SUCCESS || ctx.is_null() {
        return None;
    }
    let mut modules = MODULES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, _, f)) = modules.iter().find(|m| m.0 == ctx as usize) {
        return Some(f as *mut c_void);
    }
    // Loading compiles the PTX, once per context: a few milliseconds, under the lock so that
    // two threads do not both pay it.
    let mut last = CUDA_SUCCESS;
    for target in TARGETS {
        let image = format!("{}\0", PTX.replace("%TARGET%", target));
        let mut module = std::ptr::null_mut();
        // SAFETY: a NUL-terminated PTX image; an out-pointer.
        last = unsafe { (k.module_load_data)(&mut module, image.as_ptr().cast()) };
        if last != CUDA_SUCCESS {
            continue;
        }
        let mut f = std::ptr::null_mut();
        // SAFETY: the module just loaded; a NUL-terminated name.
        last = unsafe { (k.module_get_function)(&mut f, module, ENTRY.as_ptr().cast()) };
        if last == CUDA_SUCCESS {
            modules.push((ctx as usize, module as usize, f as usize));
            STATE.store(READY, Ordering::Relaxed);
            return Some(f);
        }
        // SAFETY: the module just loaded, of no use.
        unsafe { (k.module_unload)(module) };
    }
    if STATE.swap(UNAVAILABLE, Ordering::Relaxed) != UNAVAILABLE {
        log::warn(format_args!(
            "the GPU driver refused cudampi's pack kernel ({}); datatypes of many blocks are copied block by block, which is slower",
            d.error_name(last)
        ));
    }
    None
}

/// A pinned table of runs, taken from `TABLES` or made.
struct Table {
    host: *mut c_void,
    device: CUdeviceptr,
    cap: usize,
}

impl Table {
    fn take(d: &Driver, k: &Kernels, runs: usize) -> Option<Table> {
        let spare = {
            let mut t = TABLES.lock().unwrap_or_else(|e| e.into_inner());
            t.iter().position(|e| e.2 >= runs).map(|i| t.swap_remove(i))
        };
        if let Some((host, device, cap)) = spare {
            return Some(Table { host: host as *mut c_void, device, cap });
        }
        // A new table, rounded up so that tables of similar sizes are reused.
        let cap = runs.next_power_of_two().max(1024);
        let bytes = cap * std::mem::size_of::<Run>();
        // SAFETY: a fresh private anonymous mapping.
        let host = unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if host == libc::MAP_FAILED {
            return None;
        }
        let flags = cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE | cudarc::driver::sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        let mut device = 0;
        // SAFETY: the mapping just made; a context is current (the caller's).
        let ok = unsafe {
            (d.mem_host_register)(host, bytes, flags) == CUDA_SUCCESS
                && ((k.mem_host_get_device_pointer)(&mut device, host, 0) == CUDA_SUCCESS || {
                    (d.mem_host_unregister)(host);
                    false
                })
        };
        if !ok {
            // SAFETY: the mapping made above, not registered.
            unsafe { libc::munmap(host, bytes) };
            return None;
        }
        Some(Table { host, device, cap })
    }

    fn give_back(self) {
        TABLES.lock().unwrap_or_else(|e| e.into_inner()).push((self.host as usize, self.device, self.cap));
    }
}

/// Unloads the kernel from every context and unpins the tables (`MPI_Finalize`, after the
/// last copy); a later copy loads and pins them again.
pub fn release() {
    let Some(d) = driver::get() else { return };
    let modules = std::mem::take(&mut *MODULES.lock().unwrap_or_else(|e| e.into_inner()));
    let tables = std::mem::take(&mut *TABLES.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some(k) = d.kernels.as_ref() {
        for (ctx, module, _) in modules {
            let mut popped: CUcontext = std::ptr::null_mut();
            // SAFETY: the context the module was loaded in, pushed for the unload and popped;
            // one the program destroyed refuses the push and its module went with it.
            unsafe {
                if (d.ctx_push_current)(ctx as CUcontext) == CUDA_SUCCESS {
                    (k.module_unload)(module as *mut c_void);
                    (d.ctx_pop_current)(&mut popped);
                }
            }
        }
    }
    for (host, _, cap) in tables {
        // SAFETY: a table this module mapped and pinned, no longer in use after finalize.
        unsafe {
            (d.mem_host_unregister)(host as *mut c_void);
            libc::munmap(host as *mut c_void, cap * std::mem::size_of::<Run>());
        }
    }
}
