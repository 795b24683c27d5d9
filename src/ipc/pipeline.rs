//! Large device messages in chunks (`CUDAMPI_PIPELINE=1`), so that the copy out of the
//! sender's GPU, the transfer and the copy into the receiver's GPU overlap instead of following
//! one another.
//!
//! The sender sends the envelope first, on the program's communicator and tag, then copies the
//! message to host memory a chunk at a time and sends each chunk as soon as it is there, on the
//! private communicator with a tag of the message's own. The receive that matches the envelope
//! posts a receive for every chunk and starts each chunk's copy to the device as it arrives.
//! The send returns once every chunk is posted: it never waits for the receiver, which may be
//! elsewhere (in `MPI_Barrier`, say) until it completes its receive. The chunks' staging buffer
//! is released when their sends complete, seen at later sends and at `MPI_Finalize`.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use super::envelope::{self, Envelope};
use super::peers;
use crate::abi::{self, Handle};
use crate::cuda::copy::check;
use crate::cuda::{CudaError, Device, InContext};
use crate::staging::{self, Lease};
use crate::{config, real, stats};

/// Chunk tags on the private communicator: 1 is the IPC releases', and wrapping below MPI's
/// smallest allowed tag bound keeps every tag valid.
const FIRST_TAG: u64 = 2;
const TAGS: u64 = 32000;

struct Sending {
    requests: Vec<Handle>,
    /// Holds the chunks until their sends complete.
    _lease: Lease,
}

struct State {
    sending: Vec<Sending>,
    next_tag: u64,
}

// SAFETY: request handles and staging buffers, used under the mutex.
unsafe impl Send for State {}

static STATE: Mutex<State> = Mutex::new(State { sending: Vec::new(), next_tag: 0 });

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drops the sends that have completed.
fn collect(s: &mut State) {
    let Some(p) = real::pmpi() else { return };
    s.sending.retain_mut(|out| {
        out.requests.retain_mut(|req| {
            let (mut flag, mut status) = (0, abi::Status::zeroed());
            // SAFETY: a send this module posted; its buffer is the lease kept beside it.
            unsafe { (p.test)((req as *mut Handle).cast(), &mut flag, status.as_mut_ptr()) == 0 && flag == 0 }
        });
        !out.requests.is_empty()
    });
}

/// A message to send in chunks, once its envelope is on its way.
pub struct Outgoing {
    dev: Device,
    src: *const c_void,
    bytes: usize,
    chunk: usize,
    dest: c_int,
    tag: c_int,
    lease: Lease,
    envelope: Box<[u8; envelope::BYTES]>,
}

impl Outgoing {
    pub fn envelope(&self) -> *const c_void {
        self.envelope.as_ptr().cast()
    }

    /// The device buffer the chunks come from, for error reports.
    pub fn source(&self) -> (Device, *const c_void, usize) {
        (self.dev, self.src, self.bytes)
    }

    /// Copies each chunk to host memory and posts its send. The copies are queued at once, and
    /// each chunk is sent as soon as its copy is done; meanwhile the chunks already sent are
    /// tested, which lets an MPI that moves large messages only inside its calls move them
    /// while the copies run.
    pub fn stream(self) -> Result<(), CudaError> {
        let Some(p) = real::pmpi() else { return Ok(()) };
        let Some(peers) = peers::get() else { return Ok(()) };
        let abi = abi::get();
        let ctx = InContext::enter(&self.dev)?;
        let d = ctx.driver();
        let n = self.bytes.div_ceil(self.chunk);
        let chunk = |k: usize| (k * self.chunk, self.chunk.min(self.bytes - k * self.chunk));
        let host = |at: usize| self.lease.ptr().cast::<u8>().wrapping_add(at).cast::<c_void>();
        let mut events: Vec<*mut c_void> = Vec::with_capacity(n);
        let mut failed = Ok(());
        for k in 0..n {
            let (at, len) = chunk(k);
            let mut ev = std::ptr::null_mut();
            // SAFETY: `len` bytes of the lease and of the program's span; the legacy default
            // stream, after the program's work on blocking streams, as a synchronous copy is.
            failed = unsafe {
                check("cuMemcpyDtoHAsync", (d.memcpy_dtoh_async)(host(at), self.src as u64 + at as u64, len, std::ptr::null_mut()))
                    .and_then(|()| check("cuEventCreate", (d.event_create)(&mut ev, EVENT_DISABLE_TIMING)))
                    .and_then(|()| check("cuEventRecord", (d.event_record)(ev, std::ptr::null_mut())))
            };
            events.push(ev);
            if failed.is_err() {
                break;
            }
        }
        let mut requests: Vec<Handle> = Vec::with_capacity(n);
        for k in 0..n {
            let ev = events.get(k).copied().unwrap_or(std::ptr::null_mut());
            // A failed copy still sends the chunk, so the receiver is not left waiting; the
            // error goes to the sender.
            while failed.is_ok() && !ev.is_null() {
                // SAFETY: an event recorded above.
                match unsafe { (d.event_query)(ev) } {
                    0 => break,
                    NOT_READY => progress(p, &mut requests),
                    code => failed = check("cuEventQuery", code),
                }
            }
            let (at, len) = chunk(k);
            let mut req: Handle = 0;
            // SAFETY: `len` bytes of the lease, kept until the send completes; the private
            // communicator and the world rank of the destination.
            if unsafe { (p.isend)(host(at), len as c_int, abi.byte, self.dest, self.tag, peers.shadow, &mut req) } == 0 {
                requests.push(req);
            }
        }
        for ev in events.into_iter().filter(|e| !e.is_null()) {
            // SAFETY: created above; recorded copies are done or failed.
            unsafe { (d.event_destroy)(ev) };
        }
        drop(ctx);
        stats::add(&stats::CHUNKED_BYTES_SENT, self.bytes);
        let mut s = state();
        s.sending.push(Sending { requests, _lease: self.lease });
        failed
    }
}

