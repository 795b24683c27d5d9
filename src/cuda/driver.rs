//! The CUDA driver, as the process itself loaded it.
//!
//! cudampi never loads libcuda: a process that holds device pointers has already done so, and a
//! host-only program must not pay for (or be changed by) CUDA. Entry points are looked up in the
//! library the process loaded (`RTLD_NOLOAD`); a missing one means "no CUDA", never a panic.
//! Types and enum values come from cudarc's bindings; return codes are read as plain integers.
//!
//! Checking whether libcuda has appeared must be nearly free, because host-only programs ask on
//! every call. The dynamic loader appends each newly loaded object to the end of its link map
//! list, so the shim remembers the last entry it saw (pinned with a reference so it cannot be
//! unloaded) and only looks again when that entry gains a successor: two loads per call.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock};

pub use cudarc::driver::sys::{CUcontext, CUdevice, CUdeviceptr, CUmemGenericAllocationHandle};
use libloading::os::unix::{Library, Symbol};

pub type CuResult = c_uint;
pub const CUDA_SUCCESS: CuResult = cudarc::driver::sys::cudaError_enum::CUDA_SUCCESS as CuResult;

/// `CUmemAllocationProp`, with its enums read as integers (values from cudarc's bindings).
#[repr(C)]
pub struct AllocProp {
    pub kind: c_uint,
    pub handle_types: c_uint,
    pub location_type: c_uint,
    pub location_id: c_int,
    pub win32_metadata: *mut c_void,
    pub alloc_flags: [u8; 8],
}

/// `CUDA_MEMCPY2D`, with its memory-type enums read as integers.
#[repr(C)]
pub struct Memcpy2D {
    pub src_x_in_bytes: usize,
    pub src_y: usize,
    pub src_memory_type: c_uint,
    pub src_host: *const c_void,
    pub src_device: CUdeviceptr,
    pub src_array: *mut c_void,
    pub src_pitch: usize,
    pub dst_x_in_bytes: usize,
    pub dst_y: usize,
    pub dst_memory_type: c_uint,
    pub dst_host: *mut c_void,
    pub dst_device: CUdeviceptr,
    pub dst_array: *mut c_void,
    pub dst_pitch: usize,
    pub width_in_bytes: usize,
    pub height: usize,
}

/// `CUDA_MEMCPY3D`, with its memory-type enums read as integers.
#[repr(C)]
pub struct Memcpy3D {
    pub src_x_in_bytes: usize,
    pub src_y: usize,
    pub src_z: usize,
    pub src_lod: usize,
    pub src_memory_type: c_uint,
    pub src_host: *const c_void,
    pub src_device: CUdeviceptr,
    pub src_array: *mut c_void,
    pub reserved0: *mut c_void,
    pub src_pitch: usize,
    pub src_height: usize,
    pub dst_x_in_bytes: usize,
    pub dst_y: usize,
    pub dst_z: usize,
    pub dst_lod: usize,
    pub dst_memory_type: c_uint,
    pub dst_host: *mut c_void,
    pub dst_device: CUdeviceptr,
    pub dst_array: *mut c_void,
    pub reserved1: *mut c_void,
    pub dst_pitch: usize,
    pub dst_height: usize,
    pub width_in_bytes: usize,
    pub height: usize,
    pub depth: usize,
}

macro_rules! driver_api {
    ($($field:ident = $sym:literal : fn($($arg:ty),*);)*) => {
        /// Entry points of the loaded libcuda.
        pub struct Driver {
            _lib: Library,
            $(pub $field: unsafe extern "C" fn($($arg),*) -> CuResult,)*
            /// Entry points cudampi can do without.
            pub signals: Option<Signals>,
            pub kernels: Option<Kernels>,
            pub ordered: Option<Ordered>,
        }

        impl Driver {
            fn resolve(lib: Library) -> Result<Driver, &'static str> {
                $(
                    // SAFETY: the symbol's C signature is the declared one (CUDA driver API).
                    let $field = unsafe {
                        let s: Symbol<unsafe extern "C" fn($($arg),*) -> CuResult> =
                            lib.get(concat!($sym, "\0").as_bytes()).map_err(|_| $sym)?;
                        *s
                    };
                )*
                let signals = Signals::resolve(&lib);
                let kernels = Kernels::resolve(&lib);
                let ordered = Ordered::resolve(&lib);
                Ok(Driver { _lib: lib, $($field,)* signals, kernels, ordered })
            }
        }
    };
}

