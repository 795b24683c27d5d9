//! Where a buffer lives, asked of the driver with one `cuPointerGetAttributes` call.

use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::sys::{CUmemLocationType, CUmemorytype, CUpointer_attribute};

use super::driver::{self, CUcontext, Driver, CUDA_SUCCESS};
use super::{hostmem, mapwatch};

/// A device allocation the shim must stage: copies run in `ctx`, or in the primary context of
/// `ordinal` when the allocation has no context of its own (VMM and stream-ordered pool memory).
#[derive(Clone, Copy, Debug)]
pub struct Device {
    pub ctx: CUcontext,
    pub ordinal: i32,
    /// Managed memory staged on request (`CUDAMPI_MANAGED=stage`): copies only, since the
    /// stream's own memory writes do not take it.
    pub managed: bool,
}

impl Device {
    /// Device memory of `ctx` (null: of the primary context of GPU `ordinal`).
    pub fn new(ctx: CUcontext, ordinal: i32) -> Device {
        Device { ctx, ordinal, managed: false }
    }

    /// The primary context of GPU `ordinal`.
    pub fn primary(ordinal: i32) -> Device {
        Device::new(std::ptr::null_mut(), ordinal)
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Location {
    /// Plain, pinned, registered or managed memory: MPI may read it directly.
    Host,
    Device(Device),
    /// Neither memory the driver knows nor host memory the process can read: device memory
    /// that has been freed (the driver keeps the range reserved, unreadable by the CPU) or no
    /// memory at all. MPI would crash on it.
    Unreadable,
}

/// [`surely_host`] from loads and comparisons alone, with no call: the sentinels, a process
/// known to have no CUDA, the heap and program data. False means only that the full check is
/// needed. A function that makes no call needs no frame, so an entry point whose buffer passes
/// here ends in a jump to the library's function.
#[inline(always)]
pub fn plainly_host(ptr: *const c_void) -> bool {
    let addr = ptr as usize;
    sentinel(addr) || driver::known_absent() || hostmem::plainly_host(addr)
}

/// Decides where `ptr` lives. Host-only processes (no libcuda loaded) return at the first check.
#[inline]
pub fn locate(ptr: *const c_void) -> Location {
    match driver::get() {
        _ if ptr.is_null() || surely_host(ptr) => Location::Host,
        None => Location::Host,
        Some(d) => query(d, ptr),
    }
}

/// True when `ptr` is host memory without asking the driver: sentinels, a process without
/// CUDA, the heap, stack and program data, and pages the driver was already asked about. The
/// entry points test this first, so host buffers cost a few comparisons.
#[inline(always)]
pub fn surely_host(ptr: *const c_void) -> bool {
    let addr = ptr as usize;
    sentinel(addr) || driver::get().is_none() || hostmem::certainly_host(addr) || hostmem::remembered(addr)
}

/// MPI_IN_PLACE (1 or -1) and other sentinels are never device memory. Null is not one: in a
/// process with CUDA it may be MPI_BOTTOM with absolute device addresses in the datatype,
/// located by the caller.
#[inline(always)]
fn sentinel(addr: usize) -> bool {
    (addr != 0 && addr < 4096) || addr == usize::MAX
}

const MEMORY_TYPE: c_uint = CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE as c_uint;
const CONTEXT: c_uint = CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT as c_uint;
const IS_MANAGED: c_uint = CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED as c_uint;
const DEVICE_ORDINAL: c_uint = CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL as c_uint;
const RANGE_START: c_uint = CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR as c_uint;
const RANGE_SIZE: c_uint = CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE as c_uint;
const BUFFER_ID: c_uint = CUpointer_attribute::CU_POINTER_ATTRIBUTE_BUFFER_ID as c_uint;
const IPC_CAPABLE: c_uint = CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE as c_uint;
const TYPE_HOST: u64 = CUmemorytype::CU_MEMORYTYPE_HOST as u64;
const TYPE_DEVICE: u64 = CUmemorytype::CU_MEMORYTYPE_DEVICE as u64;
const TYPE_UNIFIED: u64 = CUmemorytype::CU_MEMORYTYPE_UNIFIED as u64;
const LOCATION_DEVICE: c_uint = CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE as c_uint;

#[inline(never)]
fn query(d: &Driver, ptr: *const c_void) -> Location {
    // Inside a range that held device memory, a device buffer is what the shim usually meets:
    // one query with every attribute. Anything else there, and a query the driver refuses,
    // takes the usual two steps.
    if in_device_range(ptr) {
        if let Some(loc) = query_known(d, ptr) {
            return loc;
        }
    }
    // The memory type alone first: for memory the driver does not know, every extra attribute
    // adds to an already slow lookup.
    let generation = mapwatch::generation();
    let mut mem_type: u64 = 0;
    let mut attr = [MEMORY_TYPE];
    let mut slot: [*mut c_void; 1] = [(&mut mem_type as *mut u64).cast()];
    // SAFETY: one attribute, one valid 8-byte out-slot.
    let rc = unsafe { (d.pointer_get_attributes)(1, attr.as_mut_ptr(), slot.as_mut_ptr(), ptr as u64) };
    if rc != CUDA_SUCCESS || !matches!(mem_type & 0xffff_ffff, TYPE_DEVICE | TYPE_HOST | TYPE_UNIFIED) {
        // INVALID_VALUE / NOT_INITIALIZED, or no type: not memory the driver knows.
        return unknown(ptr, generation);
    }
    query_known(d, ptr).unwrap_or_else(|| unknown(ptr, generation))
}

/// Memory the driver does not know: plain host memory when the process can read it. Freed
/// device memory is unknown to the driver too (it answers as for host memory), but its range
/// stays reserved and unreadable, whether or not the shim saw the allocation; and the driver
/// may hand it out again without a new mapping, so only a readable page is remembered as host
/// memory (`generation` was read before the driver was asked).
fn unknown(ptr: *const c_void, generation: u64) -> Location {
    // Where the kernel will not say (a sandbox refusing the call), the page counts as readable.
    if host_readable(ptr) == Some(false) {
        return Location::Unreadable;
    }
    if mapwatch::watching() {
        hostmem::remember(ptr as usize, generation);
    }
    Location::Host
}

/// Every attribute of memory the driver knows; `None` when it refuses the query or reports no
/// memory type.
fn query_known(d: &Driver, ptr: *const c_void) -> Option<Location> {
    let mut mem_type: u64 = 0;
    // Zero-initialised 8-byte slots: the driver writes 1, 4 or 8 bytes depending on the attribute.
    let mut ctx: CUcontext = std::ptr::null_mut();
    let mut managed: u64 = 0;
    let mut ordinal: u64 = u64::MAX;
    let mut start: u64 = 0;
    let mut size: u64 = 0;
    let mut attrs = [MEMORY_TYPE, CONTEXT, IS_MANAGED, DEVICE_ORDINAL, RANGE_START, RANGE_SIZE];
    let mut data: [*mut c_void; 6] = [
        (&mut mem_type as *mut u64).cast(),
        (&mut ctx as *mut CUcontext).cast(),
        (&mut managed as *mut u64).cast(),
        (&mut ordinal as *mut u64).cast(),
        (&mut start as *mut u64).cast(),
        (&mut size as *mut u64).cast(),
    ];
    // SAFETY: six attributes, six valid 8-byte out-slots.
    if unsafe { (d.pointer_get_attributes)(6, attrs.as_mut_ptr(), data.as_mut_ptr(), ptr as u64) } != CUDA_SUCCESS {
        return None;
    }
    let ordinal = ordinal as u32 as i32;
    if managed & 0xff != 0 {
        // Managed memory is host-accessible; the driver migrates pages on demand.
        return Some(if crate::base::config::get().stage_managed { Location::Device(Device { ctx, ordinal, managed: true }) } else { Location::Host });
    }
    match mem_type & 0xffff_ffff {
        TYPE_DEVICE => {
            remember_device_range(start, size);
            Some(Location::Device(Device::new(ctx, ordinal)))
        }
        // VMM (cuMemCreate) mappings can report HOST with no context; only the VMM calls tell.
        TYPE_HOST => Some(vmm_device(d, ptr).map_or(Location::Host, Location::Device)),
        _ => None,
    }
}

fn vmm_device(d: &Driver, ptr: *const c_void) -> Option<Device> {
    let mut handle = 0;
    // SAFETY: out-pointer valid; fails for anything that is not a VMM mapping.
    if unsafe { (d.retain_allocation_handle)(&mut handle, ptr as *mut c_void) } != CUDA_SUCCESS {
        return None;
    }
    let mut prop = std::mem::MaybeUninit::<driver::AllocProp>::zeroed();
    // SAFETY: valid handle from the call above and a correctly laid out out-struct.
    let rc = unsafe { (d.allocation_properties)(prop.as_mut_ptr(), handle) };
    // SAFETY: releases the reference taken by cuMemRetainAllocationHandle.
    unsafe { (d.mem_release)(handle) };
    // SAFETY: zero-initialised, and fully written on success.
    let prop = unsafe { prop.assume_init() };
    (rc == CUDA_SUCCESS && prop.location_type == LOCATION_DEVICE)
        .then_some(Device::primary(prop.location_id))
}

/// Ranges that recently held device memory: a pointer inside one is most likely device memory,
/// asked about with every attribute at once.
const RANGES: usize = 64;
static RANGE_START_TABLE: [AtomicU64; RANGES] = [const { AtomicU64::new(0) }; RANGES];
static RANGE_END_TABLE: [AtomicU64; RANGES] = [const { AtomicU64::new(0) }; RANGES];
static RANGE_NEXT: AtomicU64 = AtomicU64::new(0);
static RANGE_LO: AtomicU64 = AtomicU64::new(u64::MAX);
static RANGE_HI: AtomicU64 = AtomicU64::new(0);

fn remember_device_range(start: u64, size: u64) {
    if start == 0 || size == 0 {
        return;
    }
    let end = start.saturating_add(size);
    if (0..RANGES).any(|i| RANGE_START_TABLE[i].load(Ordering::Relaxed) == start && RANGE_END_TABLE[i].load(Ordering::Relaxed) == end) {
        return;
    }
    let slot = (RANGE_NEXT.fetch_add(1, Ordering::Relaxed) as usize) % RANGES;
    // A torn pair can only widen or narrow one remembered range; the readability probe below
    // decides anyway, so no lock is needed.
    RANGE_START_TABLE[slot].store(start, Ordering::Relaxed);
    RANGE_END_TABLE[slot].store(end, Ordering::Relaxed);
    RANGE_LO.fetch_min(start, Ordering::Relaxed);
    RANGE_HI.fetch_max(end, Ordering::Relaxed);
}

/// Whether `ptr` lies in one of the ranges that recently held device memory.
fn in_device_range(ptr: *const c_void) -> bool {
    let a = ptr as u64;
    (RANGE_LO.load(Ordering::Relaxed)..RANGE_HI.load(Ordering::Relaxed)).contains(&a)
        && (0..RANGES).any(|i| {
            let s = RANGE_START_TABLE[i].load(Ordering::Relaxed);
            s <= a && a < RANGE_END_TABLE[i].load(Ordering::Relaxed)
        })
}

/// Whether the byte at `ptr` is readable, asked of the kernel without touching it: `None`
/// when the kernel refuses to say.
fn host_readable(ptr: *const c_void) -> Option<bool> {
    let mut byte = 0u8;
    let local = libc::iovec { iov_base: (&mut byte as *mut u8).cast(), iov_len: 1 };
    let remote = libc::iovec { iov_base: ptr as *mut c_void, iov_len: 1 };
    // SAFETY: reads one byte of our own address space into a local; faults come back as EFAULT.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    match n {
        1 => Some(true),
        _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EFAULT) => Some(false),
        _ => None,
    }
}