/// `CU_EVENT_DISABLE_TIMING`, and `CUDA_ERROR_NOT_READY`.
const EVENT_DISABLE_TIMING: u32 = 2;
const NOT_READY: crate::cuda::driver::CuResult = 600;

/// Lets MPI move the chunks already sent: tests the oldest one still in flight.
fn progress(p: &real::Pmpi, requests: &mut [Handle]) {
    let abi = abi::get();
    let (mut flag, mut status) = (0, abi::Status::zeroed());
    if let Some(req) = requests.iter_mut().find(|r| abi.key(**r) != abi.key(abi.request_null)) {
        // SAFETY: a send this module posted; a completed one becomes MPI_REQUEST_NULL, which
        // the final completion skips.
        unsafe { (p.test)((req as *mut Handle).cast(), &mut flag, status.as_mut_ptr()) };
    } else {
        std::hint::spin_loop();
    }
}

// SAFETY: addresses of the program's device buffer and of the lease, used by the sending thread.
unsafe impl Send for Outgoing {}

/// Prepares a chunked send of `bytes` of device memory at `src` to world rank `dest`. `None`:
/// no staging buffer, and the message is staged whole.
pub fn offer(dev: &Device, src: *const c_void, bytes: usize, sender: c_int, dest: c_int) -> Option<Result<Outgoing, CudaError>> {
    let ctx = match InContext::enter(dev) {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    let lease = staging::lease(bytes, &ctx)?;
    drop(ctx);
    let chunk = config::get().pipeline_chunk;
    let tag = {
        let mut s = state();
        collect(&mut s);
        s.next_tag = (s.next_tag + 1) % TAGS;
        (FIRST_TAG + s.next_tag) as c_int
    };
    let mut envelope = Box::new([0u8; envelope::BYTES]);
    Envelope::new(sender as u32, envelope::CHUNKS, bytes as u64, tag as u64, chunk as u64, [0; 64], [0; envelope::TOKEN_BYTES]).write(&mut envelope);
    Some(Ok(Outgoing { dev: *dev, src, bytes, chunk, dest, tag, lease, envelope }))
}

/// Receives the chunks `e` announces into `len` bytes of host memory at `at`; with `device`,
/// each chunk's copy to that device address starts as it arrives. Every chunk is received,
/// even when `at` is null (a truncated receive: the chunks are dropped).
pub fn receive(e: &Envelope, at: *mut c_void, device: Option<(Device, *mut c_void)>) -> Result<(), CudaError> {
    let (Some(p), Some(peers)) = (real::pmpi(), peers::get()) else { return Ok(()) };
    let abi = abi::get();
    let bytes = e.bytes as usize;
    let chunk = (e.offset as usize).max(1);
    let mut scratch = Vec::new();
    let at = if at.is_null() {
        scratch.resize(chunk.min(bytes), 0u8);
        None
    } else {
        Some(at.cast::<u8>())
    };
    let mut requests = Vec::with_capacity(bytes.div_ceil(chunk));
    let mut off = 0;
    while off < bytes {
        let len = chunk.min(bytes - off);
        // Dropped chunks all land in one scratch chunk.
        let to = at.map_or(scratch.as_mut_ptr(), |a| a.wrapping_add(off));
        let mut req: Handle = 0;
        // SAFETY: `len` bytes at `to`; the sender's world rank and the message's tag.
        unsafe { (p.irecv)(to.cast(), len as c_int, abi.byte, e.sender as c_int, e.arena as c_int, peers.shadow, &mut req) };
        requests.push((req, off, len));
        off += len;
    }
    let ctx = match device {
        Some((dev, _)) => Some(InContext::enter(&dev)?),
        None => None,
    };
    let mut failed = Ok(());
    for (mut req, off, len) in requests {
        let mut status = abi::Status::zeroed();
        // SAFETY: a receive posted above.
        unsafe { (p.wait)((&mut req as *mut Handle).cast(), status.as_mut_ptr()) };
        if let (Some(ctx), Some((_, user)), Some(a), true) = (&ctx, device, at, failed.is_ok()) {
            // The copy runs while the next chunk arrives; the source is staging memory that
            // stays put until the synchronisation below.
            // SAFETY: both ranges hold `len` bytes.
            failed = check("cuMemcpyHtoDAsync", unsafe {
                (ctx.driver().memcpy_htod_async)(user as u64 + off as u64, a.wrapping_add(off).cast(), len, std::ptr::null_mut())
            });
        }
    }
    if let Some(ctx) = &ctx {
        // SAFETY: the legacy default stream of the current context.
        let synced = check("cuStreamSynchronize", unsafe { (ctx.driver().stream_synchronize)(std::ptr::null_mut()) });
        failed = failed.and(synced);
    }
    if failed.is_ok() {
        stats::add(&stats::CHUNKED_BYTES_RECEIVED, bytes);
    }
    failed
}

/// Waits for every chunk still being sent (`MPI_Finalize`, before the ranks part).
pub fn finish() {
    let Some(p) = real::pmpi() else { return };
    let sending = std::mem::take(&mut state().sending);
    for mut out in sending {
        for req in out.requests.iter_mut() {
            let mut status = abi::Status::zeroed();
            // SAFETY: a send this module posted.
            unsafe { (p.wait)((req as *mut Handle).cast(), status.as_mut_ptr()) };
        }
    }
}