driver_api! {
    init = "cuInit": fn(c_uint);
    get_error_name = "cuGetErrorName": fn(CuResult, *mut *const c_char);
    pointer_get_attributes = "cuPointerGetAttributes": fn(c_uint, *mut c_uint, *mut *mut c_void, CUdeviceptr);
    ctx_get_current = "cuCtxGetCurrent": fn(*mut CUcontext);
    ctx_push_current = "cuCtxPushCurrent_v2": fn(CUcontext);
    ctx_pop_current = "cuCtxPopCurrent_v2": fn(*mut CUcontext);
    device_get = "cuDeviceGet": fn(*mut CUdevice, c_int);
    device_get_count = "cuDeviceGetCount": fn(*mut c_int);
    primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(*mut CUcontext, CUdevice);
    primary_ctx_release = "cuDevicePrimaryCtxRelease_v2": fn(CUdevice);
    memcpy_dtoh = "cuMemcpyDtoH_v2": fn(*mut c_void, CUdeviceptr, usize);
    memcpy_htod = "cuMemcpyHtoD_v2": fn(CUdeviceptr, *const c_void, usize);
    memcpy_htod_async = "cuMemcpyHtoDAsync_v2": fn(CUdeviceptr, *const c_void, usize, *mut c_void);
    memcpy_dtoh_async = "cuMemcpyDtoHAsync_v2": fn(*mut c_void, CUdeviceptr, usize, *mut c_void);
    memset_d8_async = "cuMemsetD8Async": fn(CUdeviceptr, u8, usize, *mut c_void);
    memset_d16_async = "cuMemsetD16Async": fn(CUdeviceptr, u16, usize, *mut c_void);
    event_create = "cuEventCreate": fn(*mut *mut c_void, c_uint);
    event_record = "cuEventRecord": fn(*mut c_void, *mut c_void);
    event_query = "cuEventQuery": fn(*mut c_void);
    event_destroy = "cuEventDestroy_v2": fn(*mut c_void);
    memcpy_2d_async = "cuMemcpy2DAsync_v2": fn(*const Memcpy2D, *mut c_void);
    memcpy_3d_async = "cuMemcpy3DAsync_v2": fn(*const Memcpy3D, *mut c_void);
    mem_host_register = "cuMemHostRegister_v2": fn(*mut c_void, usize, c_uint);
    mem_host_unregister = "cuMemHostUnregister": fn(*mut c_void);
    stream_synchronize = "cuStreamSynchronize": fn(*mut c_void);
    stream_create = "cuStreamCreate": fn(*mut *mut c_void, c_uint);
    stream_destroy = "cuStreamDestroy_v2": fn(*mut c_void);
    stream_wait_event = "cuStreamWaitEvent": fn(*mut c_void, *mut c_void, c_uint);
    retain_allocation_handle = "cuMemRetainAllocationHandle": fn(*mut CUmemGenericAllocationHandle, *mut c_void);
    allocation_properties = "cuMemGetAllocationPropertiesFromHandle": fn(*mut AllocProp, CUmemGenericAllocationHandle);
    mem_release = "cuMemRelease": fn(CUmemGenericAllocationHandle);
    mem_alloc = "cuMemAlloc_v2": fn(*mut CUdeviceptr, usize);
    mem_free = "cuMemFree_v2": fn(CUdeviceptr);
    memcpy_dtod = "cuMemcpyDtoD_v2": fn(CUdeviceptr, CUdeviceptr, usize);
    memcpy_dtod_async = "cuMemcpyDtoDAsync_v2": fn(CUdeviceptr, CUdeviceptr, usize, *mut c_void);
    ipc_get_mem_handle = "cuIpcGetMemHandle": fn(*mut IpcMemHandle, CUdeviceptr);
    ipc_open_mem_handle = "cuIpcOpenMemHandle_v2": fn(*mut CUdeviceptr, IpcMemHandle, c_uint);
    ipc_close_mem_handle = "cuIpcCloseMemHandle": fn(CUdeviceptr);
    mem_get_address_range = "cuMemGetAddressRange_v2": fn(*mut CUdeviceptr, *mut usize, CUdeviceptr);
}

