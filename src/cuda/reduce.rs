//! cudampi's reduction kernels: `inout[i] = input[i] op inout[i]` over device memory, for the
//! accumulates on windows whose memory every member maps (`handlers::mapped`), so that an
//! accumulate moves its bytes once over the GPUs' link instead of through host memory.
//!
//! One PTX module holds a kernel per operation and element type (`cudampi_reduce_<op>_<type>`,
//! a grid-stride loop, one element a thread), loaded once per context and unloaded in
//! `MPI_Finalize`. What has no kernel here (other types, other operations), or a driver that
//! refuses the PTX, is for the caller to do otherwise: [`combine`] answers `Ok(false)`. It may
//! use `base` and the other `cuda` modules.

use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::copy::{check, CudaError, InContext};
use super::driver::{CUcontext, CUdeviceptr, Driver, Kernels, CUDA_SUCCESS};
use crate::base::log;

/// The element types with kernels: (PTX type, bytes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Element {
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    Sum,
    Prod,
    Min,
    Max,
}

const ELEMENTS: [Element; 6] = [Element::I32, Element::U32, Element::I64, Element::U64, Element::F32, Element::F64];
const OPS: [Op; 4] = [Op::Sum, Op::Prod, Op::Min, Op::Max];

impl Element {
    fn ptx(self) -> &'static str {
        match self {
            Element::I32 => "s32",
            Element::U32 => "u32",
            Element::I64 => "s64",
            Element::U64 => "u64",
            Element::F32 => "f32",
            Element::F64 => "f64",
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            Element::I32 | Element::U32 | Element::F32 => 4,
            _ => 8,
        }
    }
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Prod => "prod",
            Op::Min => "min",
            Op::Max => "max",
        }
    }

    /// The PTX instruction for `e`.
    fn instruction(self, e: Element) -> String {
        let t = e.ptx();
        let float = matches!(e, Element::F32 | Element::F64);
        match self {
            Op::Sum => format!("add.{t}"),
            Op::Prod if float => format!("mul.{t}"),
            Op::Prod => format!("mul.lo.{t}"),
            Op::Min => format!("min.{t}"),
            Op::Max => format!("max.{t}"),
        }
    }
}

fn entry(op: Op, e: Element) -> String {
    format!("cudampi_reduce_{}_{}", op.name(), e.ptx())
}

/// One kernel's PTX: parameters `inout`, `input` (device addresses) and `n` (elements).
fn kernel(op: Op, e: Element) -> String {
    let (t, shift) = (e.ptx(), e.bytes().trailing_zeros());
    format!(
        r#"
.visible .entry {name}(
	.param .u64 p_inout,
	.param .u64 p_in,
	.param .u64 p_n
)
{{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<10>;
	.reg .{t} 	%v<4>;

	ld.param.u64 	%rd1, [p_inout];
	ld.param.u64 	%rd2, [p_in];
	ld.param.u64 	%rd3, [p_n];
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mov.u32 	%r4, %nctaid.x;
	mad.lo.u32 	%r5, %r1, %r2, %r3;
	mul.lo.u32 	%r6, %r4, %r2;
	cvt.u64.u32 	%rd4, %r5;
	cvt.u64.u32 	%rd5, %r6;
LOOP:
	setp.ge.u64 	%p1, %rd4, %rd3;
	@%p1 bra 	DONE;
	shl.b64 	%rd6, %rd4, {shift};
	add.s64 	%rd7, %rd1, %rd6;
	add.s64 	%rd8, %rd2, %rd6;
	ld.global.{t} 	%v1, [%rd7];
	ld.global.{t} 	%v2, [%rd8];
	{ins} 	%v3, %v2, %v1;
	st.global.{t} 	[%rd7], %v3;
	add.s64 	%rd4, %rd4, %rd5;
	bra 	LOOP;
DONE:
	ret;
}}
"#,
        name = entry(op, e),
        ins = op.instruction(e),
    )
}

/// The module's PTX for `target`.
fn module(target: &str) -> String {
    let mut s = format!(".version 6.4\n.target {target}\n.address_size 64\n");
    for op in OPS {
        for e in ELEMENTS {
            s.push_str(&kernel(op, e));
        }
    }
    s.push('\0');
    s
}

const TARGETS: [&str; 2] = ["sm_75", "sm_52"];
const THREADS: u32 = 256;
/// Most thread blocks a launch asks for; the threads loop over the elements beyond.
const MAX_GRID: u64 = 8192;

