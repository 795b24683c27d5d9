//! The enqueue calls made in the call, as they are unless `CUDAMPI_ENQUEUE=ordered`: the call
//! waits for the program's stream, then makes the operation itself through cudampi's own entry
//! points, as a blocking call after `cudaStreamSynchronize` would; the nonblocking forms return
//! the entry point's request, which `MPIX_Wait_enqueue` and `MPIX_Waitall_enqueue` wait for.
//!
//! The stream-ordered engine (`progress`) is correct but was measured slower on one GPU
//! (`bench/enqueue.cu`, one H200, Open MPI 4.1.6, 2026-11-29): one rank exchanging with itself,
//! a halo step of 8 KiB took 70 us stream-ordered against 33 us with blocking calls, the
//! 8-byte ping-pong 22 us one way against 12; two ranks on the one GPU, 711 against 561 us and
//! 178 against 166. Made in the call, the same runs matched the blocking calls (0.87-1.01x).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::own::{self, entry};
use super::Stream;
use crate::base::log;
use crate::mpi::abi::{self, Handle};
use crate::mpi::errors;

/// The work the program queued on the stream so far is done; else the error, raised.
fn synchronized(name: &str, comm: Handle, stream: &Stream) -> Result<(), c_int> {
    let abi = abi::get();
    let lane = stream.lane.as_ref().ok_or(abi.err_intern)?;
    lane.synchronize().map_err(|e| {
        log::error(format_args!("{name}: the stream failed ({} in {})", e.name(), e.call));
        errors::raise(Some(comm), abi.err_other)
    })
}

pub fn send(name: &str, stream: &Arc<Stream>, buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: Option<*mut c_void>) -> c_int {
    if let Err(rc) = synchronized(name, comm, stream) {
        return rc;
    }
    // SAFETY: cudampi's MPI_Send and MPI_Isend, with the caller's arguments.
    unsafe {
        match request {
            None => entry::<own::Send>(|o| o.PMPI_Send).map_or_else(|rc| rc, |f| f(buf, count, datatype, dest, tag, comm)),
            Some(r) => entry::<own::Isend>(|o| o.PMPI_Isend).map_or_else(|rc| rc, |f| f(buf, count, datatype, dest, tag, comm, r)),
        }
    }
}

pub fn recv(name: &str, stream: &Arc<Stream>, buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status: *mut c_void, request: Option<*mut c_void>) -> c_int {
    if let Err(rc) = synchronized(name, comm, stream) {
        return rc;
    }
    // SAFETY: cudampi's MPI_Recv and MPI_Irecv, with the caller's arguments.
    unsafe {
        match request {
            None => entry::<own::Recv>(|o| o.PMPI_Recv).map_or_else(|rc| rc, |f| f(buf, count, datatype, source, tag, comm, status)),
            Some(r) => entry::<own::Irecv>(|o| o.PMPI_Irecv).map_or_else(|rc| rc, |f| f(buf, count, datatype, source, tag, comm, r)),
        }
    }
}

/// `MPIX_Wait_enqueue` and `MPIX_Waitall_enqueue` on the requests of [`send`] and [`recv`].
pub fn wait(count: c_int, requests: *mut c_void, statuses: *mut c_void) -> c_int {
    // SAFETY: cudampi's MPI_Waitall, with the caller's arrays.
    unsafe { entry::<own::Waitall>(|o| o.PMPI_Waitall).map_or_else(|rc| rc, |f| f(count, requests, statuses)) }
}

pub fn allreduce(name: &str, stream: &Arc<Stream>, send: *const c_void, recv: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle) -> c_int {
    if let Err(rc) = synchronized(name, comm, stream) {
        return rc;
    }
    // SAFETY: cudampi's MPI_Allreduce, with the caller's arguments.
    unsafe { entry::<own::Allreduce>(|o| o.PMPI_Allreduce).map_or_else(|rc| rc, |f| f(send, recv, count, datatype, op, comm)) }
}
