//! The sender's side: device buffers of cudampi's own that peers map over IPC.
//!
//! A device message taking the fast path is copied into one of these on its own GPU, and the
//! send returns at once: the program may reuse its buffer, and no rank ever waits for another
//! to take the data (a receiver may be anywhere, in `MPI_Barrier` say). The receiver copies
//! the data out when its receive completes and sends the buffer back with a release on the
//! private communicator; the sender collects releases whenever it looks for a free buffer.
//!
//! Only cudampi's buffers are ever exported, never the program's, so no mapping outlives the
//! memory it maps. They are kept and reused, within `CUDAMPI_IPC_POOL_BYTES`, until
//! `MPI_Finalize`; beyond that bound a message is staged through host memory as usual.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use super::envelope::{self, Envelope};
use super::peers;
use crate::abi::{self, Handle};
use crate::cuda::driver::{self, CUdeviceptr, IpcMemHandle};
use crate::cuda::copy::check;
use crate::cuda::{CudaError, Device, InContext};
use crate::{config, real};

/// Tag of releases on the private communicator.
pub const RELEASE_TAG: c_int = 1;

/// Smallest exported buffer: smaller messages share its size class.
const MIN_SLOT: usize = 1 << 20;

struct Slot {
    id: u64,
    ordinal: i32,
    ptr: CUdeviceptr,
    bytes: usize,
    handle: IpcMemHandle,
    busy: bool,
    /// The envelope naming this buffer: it must outlive the send that carries it, and the
    /// buffer stays busy until the receiver has read the envelope.
    envelope: Box<[u8; envelope::BYTES]>,
}

struct Exported {
    slots: Vec<Slot>,
    total: usize,
    next_id: u64,
    /// The posted receive for releases, and where it lands.
    release: Option<Handle>,
    /// In the static, so its address stays put while the receive is posted.
    release_buf: [u64; 2],
}

// SAFETY: device addresses and MPI handles, used under the mutex.
unsafe impl Send for Exported {}

static EXPORTED: Mutex<Exported> =
    Mutex::new(Exported { slots: Vec::new(), total: 0, next_id: 1, release: None, release_buf: [0; 2] });

fn exported() -> MutexGuard<'static, Exported> {
    EXPORTED.lock().unwrap_or_else(|e| e.into_inner())
}

impl Exported {
    /// Marks released every buffer whose release has arrived, and keeps a receive posted.
    fn collect_releases(&mut self) {
        let (Some(p), Some(peers)) = (real::pmpi(), peers::get()) else { return };
        let abi = abi::get();
        loop {
            if let Some(mut req) = self.release {
                let (mut flag, mut status) = (0, abi::Status::zeroed());
                // SAFETY: the receive this module posted; release_buf stays allocated.
                if unsafe { (p.test)((&mut req as *mut Handle).cast(), &mut flag, status.as_mut_ptr()) } != 0 || flag == 0 {
                    return;
                }
                let id = self.release_buf[0];
                if let Some(s) = self.slots.iter_mut().find(|s| s.id == id) {
                    s.busy = false;
                }
                self.release = None;
            }
            let mut req: Handle = 0;
            // SAFETY: a 16-byte buffer that lives in the static; the private communicator.
            let rc = unsafe {
                (p.irecv)(self.release_buf.as_mut_ptr().cast(), 16, abi.byte, abi.any_source, RELEASE_TAG, peers.shadow, &mut req)
            };
            if rc != 0 {
                return;
            }
            self.release = Some(req);
        }
    }
}

/// A buffer holding a copy of the message, ready to be named in an envelope.
pub struct Outgoing {
    pub envelope: *const c_void,
}

