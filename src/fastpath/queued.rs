//! Copies of direct messages that one completion call queues and waits for together. A call
//! completing several such receives (`MPI_Waitall` over `osu_bw`'s window) would otherwise
//! copy each message and wait for it before starting the next: the GPU idles between copies,
//! and a GPU two processes share may switch to the other one each time. Queued, the copies run
//! back to back, as the manual IPC floor's do, and their senders learn of them once all are
//! done.
//!
//! A sender waits for its receiver's copy, and that receiver may itself be waiting in a send
//! for a copy queued here: the queue is flushed before anything that waits on a peer (a send
//! from the program's buffer, a chunked message), so no rank waits on a copy that is only
//! queued.
//!
//! This module may use `direct`, `cuda`, `mpi` and `base`.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use super::direct::Taken;
use crate::cuda::copy::check;
use crate::cuda::driver::CUcontext;
use crate::cuda::{CudaError, Device, InContext};
use crate::mpi::abi::Handle;
use crate::mpi::errors;

thread_local! {
    /// Set while a completion call delivers its receives ([`begin`]).
    static ON: Cell<bool> = const { Cell::new(false) };
    /// The index, in the call's array, of the request being delivered.
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// A copy on the legacy default stream of `dev`'s context, not yet waited for.
struct Queued {
    thread: libc::pthread_t,
    index: usize,
    name: &'static str,
    comm: Option<Handle>,
    dst: *mut c_void,
    bytes: usize,
    dev: Device,
    taken: Taken,
    on_senders_gpu: bool,
}

struct Queue {
    copies: Vec<Queued>,
    /// (thread, index, MPI error) of copies that failed, until their call collects them.
    failed: Vec<(libc::pthread_t, usize, c_int)>,
}

// SAFETY: device addresses and contexts, used by the thread that queued them.
unsafe impl Send for Queue {}

static QUEUE: Mutex<Queue> = Mutex::new(Queue { copies: Vec::new(), failed: Vec::new() });

fn queue() -> MutexGuard<'static, Queue> {
    QUEUE.lock().unwrap_or_else(|e| e.into_inner())
}

fn me() -> libc::pthread_t {
    // SAFETY: no preconditions.
    unsafe { libc::pthread_self() }
}

/// A completion call starts delivering its receives.
pub fn begin() {
    ON.with(|c| c.set(true));
}

/// The request delivered next is `index` of the call's array.
pub fn at(index: usize) {
    INDEX.with(|c| c.set(index));
}

/// Whether a direct copy to device memory may be queued now.
pub fn on() -> bool {
    ON.with(Cell::get)
}

/// Queues the completion of a copy to `dst` (`bytes` on `dev`) started without waiting.
pub fn push(name: &'static str, comm: Option<Handle>, dst: *mut c_void, bytes: usize, dev: Device, taken: Taken, on_senders_gpu: bool) {
    let index = INDEX.with(Cell::get);
    queue().copies.push(Queued { thread: me(), index, name, comm, dst, bytes, dev, taken, on_senders_gpu });
}

/// Waits for this thread's queued copies, one synchronisation per context, and tells their
/// senders.
pub fn flush() {
    let thread = me();
    let mine: Vec<Queued> = {
        let mut q = queue();
        if !q.copies.iter().any(|c| c.thread == thread) {
            return;
        }
        let (mine, others): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut q.copies).into_iter().partition(|c| c.thread == thread);
        q.copies = others;
        mine
    };
    let mut synced: Vec<((CUcontext, i32), Result<(), CudaError>)> = Vec::new();
    let mut failed = Vec::new();
    for c in mine {
        let key = (c.dev.ctx, c.dev.ordinal);
        let result = match synced.iter().find(|s| s.0 == key) {
            Some(s) => s.1,
            None => {
                let r = InContext::enter(&c.dev).and_then(|ctx| {
                    // SAFETY: the legacy default stream of the current context.
                    check("cuStreamSynchronize", unsafe { (ctx.driver().stream_synchronize)(std::ptr::null_mut()) })
                });
                synced.push((key, r));
                r
            }
        };
        if let Err(e) = result {
            failed.push((thread, c.index, errors::cuda(c.name, c.comm, e, c.dst, c.bytes, &c.dev)));
        }
        c.taken.done(c.on_senders_gpu);
    }
    if !failed.is_empty() {
        queue().failed.extend(failed);
    }
}

/// The completion call has delivered its receives: waits for what is queued and returns the
/// copies that failed, (index, MPI error).
pub fn end() -> Vec<(usize, c_int)> {
    flush();
    ON.with(|c| c.set(false));
    let thread = me();
    let mut q = queue();
    if q.failed.is_empty() {
        return Vec::new();
    }
    let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut q.failed).into_iter().partition(|f| f.0 == thread);
    q.failed = others;
    mine.into_iter().map(|(_, i, rc)| (i, rc)).collect()
}
