//! Copies of direct messages that one completion call queues and waits for together. A call
//! completing several such receives (`MPI_Waitall` over `osu_bw`'s window) would otherwise
//! copy each message and wait for it before starting the next: the GPU idles between copies,
//! and a GPU two processes share may switch to the other one each time. Queued, the copies run
//! back to back, as the manual IPC floor's do, and their senders learn of them once all are
//! done.
//!
//! A sender waits for its receiver's copy, and that receiver may itself be waiting in a send
//! for a copy queued here: the queue is flushed before anything that waits on a peer (a send
//! from the program's buffer, a chunked message, a receive whose message has not arrived), so
//! no rank waits on a copy that is only queued.
//!
//! Scopes nest: `MPI_Waitall` with the fast paths on completes its receives one at a time
//! (`handlers::completion`), each through a completion of its own, inside one scope of its
//! own; the queue is waited for when the outermost scope ends.
//!
//! This module may use `direct`, `cuda`, `mpi` and `base`.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use super::direct::Taken;
use crate::cuda::driver::CUcontext;
use crate::cuda::{CudaError, Device, InContext};
use crate::mpi::abi::Handle;
use crate::mpi::errors;

thread_local! {
    /// Scopes open on this thread ([`begin`]).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The request being delivered.
    static REQUEST: Cell<Handle> = const { Cell::new(0) };
    /// This thread has copies queued, or failures its call has not collected: without either,
    /// flushing and ending take no lock.
    static QUEUED: Cell<bool> = const { Cell::new(false) };
    static FAILED: Cell<bool> = const { Cell::new(false) };
}

/// A copy on the legacy default stream of `dev`'s context, not yet waited for.
struct Queued {
    thread: libc::pthread_t,
    request: Handle,
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
    /// (thread, request, MPI error) of copies that failed, until their call collects them.
    failed: Vec<(libc::pthread_t, Handle, c_int)>,
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

/// A completion call starts delivering its receives: opens a scope.
pub fn begin() {
    DEPTH.with(|c| c.set(c.get() + 1));
}

/// The request delivered next.
pub fn at(request: Handle) {
    REQUEST.with(|c| c.set(request));
}

/// Whether a direct copy to device memory may be queued now.
pub fn on() -> bool {
    DEPTH.with(Cell::get) > 0
}

/// Whether this thread has copies queued.
pub fn pending() -> bool {
    QUEUED.with(Cell::get)
}

/// Queues the completion of a copy to `dst` (`bytes` on `dev`) started without waiting.
pub fn push(name: &'static str, comm: Option<Handle>, dst: *mut c_void, bytes: usize, dev: Device, taken: Taken, on_senders_gpu: bool) {
    let request = REQUEST.with(Cell::get);
    QUEUED.with(|c| c.set(true));
    queue().copies.push(Queued { thread: me(), request, name, comm, dst, bytes, dev, taken, on_senders_gpu });
}

/// Waits for this thread's queued copies, one synchronisation per context, and tells their
/// senders.
pub fn flush() {
    if !QUEUED.with(|c| c.replace(false)) {
        return;
    }
    let thread = me();
    let mine: Vec<Queued> = {
        let mut q = queue();
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
                let r = InContext::enter(&c.dev).and_then(|ctx| ctx.synchronize());
                synced.push((key, r));
                r
            }
        };
        if let Err(e) = result {
            failed.push((thread, c.request, errors::cuda(c.name, c.comm, e, c.dst, c.bytes, &c.dev)));
        }
        c.taken.done(c.on_senders_gpu);
    }
    if !failed.is_empty() {
        FAILED.with(|c| c.set(true));
        queue().failed.extend(failed);
    }
}

/// Closes a scope. The outermost waits for what is queued and returns the copies that failed,
/// (request, MPI error); inner ones return nothing.
pub fn end() -> Vec<(Handle, c_int)> {
    let depth = DEPTH.with(|c| {
        let d = c.get().saturating_sub(1);
        c.set(d);
        d
    });
    if depth > 0 {
        return Vec::new();
    }
    flush();
    if !FAILED.with(|c| c.replace(false)) {
        return Vec::new();
    }
    let thread = me();
    let mut q = queue();
    let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut q.failed).into_iter().partition(|f| f.0 == thread);
    q.failed = others;
    mine.into_iter().map(|(_, i, rc)| (i, rc)).collect()
}
