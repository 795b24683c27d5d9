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

use super::copy::{check, CudaError, InContext};
use super::driver::CUdeviceptr;
use super::modules::Module;

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

const THREADS: u32 = 256;
/// Most thread blocks a launch asks for; the threads loop over the elements beyond.
const MAX_GRID: u64 = 8192;

/// The entry points, in `OPS` x `ELEMENTS` order.
fn entries() -> Vec<String> {
    OPS.iter().flat_map(|&o| ELEMENTS.iter().map(move |&x| format!("{}\0", entry(o, x)))).collect()
}

static KERNELS: Module = Module::new(module, entries, "reduction kernels; accumulates on device windows combine in host memory, which is slower");

/// Queues `inout[i] = input[i] op inout[i]` for `n` elements of `e` on `stream` of the context
/// `ctx` made current; both addresses must be reachable from it. `Ok(false)`: no kernel here,
/// nothing queued.
pub fn combine(ctx: &InContext, stream: *mut c_void, inout: CUdeviceptr, input: CUdeviceptr, n: usize, e: Element, op: Op) -> Result<bool, CudaError> {
    let d = ctx.driver();
    let Some(k) = d.kernels.as_ref() else { return Ok(false) };
    let index = OPS.iter().position(|&o| o == op).zip(ELEMENTS.iter().position(|&x| x == e)).map(|(o, x)| o * ELEMENTS.len() + x);
    let Some((_, f)) = index.and_then(|i| KERNELS.function(d, k, i)) else { return Ok(false) };
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
    if let Some((d, k)) = super::driver::get().and_then(|d| Some((d, d.kernels.as_ref()?))) {
        KERNELS.release(d, k);
    }
}
