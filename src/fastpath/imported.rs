//! The receiver's side: peers' exported buffers mapped into this process, and the releases
//! that hand them back.
//!
//! A mapping is opened once per peer buffer and context and kept until `MPI_Finalize`: the
//! sender keeps the buffer for the same time, so no mapping outlives its memory.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use super::envelope::Envelope;
use super::exported::{RELEASE_TAG, SAME_GPU};
use super::peers;
use crate::cuda::copy::check;
use crate::cuda::driver::{self, CUcontext, CUdeviceptr, IpcMemHandle};
use crate::cuda::{CudaError, Device, InContext};
use crate::mpi::abi::{self, Handle};
use crate::mpi::real;

/// `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`: a peer GPU's buffer is reached over NVLink or PCIe.
pub const LAZY_ENABLE_PEER_ACCESS: u32 = 1;

struct Imported {
    /// (sender, arena, context) -> (mapped address, the GPU of that context).
    mapped: HashMap<(u32, u64, usize), (CUdeviceptr, i32)>,
    /// Releases still being sent, with their payload.
    releases: Vec<(Handle, Box<[u64; 2]>)>,
}

// SAFETY: addresses and handles, used under the mutex.
unsafe impl Send for Imported {}

static IMPORTED: Mutex<Option<Imported>> = Mutex::new(None);

fn imported() -> MutexGuard<'static, Option<Imported>> {
    IMPORTED.lock().unwrap_or_else(|e| e.into_inner())
}


/// The sender's buffer named by `e`, mapped in the context `ctx` enters (which must be
/// current).
pub fn map(e: &Envelope, ctx: &InContext, ordinal: i32) -> Result<CUdeviceptr, CudaError> {
    let key = (e.sender, e.arena, ctx.context() as usize);
    let mut guard = imported();
    let im = guard.get_or_insert_with(|| Imported { mapped: HashMap::new(), releases: Vec::new() });
    if let Some(&(p, _)) = im.mapped.get(&key) {
        return Ok(p);
    }
    let mut p: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; the handle names a live allocation of the sender.
    check("cuIpcOpenMemHandle", unsafe { (ctx.driver().ipc_open_mem_handle)(&mut p, IpcMemHandle(e.handle), LAZY_ENABLE_PEER_ACCESS) })?;
    im.mapped.insert(key, (p, ordinal));
    Ok(p)
}

/// Hands the sender's buffer back, saying whether the copy ran on the sender's GPU.
pub fn release(e: &Envelope, on_senders_gpu: bool) {
    let (Some(p), Some(peers)) = (real::pmpi(), peers::get()) else { return };
    let abi = abi::get();
    // The list leaves the lock while MPI is called: no lock is held across an MPI call.
    let mut releases = match imported().as_mut() {
        Some(im) => std::mem::take(&mut im.releases),
        None => Vec::new(),
    };
    // Drop the releases already sent.
    releases.retain_mut(|(req, _)| {
        let (mut flag, mut status) = (0, abi::Status::zeroed());
        // SAFETY: a send this module posted; its payload is kept alongside.
        unsafe { (p.test)((req as *mut Handle).cast(), &mut flag, status.as_mut_ptr()) == 0 && flag == 0 }
    });
    let payload = Box::new([e.arena, e.offset | if on_senders_gpu { SAME_GPU } else { 0 }]);
    let mut req: Handle = 0;
    // SAFETY: the payload is kept until the send completes; the private communicator.
    if unsafe { (p.isend)(payload.as_ptr().cast(), 16, abi.byte, e.sender as c_int, RELEASE_TAG, peers.shadow, &mut req) } == 0 {
        releases.push((req, payload));
    }
    let mut guard = imported();
    guard.get_or_insert_with(|| Imported { mapped: HashMap::new(), releases: Vec::new() }).releases.extend(releases);
}

/// Waits for a copy [`copy_from`] started into device memory of `dev` without waiting: the
/// work queued so far on the legacy default stream of `dev`'s context.
pub fn wait_copy(dev: &Device, len: usize) -> Result<(), CudaError> {
    let d = driver::load().ok_or(CudaError { call: "cuInit", code: 3 })?;
    let _ctx = InContext::enter(dev)?;
    crate::cuda::signal::wait(d, len)
}

/// Closes every mapping and lets go of the releases still in flight (`MPI_Finalize`).
pub fn release_all() {
    let Some(im) = imported().take() else { return };
    if let Some(p) = real::pmpi() {
        for (mut req, payload) in im.releases {
            // SAFETY: a send this module posted; eager, and its payload is leaked below so it
            // stays valid whatever the library still does with it.
            unsafe { (p.request_free)((&mut req as *mut Handle).cast()) };
            std::mem::forget(payload);
        }
    }
    let Some(d) = driver::get() else { return };
    for ((_, _, ctx), (ptr, ordinal)) in im.mapped {
        if let Ok(_c) = InContext::enter(&Device::new(ctx as CUcontext, ordinal)) {
            // SAFETY: a mapping this module opened in that context.
            unsafe { (d.ipc_close_mem_handle)(ptr) };
        }
    }
}

/// Copies `len` bytes from the sender's buffer to `dst` (device memory of `dev`, or host
/// memory when `dev` is `None`), complete on return.
pub fn copy(e: &Envelope, dst: *mut c_void, dev: Option<Device>, len: usize) -> Result<(), CudaError> {
    copy_from(e, dst, dev, len, true, |ctx, ordinal| Ok(map(e, ctx, ordinal)? + e.offset))
}

/// [`copy`] from the device address `source` gives in the context it is handed (which is
/// current), with the ordinal of its GPU. Without `wait`, a copy to device memory is only
/// started, on the legacy default stream of `dev`'s context.
pub fn copy_from(
    e: &Envelope,
    dst: *mut c_void,
    dev: Option<Device>,
    len: usize,
    wait: bool,
    source: impl FnOnce(&InContext, i32) -> Result<CUdeviceptr, CudaError>,
) -> Result<(), CudaError> {
    let d = driver::load().ok_or(CudaError { call: "cuInit", code: 3 })?;
    let host = dev.is_none();
    let dev = match dev {
        Some(dev) => dev,
        // Host memory: map in a context on the sender's GPU.
        None => Device::primary(peers::local_ordinal(&e.token).ok_or(CudaError { call: "cuDeviceGet", code: 101 })?),
    };
    let ctx = InContext::enter(&dev)?;
    let src = source(&ctx, dev.ordinal)?;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: the sender's buffer holds `len` bytes (e.bytes) at `src`; dst holds `len` bytes.
    unsafe {
        match host {
            // The program's streams do not touch the peer's memory nor, while the receive is
            // pending, this host buffer: cudampi's own stream, which waits for none of them.
            true => ctx.peer_to_host(dev.ordinal, dst, src, len),
            // Waited for as a staged copy is: small ones by polling (`signal`).
            false => {
                check("cuMemcpyDtoDAsync", (d.memcpy_dtod_async)(dst as CUdeviceptr, src, len, std::ptr::null_mut()))?;
                match wait {
                    true => crate::cuda::signal::wait(d, len),
                    false => Ok(()),
                }
            }
        }
    }
}