/// Per context: (context, module, the functions in `OPS` x `ELEMENTS` order).
type Loaded = (usize, usize, Vec<usize>);
static MODULES: Mutex<Vec<Loaded>> = Mutex::new(Vec::new());
/// Set once a driver refused the PTX: the kernels are not tried again.
static REFUSED: AtomicBool = AtomicBool::new(false);

/// The kernel for `op` on `e` in the current context, loaded on first use.
fn function(d: &Driver, k: &Kernels, op: Op, e: Element) -> Option<*mut c_void> {
    if REFUSED.load(Ordering::Relaxed) {
        return None;
    }
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: an out-pointer.
    if unsafe { (d.ctx_get_current)(&mut ctx) } != CUDA_SUCCESS || ctx.is_null() {
        return None;
    }
    let index = OPS.iter().position(|&o| o == op)? * ELEMENTS.len() + ELEMENTS.iter().position(|&x| x == e)?;
    let mut modules = MODULES.lock().unwrap_or_else(|err| err.into_inner());
    if let Some((_, _, fs)) = modules.iter().find(|m| m.0 == ctx as usize) {
        return Some(fs[index] as *mut c_void);
    }
    let mut last = CUDA_SUCCESS;
    for target in TARGETS {
        let image = module(target);
        let mut m = std::ptr::null_mut();
        // SAFETY: a NUL-terminated PTX image; an out-pointer.
        last = unsafe { (k.module_load_data)(&mut m, image.as_ptr().cast()) };
        if last != CUDA_SUCCESS {
            continue;
        }
        let mut fs = Vec::with_capacity(OPS.len() * ELEMENTS.len());
        for o in OPS {
            for x in ELEMENTS {
                let name = format!("{}\0", entry(o, x));
                let mut f = std::ptr::null_mut();
                // SAFETY: the module just loaded; a NUL-terminated name.
                last = unsafe { (k.module_get_function)(&mut f, m, name.as_ptr().cast()) };
                if last != CUDA_SUCCESS {
                    break;
                }
                fs.push(f as usize);
            }
            if last != CUDA_SUCCESS {
                break;
            }
        }
        if last == CUDA_SUCCESS {
            let f = fs[index] as *mut c_void;
            modules.push((ctx as usize, m as usize, fs));
            return Some(f);
        }
        // SAFETY: the module just loaded, of no use.
        unsafe { (k.module_unload)(m) };
    }
    if !REFUSED.swap(true, Ordering::Relaxed) {
        log::warn(format_args!(
            "the GPU driver refused cudampi's reduction kernels ({}); accumulates on device windows combine in host memory, which is slower",
            d.error_name(last)
        ));
    }
    None
}

/// Queues `inout[i] = input[i] op inout[i]` for `n` elements of `e` on `stream` of the context
/// `ctx` made current; both addresses must be reachable from it. `Ok(false)`: no kernel here,
/// nothing queued.
pub fn combine(ctx: &InContext, stream: *mut c_void, inout: CUdeviceptr, input: CUdeviceptr, n: usize, e: Element, op: Op) -> Result<bool, CudaError> {
    let d = ctx.driver();
    let Some(k) = d.kernels.as_ref() else { return Ok(false) };
    let Some(f) = function(d, k, op, e) else { return Ok(false) };
    if n == 0 {
        return Ok(true);
    }
    let (mut p_inout, mut p_in, mut p_n) = (inout, input, n as u64);
    let mut params: [*mut c_void; 3] = [(&mut p_inout as *mut u64).cast(), (&mut p_in as *mut u64).cast(), (&mut p_n as *mut u64).cast()];
    let grid = (n as u64).div_ceil(u64::from(THREADS)).min(MAX_GRID) as c_uint;
    // SAFETY: the function's three parameters; both ranges hold `n` elements (the caller's).
    check("cuLaunchKernel", unsafe { (k.launch_kernel)(f, grid, 1, 1, THREADS, 1, 1, 0, stream, params.as_mut_ptr(), std::ptr::null_mut()) })?;
    Ok(true)
}

/// Unloads the kernels in every context (`MPI_Finalize`, after the last accumulate).
pub fn release() {
    let Some(d) = super::driver::get() else { return };
    let Some(k) = d.kernels.as_ref() else { return };
    let modules = std::mem::take(&mut *MODULES.lock().unwrap_or_else(|e| e.into_inner()));
    for (ctx, m, _) in modules {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: a context cudampi saw current; balanced push and pop; the module loaded there.
        unsafe {
            if (d.ctx_push_current)(ctx as CUcontext) == CUDA_SUCCESS {
                (k.module_unload)(m as *mut c_void);
                (d.ctx_pop_current)(&mut popped);
            }
        }
    }
}
