//! Device messages smaller than an envelope, written by the sender straight into the buffer of
//! a receiver that waits for them on another GPU of the node: one GPU copy where staging makes
//! two, each waited for.
//!
//! Such a message cannot travel as an envelope: a receive of fewer bytes, host receives among
//! them, could not hold one. So the message itself still travels through MPI, staged as
//! before, and the receive still matches it by MPI's rules. What changes is who puts the bytes
//! on the receiver's GPU. A rank waiting in a blocking receive of a small contiguous device
//! buffer opens a *door* (`claims`): whom it waits for, and the buffer's IPC handle. A sender
//! whose message fits claims the door, queues a copy from its buffer into the receiver's on
//! the legacy default stream, then stages the message as always (its copy to host memory, on
//! the same stream, waits for both), writes the bytes it sent into the door and sends.
//!
//! The receive then knows what its buffer holds. If the message MPI matched carries those very
//! bytes, the receive is done without a copy of its own. If it matched another message (an
//! earlier one of the same sender, one on another communicator, or another sender's under a
//! wildcard), the bytes differ and the receive copies its message as a staged one does, after
//! the sender's write has landed; the message that was written travels on through MPI with its
//! data, like any staged one. MPI changes only the bytes a message brings, so the sender also
//! copies what the buffer held before its write (in the same stream, ahead of it) and leaves
//! it in the door, and a receive that took a shorter message, or none, puts back the rest. So
//! the door is only ever a hint, and a program sees what it would without it.
//!
//! The receiver opens the door only when the program's work on the legacy default stream (and
//! so on every blocking stream) is done, which is what a staged receive's copy waits for
//! before writing the buffer.
//!
//! This module may use `claims`, `direct`, `peers`, `envelope`, `staging`, `cuda`, `mpi` and
//! `base`.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::{claims, direct, envelope, peers};
use crate::base::{config, log, stats};
use crate::cuda::{self, driver, CudaError, Device, InContext, Location};
use crate::mpi::abi::{self, Handle};
use crate::mpi::{datatype, errors};
use crate::staging::pool;

/// Messages below this many bytes may be written through a door; larger ones to a receiver
/// that waits for them travel as envelopes (`direct`).
pub const BELOW: usize = envelope::BYTES;

const _: () = assert!(BELOW <= claims::DOOR_BYTES);

/// Set when a write through a door failed (the receiver's memory did not map here): this
/// process writes through none again, and its messages are staged as before.
static REFUSED: AtomicBool = AtomicBool::new(false);

/// Whether doors are used (`CUDAMPI_IPC_PUSH=1`, with IPC on).
fn on() -> bool {
    let cfg = config::get();
    cfg.ipc && cfg.ipc_push && claims::ready() && !REFUSED.load(Relaxed)
}

/// Whether a message of `len` bytes may be written through a door between two processes on
/// one GPU: where they take turns on it, each write costs a switch, so only from
/// `CUDAMPI_IPC_SAME_GPU_BYTES` on, as IPC itself (under MPS, say, it may be set to 0).
fn same_gpu_ok(len: usize) -> bool {
    len >= config::get().ipc_same_gpu_bytes
}

// ---- the receiver's side -----------------------------------------------------------------

/// An open door onto `len` bytes at `user` on `dev`; [`Door::shut`] it once the receive has
/// returned.
pub struct Door {
    opened: claims::Opened,
    dev: Device,
    user: *mut c_void,
}

/// What a receive finds behind its door once shut.
pub enum Landed {
    /// No sender wrote into the buffer.
    Nothing,
    /// The buffer holds the message received: it needs no copy.
    Message,
    /// A sender wrote other bytes than those received: the receive delivers its own, then
    /// [`Restore::apply`].
    Other(Restore),
}

/// The buffer's bytes from before a sender's write, to put back where the message received
/// does not cover them.
pub struct Restore {
    write: Box<claims::Write>,
    dev: Device,
    user: *mut c_void,
}