/// One write of `cuStreamBatchMemOp` (`CUstreamBatchMemOpParams`, its `writeValue` member),
/// with the operation read as an integer.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct MemOp {
    pub operation: c_uint,
    pub address: CUdeviceptr,
    /// `value` (32-bit writes use the low half) or `value64`.
    pub value: u64,
    pub flags: c_uint,
    pub alias: CUdeviceptr,
    _pad: u64,
}

impl MemOp {
    /// A write with the default flags (fenced after the work before it).
    pub fn write(operation: c_uint, address: CUdeviceptr, value: u64) -> MemOp {
        MemOp { operation, address, value, ..MemOp::default() }
    }
}

const _: () = assert!(std::mem::size_of::<MemOp>() == std::mem::size_of::<cudarc::driver::sys::CUstreamBatchMemOpParams>());

/// What waiting for a copy by watching host memory takes (`cuda::signal`).
pub struct Signals {
    pub stream_write_value32: unsafe extern "C" fn(*mut c_void, CUdeviceptr, u32, c_uint) -> CuResult,
    pub stream_query: unsafe extern "C" fn(*mut c_void) -> CuResult,
    pub mem_host_get_device_pointer: unsafe extern "C" fn(*mut CUdeviceptr, *mut c_void, c_uint) -> CuResult,
    /// `cuStreamBatchMemOp_v2`, for small copies to the device written by the stream itself.
    pub stream_batch_mem_op: Option<unsafe extern "C" fn(*mut c_void, c_uint, *mut MemOp, c_uint) -> CuResult>,
}

impl Signals {
    fn resolve(lib: &Library) -> Option<Signals> {
        // SAFETY: each symbol's C signature is the declared one (CUDA driver API); the `_v2`
        // stream write is the one whose flags mean what `cuda::signal` passes.
        unsafe {
            let write: Symbol<unsafe extern "C" fn(*mut c_void, CUdeviceptr, u32, c_uint) -> CuResult> = lib.get(b"cuStreamWriteValue32_v2\0").ok()?;
            let query: Symbol<unsafe extern "C" fn(*mut c_void) -> CuResult> = lib.get(b"cuStreamQuery\0").ok()?;
            let mapped: Symbol<unsafe extern "C" fn(*mut CUdeviceptr, *mut c_void, c_uint) -> CuResult> = lib.get(b"cuMemHostGetDevicePointer_v2\0").ok()?;
            let batch: Option<Symbol<unsafe extern "C" fn(*mut c_void, c_uint, *mut MemOp, c_uint) -> CuResult>> = lib.get(b"cuStreamBatchMemOp_v2\0").ok();
            Some(Signals { stream_write_value32: *write, stream_query: *query, mem_host_get_device_pointer: *mapped, stream_batch_mem_op: batch.map(|b| *b) })
        }
    }
}

/// What running cudampi's own kernel takes (`cuda::pack`).
pub struct Kernels {
    pub module_load_data: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CuResult,
    pub module_get_function: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> CuResult,
    pub module_unload: unsafe extern "C" fn(*mut c_void) -> CuResult,
    #[allow(clippy::type_complexity)]
    pub launch_kernel:
        unsafe extern "C" fn(*mut c_void, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, *mut c_void, *mut *mut c_void, *mut *mut c_void) -> CuResult,
}

impl Kernels {
    fn resolve(lib: &Library) -> Option<Kernels> {
        // SAFETY: each symbol's C signature is the declared one (CUDA driver API).
        unsafe {
            Some(Kernels {
                module_load_data: *lib.get(b"cuModuleLoadData\0").ok()?,
                module_get_function: *lib.get(b"cuModuleGetFunction\0").ok()?,
                module_unload: *lib.get(b"cuModuleUnload\0").ok()?,
                launch_kernel: *lib.get(b"cuLaunchKernel\0").ok()?,
            })
        }
    }
}