/// A device allocation `cuIpcGetMemHandle` takes (`cudaMalloc`, `cuMemAlloc`; not pool or VMM
/// memory).
pub struct IpcAllocation {
    /// The driver's id of the allocation, never reused within the process.
    pub id: u64,
    /// Where the allocation starts: the address `cuIpcGetMemHandle` wants.
    pub start: u64,
}

/// The allocation holding device pointer `ptr`, if it can be exported over CUDA IPC as it is.
/// One query, no context needed.
pub fn ipc_allocation(ptr: *const c_void) -> Option<IpcAllocation> {
    let d = driver::get()?;
    // Zero-initialised 8-byte slots: the driver writes 4 or 8 bytes depending on the attribute.
    let (mut id, mut start, mut capable) = (0u64, 0u64, 0u64);
    let mut attrs = [BUFFER_ID, RANGE_START, IPC_CAPABLE];
    let mut data: [*mut c_void; 3] = [(&mut id as *mut u64).cast(), (&mut start as *mut u64).cast(), (&mut capable as *mut u64).cast()];
    // SAFETY: three attributes, three valid 8-byte out-slots.
    if unsafe { (d.pointer_get_attributes)(3, attrs.as_mut_ptr(), data.as_mut_ptr(), ptr as u64) } != CUDA_SUCCESS {
        return None;
    }
    (capable as u32 != 0 && id != 0 && start != 0).then_some(IpcAllocation { id, start })
}
