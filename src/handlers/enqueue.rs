//! MPICH's stream-ordered calls (`MPIX_Stream_*`, `MPIX_*_enqueue`, `MPIX_Info_set_hex`):
//! cudampi serves them on every library (`streams` says how), so the library's own function,
//! where it has one, is never called.

use std::ffi::{c_int, c_void};

use crate::mpi::abi::Handle;
use crate::streams;

pub fn stream_create(name: &'static str, info: Handle, stream: *mut c_int, _call: impl FnOnce() -> c_int) -> c_int {
    streams::create(name, info, stream)
}

pub fn stream_free(name: &'static str, stream: *mut c_int, _call: impl FnOnce() -> c_int) -> c_int {
    streams::free(name, stream)
}

pub fn stream_comm_create(name: &'static str, comm: Handle, stream: c_int, newcomm: *mut c_void, _call: impl FnOnce() -> c_int) -> c_int {
    streams::comm_create(name, comm, stream, newcomm)
}

pub fn info_set_hex(name: &'static str, info: Handle, key: *const c_void, value: *const c_void, size: c_int, _call: impl FnOnce() -> c_int) -> c_int {
    streams::info_set_hex(name, info, key.cast(), value, size)
}

pub fn send_enqueue(name: &'static str, buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: Option<*mut c_void>, _call: impl FnOnce() -> c_int) -> c_int {
    streams::send(name, buf, count, datatype, dest, tag, comm, request)
}

pub fn recv_enqueue(
    name: &'static str,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut c_void,
    request: Option<*mut c_void>,
    _call: impl FnOnce() -> c_int,
) -> c_int {
    streams::recv(name, buf, count, datatype, source, tag, comm, status, request)
}

/// `MPIX_Wait_enqueue` (one request and its status) and `MPIX_Waitall_enqueue` (`all`).
pub fn wait_enqueue(name: &'static str, count: c_int, requests: *mut c_void, statuses: *mut c_void, all: bool, _call: impl FnOnce() -> c_int) -> c_int {
    streams::wait(name, count, requests, statuses, all)
}

pub fn allreduce_enqueue(name: &'static str, send: *const c_void, recv: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, _call: impl FnOnce() -> c_int) -> c_int {
    streams::allreduce(name, send, recv, count, datatype, op, comm)
}