/// Opens this rank's door onto `len` bytes of device memory at `user` on `dev` for a blocking
/// receive from `source` with `tag` on `comm`; `None` where no sender could use it.
pub fn open(comm: Option<Handle>, source: c_int, tag: c_int, dev: &Device, user: *mut c_void, len: usize) -> Option<Door> {
    if len == 0 || len >= BELOW || !on() || (cuda::signal::gpu_shared() && !same_gpu_ok(len)) {
        return None;
    }
    let p = peers::get()?;
    let abi = abi::get();
    let world = comm.is_some_and(|c| abi.same(c, abi.comm_world)) && source >= 0;
    // A source known to be off the node, or on this GPU, would never write.
    let near = match world {
        true => p.maps_with(source) && source != p.rank && (!p.shares_gpu(source) || same_gpu_ok(len)),
        false => p.node_shared(),
    };
    if !near {
        return None;
    }
    // The sender writes without waiting for this process's streams: only an idle legacy
    // default stream (idle blocking streams too) may be written behind the program's back.
    {
        let ctx = InContext::enter(dev).ok()?;
        let signals = ctx.driver().signals.as_ref()?;
        // SAFETY: the legacy default stream of the current context.
        if unsafe { (signals.stream_query)(std::ptr::null_mut()) } != driver::CUDA_SUCCESS {
            return None;
        }
    }
    let (id, base, handle) = direct::exported_allocation(dev, user)?.ok()?;
    let b = claims::DoorBuffer { capacity: len, id, offset: user as u64 - base, handle: handle.0, token: peers::device_token(dev.ordinal) };
    let opened = claims::open_door(world.then_some(source as u32), (tag != abi.any_tag).then_some(tag as u32), &b)?;
    Some(Door { opened, dev: *dev, user })
}

impl Door {
    /// Shuts the door after the receive returned `rc` with `status` into the staging buffer
    /// `staged`: whether a sender wrote into the device buffer, and if so whether it holds
    /// what arrived (that sender sent these very bytes), so the receive needs no copy.
    pub fn shut(self, rc: c_int, status: *mut c_void, staged: *const c_void) -> Landed {
        let Some(w) = claims::shut(self.opened) else { return Landed::Nothing };
        let n = w.len;
        let arrived = match rc == 0 && !status.is_null() {
            true => crate::staging::stage::received_bytes(status),
            false => None,
        };
        // SAFETY: the staging buffer holds the `n` bytes the status says arrived.
        if w.sent && arrived == Some(n) && unsafe { std::slice::from_raw_parts(staged.cast::<u8>(), n) } == &w.data[..n] {
            stats::add(&stats::IPC_BYTES_RECEIVED, n);
            return Landed::Message;
        }
        if config::get().debug {
            log::debug(format_args!("a receive got another message than the {n} bytes a sender wrote into its device buffer meanwhile; it copies its own and puts back the rest"));
        }
        Landed::Other(Restore { write: w, dev: self.dev, user: self.user })
    }
}

impl Restore {
    /// After the receive `name` on `comm` put the first `covered` bytes of the buffer in place:
    /// puts back the buffer's own bytes after them that the sender's write changed.
    pub fn apply(self, name: &str, comm: Option<Handle>, covered: usize) -> Result<(), c_int> {
        let len = self.write.len;
        if covered >= len {
            return Ok(());
        }
        let put_back = |ctx: InContext| ctx.runs_to_device(self.user, self.write.old.as_ptr().cast(), &[(covered, len - covered)], None);
        InContext::enter(&self.dev).and_then(put_back).map_err(|e: CudaError| errors::cuda(name, comm, e, self.user, len, &self.dev))
    }
}

// ---- the sender's side -------------------------------------------------------------------

/// A copy queued into a waiting receiver's buffer, after a copy of what the buffer held into
/// `old`. The staged copy of the message to host memory waits for both; [`Push::written`] then
/// tells the receiver which bytes its buffer holds, and which it held. Dropped before that (the
/// staging failed), it waits for the copies and gives the door up, with the old bytes.
pub struct Push {
    claimed: Option<claims::Claimed>,
    dev: Device,
    bytes: usize,
    old: pool::Lease,
}