/// What the stream-ordered calls take (`cuda::ordered`): streams that write and wait for words
/// of memory.
pub struct Ordered {
    pub stream_wait_value32: unsafe extern "C" fn(*mut c_void, CUdeviceptr, u32, c_uint) -> CuResult,
    pub stream_write_value32: unsafe extern "C" fn(*mut c_void, CUdeviceptr, u32, c_uint) -> CuResult,
    pub stream_get_ctx: unsafe extern "C" fn(*mut c_void, *mut CUcontext) -> CuResult,
    pub ctx_get_device: unsafe extern "C" fn(*mut CUdevice) -> CuResult,
    pub mem_host_get_device_pointer: unsafe extern "C" fn(*mut CUdeviceptr, *mut c_void, c_uint) -> CuResult,
    pub mem_alloc_async: unsafe extern "C" fn(*mut CUdeviceptr, usize, *mut c_void) -> CuResult,
    pub mem_free_async: unsafe extern "C" fn(CUdeviceptr, *mut c_void) -> CuResult,
}

impl Ordered {
    fn resolve(lib: &Library) -> Option<Ordered> {
        // SAFETY: each symbol's C signature is the declared one (CUDA driver API); the `_v2`
        // stream memory operations are those whose flags mean what `cuda::ordered` passes.
        unsafe {
            Some(Ordered {
                stream_wait_value32: *lib.get(b"cuStreamWaitValue32_v2\0").ok()?,
                stream_write_value32: *lib.get(b"cuStreamWriteValue32_v2\0").ok()?,
                stream_get_ctx: *lib.get(b"cuStreamGetCtx\0").ok()?,
                ctx_get_device: *lib.get(b"cuCtxGetDevice\0").ok()?,
                mem_host_get_device_pointer: *lib.get(b"cuMemHostGetDevicePointer_v2\0").ok()?,
                mem_alloc_async: *lib.get(b"cuMemAllocAsync\0").ok()?,
                mem_free_async: *lib.get(b"cuMemFreeAsync\0").ok()?,
            })
        }
    }
}

/// `CUipcMemHandle`: 64 opaque bytes, passed to `cuIpcOpenMemHandle` by value.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IpcMemHandle(pub [u8; 64]);

impl Driver {
    /// `CUDA_ERROR_...` name of a result code, for messages.
    pub fn error_name(&self, code: CuResult) -> &'static str {
        let mut name: *const c_char = ptr::null();
        // SAFETY: out-pointer valid; the driver returns a static string.
        if unsafe { (self.get_error_name)(code, &mut name) } != CUDA_SUCCESS || name.is_null() {
            return "unknown CUDA error";
        }
        // SAFETY: NUL-terminated static string owned by the driver.
        unsafe { CStr::from_ptr(name) }.to_str().unwrap_or("unknown CUDA error")
    }
}

static DRIVER: OnceLock<Driver> = OnceLock::new();
/// Last link-map entry seen while libcuda was absent; null until the first probe.
static LAST_SEEN: AtomicPtr<LinkMap> = AtomicPtr::new(ptr::null_mut());
/// Serialises probes; only taken while CUDA is not (yet) usable and the link map has changed.
static PROBE: Mutex<Option<Library>> = Mutex::new(None);

/// The glibc `struct link_map` prefix (stable public ABI, `<link.h>`).
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const c_char,
    l_ld: *mut c_void,
    l_next: *mut LinkMap,
    l_prev: *mut LinkMap,
}

/// Whether this node has one GPU (and no `CUDA_VISIBLE_DEVICES` hides others), which every rank
/// of the job on it then shares. Asked only once the driver is initialised (a caller found
/// device memory); `false` until then.
pub fn one_gpu() -> bool {
    static ONE: OnceLock<bool> = OnceLock::new();
    if let Some(&one) = ONE.get() {
        return one;
    }
    let Some(d) = get() else { return false };
    *ONE.get_or_init(|| {
        if std::env::var_os("CUDA_VISIBLE_DEVICES").is_some() {
            return false;
        }
        let mut n = 0;
        // SAFETY: a valid out-pointer; the driver is initialised.
        unsafe { (d.device_get_count)(&mut n) == 0 && n == 1 }
    })
}

/// The driver if the process has loaded a working libcuda; `None` means every buffer is host
/// memory. Cheap enough to call on every MPI call.
#[inline]
pub fn get() -> Option<&'static Driver> {
    if let Some(d) = DRIVER.get() {
        return Some(d);
    }
    if nothing_loaded_since_probe() {
        return None;
    }
    probe()
}