/// Copies `bytes` of device memory at `src` into a free exported buffer on its GPU and writes
/// the envelope naming it. `None`: no buffer within the bound, or a CUDA failure, and the
/// message takes the staged path instead.
pub fn offer(dev: &Device, src: *const c_void, bytes: usize, sender: c_int, token: [u8; envelope::TOKEN_BYTES]) -> Option<Result<Outgoing, CudaError>> {
    let d = driver::get()?;
    let mut ex = exported();
    ex.collect_releases();
    let fit = ex
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.busy && s.ordinal == dev.ordinal && s.bytes >= bytes)
        .min_by_key(|(_, s)| s.bytes)
        .map(|(i, _)| i);
    let i = match fit {
        Some(i) => i,
        None => {
            let size = bytes.next_power_of_two().max(MIN_SLOT);
            if ex.total + size > config::get().ipc_pool_bytes {
                return None;
            }
            let slot = match allocate(d, dev.ordinal, size) {
                Ok(s) => s,
                Err(_) => return None,
            };
            ex.total += size;
            let id = ex.next_id;
            ex.slots.push(Slot { id, ..slot });
            ex.next_id += 1;
            ex.slots.len() - 1
        }
    };
    let slot = &mut ex.slots[i];
    let copied = (|| {
        let ctx = InContext::enter(dev)?;
        // SAFETY: both ranges hold `bytes` bytes of device memory (the caller's span, the slot).
        check("cuMemcpyDtoD", unsafe { (d.memcpy_dtod)(slot.ptr, src as CUdeviceptr, bytes) })?;
        // A device-to-device copy returns before it is done; the program may reuse its buffer
        // as soon as the send returns, and the receiver reads the slot at any time.
        // SAFETY: the legacy default stream of the current context.
        check("cuStreamSynchronize", unsafe { (d.stream_synchronize)(std::ptr::null_mut()) })?;
        drop(ctx);
        Ok(())
    })();
    if let Err(e) = copied {
        return Some(Err(e));
    }
    slot.busy = true;
    Envelope::new(sender as u32, bytes as u64, slot.id, slot.bytes as u64, slot.handle.0, token).write(&mut slot.envelope);
    Some(Ok(Outgoing { envelope: slot.envelope.as_ptr().cast() }))
}


fn allocate(d: &driver::Driver, ordinal: i32, bytes: usize) -> Result<Slot, CudaError> {
    let _ctx = InContext::enter(&Device { ctx: std::ptr::null_mut(), ordinal })?;
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer, in the GPU's primary context.
    check("cuMemAlloc", unsafe { (d.mem_alloc)(&mut ptr, bytes) })?;
    let mut handle = IpcMemHandle([0; 64]);
    // SAFETY: an allocation of this context.
    if let Err(e) = check("cuIpcGetMemHandle", unsafe { (d.ipc_get_mem_handle)(&mut handle, ptr) }) {
        // SAFETY: just allocated, never shared.
        unsafe { (d.mem_free)(ptr) };
        return Err(e);
    }
    Ok(Slot { id: 0, ordinal, ptr, bytes, handle, busy: false, envelope: Box::new([0; envelope::BYTES]) })
}

/// Exported bytes held, and how many buffers are out with receivers.
pub fn usage() -> (usize, usize) {
    let ex = exported();
    (ex.total, ex.slots.iter().filter(|s| s.busy).count())
}

/// Cancels the release receive and frees every exported buffer (`MPI_Finalize`, after every
/// rank has reached it, so no receiver still reads one).
pub fn release_all() {
    let mut ex = exported();
    if let (Some(mut req), Some(p)) = (ex.release.take(), real::pmpi()) {
        let mut status = abi::Status::zeroed();
        // SAFETY: the receive this module posted; cancelled, then completed.
        unsafe {
            (p.cancel)((&mut req as *mut Handle).cast());
            (p.wait)((&mut req as *mut Handle).cast(), status.as_mut_ptr());
        }
    }
    let slots = std::mem::take(&mut ex.slots);
    ex.total = 0;
    let Some(d) = driver::get() else { return };
    for s in slots {
        if let Ok(_ctx) = InContext::enter(&Device { ctx: std::ptr::null_mut(), ordinal: s.ordinal }) {
            // SAFETY: an allocation of this module, no longer named in any pending envelope.
            unsafe { (d.mem_free)(s.ptr) };
        }
    }
}