/// Writes a small device send into its receiver's buffer if the receiver waits for it behind
/// an open door: `None` where it does not (the message is staged as ever).
pub fn offer(buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) -> Option<Push> {
    if !on() || !claims::any_door_open() {
        return None;
    }
    let p = peers::get()?;
    let abi = abi::get();
    if count <= 0 || dest < 0 || abi.same(datatype, abi.datatype_null) {
        return None;
    }
    let t = datatype::query(datatype).ok()?;
    let span = t.span(count).ok()?;
    if !t.named || span.len >= BELOW {
        return None;
    }
    let world = p.world_rank(comm, dest)?;
    if world == p.rank || !p.maps_with(world) || (p.shares_gpu(world) && !same_gpu_ok(span.len)) {
        return None;
    }
    let Location::Device(dev) = cuda::locate(buf) else { return None };
    let pid = p.pid(world)?;
    // Onto a GPU that this process sees; its own only where IPC on a shared GPU starts this low.
    let accept = |b: &claims::DoorBuffer| peers::local_ordinal(&b.token).is_some_and(|o| o != dev.ordinal || same_gpu_ok(span.len));
    let claimed = claims::claim(pid, p.rank as u32, tag as u32, span.len, accept)?;
    // Pinned, so that the copy into it is queued like the others (pageable, it would wait);
    // without one the claim is given up before anything was written.
    let old = pool::lease_pinned(span.len, &InContext::enter(&dev).ok()?, 0)?;
    let src = buf.cast::<u8>().wrapping_offset(span.offset as isize).cast();
    let b = &claimed.buffer;
    if let Err(e) = direct::copy_to_peer(world as u32, (b.id, b.handle, b.offset), &dev, src, span.len, old.ptr()) {
        // A copy of the old bytes queued before the failure may still land in `old`.
        if let Ok(ctx) = InContext::enter(&dev) {
            let _ = ctx.synchronize();
        }
        REFUSED.store(true, Relaxed);
        if config::get().debug {
            log::debug(format_args!("{} failed with {} writing into a waiting receiver's buffer; small device messages are staged from now on", e.call, e.name()));
        }
        // Dropping the claim gives the door up; the receiver copies as usual.
        return None;
    }
    Some(Push { claimed: Some(claimed), dev, bytes: span.len, old })
}

impl Push {
    /// The message was staged into `host` (the copy queued before it is done too): the
    /// receiver's buffer holds these bytes.
    pub fn written(mut self, host: *const c_void) {
        let Some(c) = self.claimed.take() else { return };
        // SAFETY: the staging buffer holds the message's bytes, and `old` as many, copied
        // before them on the same stream.
        c.written(unsafe { std::slice::from_raw_parts(host.cast::<u8>(), self.bytes) }, self.old_bytes());
        stats::add(&stats::IPC_BYTES_SENT, self.bytes);
        if config::get().debug {
            log::debug(format_args!("device send of {} bytes written into its waiting receiver's buffer too", self.bytes));
        }
    }
}

impl Push {
    fn old_bytes(&self) -> &[u8] {
        // SAFETY: the lease holds `bytes` bytes, in place once the stream's copies are done.
        unsafe { std::slice::from_raw_parts(self.old.ptr().cast::<u8>(), self.bytes) }
    }
}

impl Drop for Push {
    fn drop(&mut self) {
        let Some(c) = self.claimed.take() else { return };
        // The receiver must not copy into its buffer, nor return, while this copy may still
        // land there; with it landed, the receiver puts the old bytes back.
        match InContext::enter(&self.dev).and_then(|ctx| ctx.synchronize()) {
            Ok(()) => c.abandoned(self.old_bytes()),
            Err(_) => drop(c),
        }
    }
}