/// True when the process is known to have no CUDA: [`get`] without the probe, for checks that
/// make no call (a probe may be due, and then this says false).
#[inline(always)]
pub fn known_absent() -> bool {
    DRIVER.get().is_none() && nothing_loaded_since_probe()
}

/// No library was loaded after the last probe found no working libcuda.
#[inline(always)]
fn nothing_loaded_since_probe() -> bool {
    let last = LAST_SEEN.load(Ordering::Acquire);
    // SAFETY: `last` is pinned by a dlopen reference held in PROBE, so it stays mapped; the
    // loader updates l_next under its own lock and a stale read only delays us one call.
    !last.is_null() && unsafe { ptr::read_volatile(ptr::addr_of!((*last).l_next)) }.is_null()
}

/// The driver, loading libcuda if the process has not: only for a process that is about to
/// receive device memory from a peer, which needs CUDA whatever its own buffers are.
pub fn load() -> Option<&'static Driver> {
    if let Some(d) = get() {
        return Some(d);
    }
    // SAFETY: loading libcuda runs no code of ours; it stays loaded for the process's life.
    let lib = unsafe { Library::open(Some("libcuda.so.1"), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.ok()?;
    std::mem::forget(lib);
    probe()
}

#[cold]
fn probe() -> Option<&'static Driver> {
    if crate::base::config::get().disabled {
        return None;
    }
    let mut pin = PROBE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = DRIVER.get() {
        return Some(d);
    }
    // SAFETY: RTLD_NOLOAD only returns a library that is already loaded; nothing new runs.
    if let Ok(lib) = unsafe { Library::open(Some("libcuda.so.1"), libc::RTLD_NOW | libc::RTLD_NOLOAD) } {
        match Driver::resolve(lib) {
            // SAFETY: cuInit(0) is idempotent; any failure (e.g. the toolkit's stub) means no CUDA.
            Ok(d) if unsafe { (d.init)(0) } == CUDA_SUCCESS => {
                let d = DRIVER.get_or_init(|| d);
                // The pinned tail is no longer needed once CUDA is found.
                *pin = None;
                // SAFETY: RTLD_NOLOAD returns the library just found, or null; closed again below.
                unsafe {
                    let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
                    if !h.is_null() {
                        super::mapwatch::watch(h);
                        libc::dlclose(h);
                    }
                }
                return Some(d);
            }
            Ok(_) => crate::base::log::warn(format_args!("libcuda is loaded but cuInit failed; treating every buffer as host memory")),
            Err(sym) => crate::base::log::warn(format_args!("libcuda lacks {sym}; treating every buffer as host memory")),
        }
    }
    remember_tail(&mut pin);
    None
}

/// Finds the current end of the link map and keeps it loaded, so `get` can watch its `l_next`.
fn remember_tail(pin: &mut Option<Library>) {
    let mut map: *mut LinkMap = ptr::null_mut();
    // SAFETY: dlopen(NULL) names the main program; RTLD_DI_LINKMAP fills a link_map pointer.
    unsafe {
        let main = libc::dlopen(ptr::null(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if main.is_null() || libc::dlinfo(main, libc::RTLD_DI_LINKMAP, ptr::addr_of_mut!(map).cast()) != 0 {
            return;
        }
        while !(*map).l_next.is_null() {
            map = (*map).l_next;
        }
        let name = (*map).l_name;
        let held = if name.is_null() || *name == 0 {
            None // the main program: never unloaded
        } else {
            match Library::open(Some(CStr::from_ptr(name).to_string_lossy().as_ref()), libc::RTLD_NOW | libc::RTLD_NOLOAD) {
                Ok(lib) => Some(lib),
                Err(_) => {
                    // Cannot keep it alive: do not watch it, probe again next time.
                    LAST_SEEN.store(ptr::null_mut(), Ordering::Release);
                    return;
                }
            }
        };
        // Publish the new tail before letting go of the old one, so a reader never follows an
        // entry that has just been unloaded.
        LAST_SEEN.store(map, Ordering::Release);
        drop(std::mem::replace(pin, held));
    }
}
