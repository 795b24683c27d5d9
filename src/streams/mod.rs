//! MPICH's stream-ordered calls, served on every MPI: `MPIX_Stream_create` over a CUDA stream,
//! `MPIX_Stream_comm_create`, and the `MPIX_*_enqueue` calls, whose operations run in the
//! stream's order while the host call returns at once.
//!
//! cudampi serves these calls itself on every library, MPICH's own included: MPICH runs them
//! only when built with CUDA (and with reserved virtual interfaces), and its host functions
//! make blocking MPI calls inside the stream, which CUDA forbids. Here:
//! - `MPIX_Allreduce_enqueue` on device buffers runs on NCCL on the program's stream where the
//!   collectives' engine would run it (`engine::enqueue`): no host thread takes part;
//! - with `CUDAMPI_ENQUEUE=nccl`, so do sends and receives of device memory between ranks with
//!   GPUs of their own, on the stream communicator's own NCCL communicator (`engine::Peers`),
//!   matched as MPI matches through an envelope per message (`matched`);
//! - every other operation, by default, waits for the stream and is made in the call through
//!   cudampi's own entry points (`immediate`): the results of stream order at the cost of
//!   blocking calls;
//! - with `CUDAMPI_ENQUEUE=ordered`, it is a job that the stream releases, by writing its ticket,
//!   to cudampi's progress thread (`progress`), which makes the library's nonblocking calls on host
//!   memory; device buffers are copied on the stream into staging buffers before it, and the
//!   received bytes back on the lane's own stream after it, before the word the program's
//!   stream waits on is written (`cuda::ordered`). There, device buffers take datatypes
//!   without gaps only (their bytes are copied as one block).
//!
//! This layer uses `base`, `cuda`, `mpi`, `staging`, `engine` and the generalized requests of
//! `fastpath::held`; the handlers use it.

mod immediate;
mod matched;
mod own;
mod progress;
mod stream;
mod work;

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::base::{config, log, stats};
use crate::cuda::ordered::Lane;
use crate::cuda::{self, InContext, Location};
use crate::engine;
use crate::mpi::abi::{self, Handle};
use crate::mpi::{datatype, errors, real};
use crate::staging::pool;
use work::{Job, Op, Statuses, Transfer, Work};
use stream::close_gone;
pub use stream::Stream;

/// `MPIX_STREAM_NULL` as MPICH defines it; cudampi's handles follow it (kind bits 0, which
/// MPICH's own calls refuse as invalid rather than misread).
pub const STREAM_NULL: c_int = 0x3c00_0000;

/// Every stream made, so that `MPI_Finalize` closes the lanes that communicators still hold.
static ALL: Mutex<Vec<std::sync::Weak<Stream>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The streams by handle: handle `STREAM_NULL + i + 1` is slot `i`.
static STREAMS: Mutex<Vec<Option<Arc<Stream>>>> = Mutex::new(Vec::new());

fn stream_of(handle: c_int) -> Option<Arc<Stream>> {
    let i = usize::try_from(handle.wrapping_sub(STREAM_NULL + 1)).ok()?;
    lock(&STREAMS).get(i)?.clone()
}

/// `MPIX_Stream_create(info, &stream)`: a CUDA stream when the info says `type` =
/// `cudaStream_t` and gives its handle in `value` as hexadecimal bytes (`MPIX_Info_set_hex`).
pub fn create(name: &'static str, info: Handle, out: *mut c_int) -> c_int {
    let abi = abi::get();
    close_gone();
    if out.is_null() {
        log::error(format_args!("{name}: the stream argument is null"));
        return errors::raise(None, abi.err_arg);
    }
    let lane = match gpu_stream(name, info) {
        Ok(None) => None,
        Ok(Some(handle)) => match Lane::open(handle) {
            Ok(lane) => Some(lane),
            Err(e) => {
                log::error(format_args!("{name}: {handle:p} is not a CUDA stream this process can use ({} in {})", e.name(), e.call));
                return errors::raise(None, abi.err_other);
            }
        },
        Err(rc) => return errors::raise(None, rc),
    };
    let s = Arc::new(Stream { lane, issued: Mutex::new(0), done: AtomicU32::new(0), comms: AtomicUsize::new(0) });
    {
        let mut all = lock(&ALL);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&s));
    }
    let mut all = lock(&STREAMS);
    let i = match all.iter().position(Option::is_none) {
        Some(i) => i,
        None => {
            all.push(None);
            all.len() - 1
        }
    };
    all[i] = Some(s);
    // SAFETY: the caller's out-pointer, checked above.
    unsafe { *out = STREAM_NULL + 1 + i as c_int };
    0
}

/// The CUDA stream an info names, `None` when it names none.
fn gpu_stream(name: &str, info: Handle) -> Result<Option<*mut c_void>, c_int> {
    let abi = abi::get();
    if abi.same(info, abi.info_null) {
        return Ok(None);
    }
    let kind = info_value(info, c"type")?;
    match kind.as_deref() {
        Some("cudaStream_t") => (),
        Some("hipStream_t") => {
            log::error(format_args!("{name}: HIP streams are not CUDA streams"));
            return Err(abi.err_arg);
        }
        _ => return Ok(None),
    }
    let Some(hex) = info_value(info, c"value")? else {
        log::error(format_args!("{name}: the info has type cudaStream_t but no value (set it with MPIX_Info_set_hex)"));
        return Err(abi.err_other);
    };
    let mut bytes = [0u8; std::mem::size_of::<usize>()];
    if !decode_hex(&hex, &mut bytes) {
        log::error(format_args!("{name}: the stream value '{hex}' is not {} bytes in hexadecimal", bytes.len()));
        return Err(abi.err_other);
    }
    Ok(Some(usize::from_ne_bytes(bytes) as *mut c_void))
}

fn info_value(info: Handle, key: &CStr) -> Result<Option<String>, c_int> {
    let p = real::pmpi().ok_or(abi::get().err_intern)?;
    let (mut len, mut flag): (c_int, c_int) = (0, 0);
    // SAFETY: the caller's info handle, a NUL-terminated key and valid out-pointers.
    let rc = unsafe { (p.info_get_valuelen)(info, key.as_ptr(), &mut len, &mut flag) };
    if rc != 0 {
        return Err(rc);
    }
    if flag == 0 {
        return Ok(None);
    }
    let mut buf = vec![0u8; len.max(0) as usize + 1];
    // SAFETY: a buffer of len + 1 bytes, as MPI_Info_get asks.
    let rc = unsafe { (p.info_get)(info, key.as_ptr(), len, buf.as_mut_ptr().cast::<c_char>(), &mut flag) };
    if rc != 0 {
        return Err(rc);
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(Some(String::from_utf8_lossy(&buf[..end]).into_owned()))
}

/// MPICH's encoding: each byte in memory order as two hexadecimal digits.
fn decode_hex(text: &str, out: &mut [u8]) -> bool {
    let t = text.as_bytes();
    if t.len() != 2 * out.len() {
        return false;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    for (i, b) in out.iter_mut().enumerate() {
        match (digit(t[2 * i]), digit(t[2 * i + 1])) {
            (Some(h), Some(l)) => *b = h << 4 | l,
            _ => return false,
        }
    }
    true
}

/// `MPIX_Info_set_hex(info, key, value, size)`: `value`'s bytes as MPICH encodes them.
pub fn info_set_hex(name: &'static str, info: Handle, key: *const c_char, value: *const c_void, size: c_int) -> c_int {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return abi.err_intern };
    if key.is_null() || (value.is_null() && size > 0) || size < 0 {
        log::error(format_args!("{name}: a null key or value, or a negative size"));
        return errors::raise(None, abi.err_arg);
    }
    // SAFETY: the caller's `size` bytes at `value`.
    let bytes = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size as usize) };
    let mut text: Vec<u8> = bytes.iter().flat_map(|b| format!("{b:02x}").into_bytes()).collect();
    text.push(0);
    // SAFETY: the caller's info and key, and a NUL-terminated value.
    unsafe { (p.info_set)(info, key, text.as_ptr().cast()) }
}

/// `MPIX_Stream_free(&stream)`.
pub fn free(name: &'static str, handle: *mut c_int) -> c_int {
    let abi = abi::get();
    // SAFETY: the caller's pointer, checked for null.
    let h = if handle.is_null() { STREAM_NULL } else { unsafe { *handle } };
    let mut all = lock(&STREAMS);
    let i = h.wrapping_sub(STREAM_NULL + 1);
    let Some(slot) = usize::try_from(i).ok().and_then(|i| all.get_mut(i)).filter(|s| s.is_some()) else {
        drop(all);
        log::error(format_args!("{name}: not a stream"));
        return errors::raise(None, abi.err_arg);
    };
    if slot.as_ref().is_some_and(|s| s.comms.load(Ordering::Acquire) > 0) {
        drop(all);
        log::error(format_args!("{name}: communicators made over the stream are not freed yet"));
        return errors::raise(None, abi.err_other);
    }
    *slot = None;
    drop(all);
    close_gone();
    // SAFETY: as above.
    unsafe { *handle = STREAM_NULL };
    0
}

/// The attribute that ties a stream communicator to its stream.
static KEYVAL: Mutex<Option<c_int>> = Mutex::new(None);

unsafe extern "C" fn no_copy(_: Handle, _: c_int, _: *mut c_void, _: *mut c_void, _: *mut c_void, flag: *mut c_int) -> c_int {
    // SAFETY: MPI passes a valid flag pointer.
    unsafe { *flag = 0 };
    0
}

/// What a stream communicator carries: its stream, and the matching of its enqueued
/// point-to-point calls where they run on NCCL (`CUDAMPI_ENQUEUE=nccl`).
#[derive(Clone)]
struct Attached {
    stream: Arc<Stream>,
    matched: Option<Arc<matched::Matched>>,
}

unsafe extern "C" fn delete(_: Handle, _: c_int, value: *mut c_void, _: *mut c_void) -> c_int {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the Box `comm_create` leaked for this communicator, deleted once.
        let a = unsafe { Box::from_raw(value.cast::<Attached>()) };
        a.stream.comms.fetch_sub(1, Ordering::AcqRel);
    });
    0
}

fn keyval() -> Option<c_int> {
    let mut k = lock(&KEYVAL);
    if k.is_none() {
        let p = real::pmpi()?;
        let mut key: c_int = 0;
        // SAFETY: valid callbacks and out-pointer.
        if unsafe { (p.comm_create_keyval)(no_copy, delete, &mut key, std::ptr::null_mut()) } != 0 {
            return None;
        }
        *k = Some(key);
    }
    *k
}

/// `MPIX_Stream_comm_create(comm, stream, &newcomm)`: a duplicate of `comm` whose enqueue calls
/// join `stream` (collective, as `MPI_Comm_dup`).
pub fn comm_create(name: &'static str, comm: Handle, handle: c_int, newcomm: *mut c_void) -> c_int {
    let abi = abi::get();
    let stream = if handle == STREAM_NULL { None } else { stream_of(handle) };
    if handle != STREAM_NULL && stream.is_none() {
        log::error(format_args!("{name}: not a stream"));
        return errors::raise(Some(comm), abi.err_arg);
    }
    let (Some(p), Some(key)) = (real::pmpi(), keyval()) else { return abi.err_intern };
    if newcomm.is_null() {
        log::error(format_args!("{name}: the new communicator's argument is null"));
        return errors::raise(Some(comm), abi.err_arg);
    }
    let mut made: Handle = 0;
    // SAFETY: the caller's communicator (MPI checks it) and an out-pointer that holds every
    // family's handle.
    let rc = unsafe { (p.comm_dup)(comm, &mut made) };
    if rc != 0 {
        return rc;
    }
    // SAFETY: the program's out-argument, checked for null.
    unsafe { abi.set_handle(newcomm, made) };
    // Collective, on every rank alike whatever its stream.
    let nccl_dev = stream.as_ref().and_then(|s| s.lane.as_ref()).map(|l| l.dev).filter(|_| config::get().enqueue_nccl);
    let peers = engine::stream_peers(name, made, nccl_dev);
    if let Some(s) = stream {
        let matched = peers.and_then(|p| matched::Matched::open(name, made, s.clone(), p));
        s.comms.fetch_add(1, Ordering::AcqRel);
        let value = Box::into_raw(Box::new(Attached { stream: s, matched }));
        // SAFETY: the new communicator and the keyval; the value is the Box's address.
        let rc = unsafe { (p.comm_set_attr)(made, key, value.cast()) };
        if rc != 0 {
            // SAFETY: not handed to MPI.
            let a = unsafe { Box::from_raw(value) };
            a.stream.comms.fetch_sub(1, Ordering::AcqRel);
            return rc;
        }
    }
    0
}

/// The stream of a stream communicator, with a lane; else the error MPICH gives.
fn lane_of(name: &str, comm: Handle) -> Result<Arc<Stream>, c_int> {
    attached(name, comm).map(|a| a.stream)
}

/// What a stream communicator carries, its stream with a lane; else the error MPICH gives.
fn attached(name: &str, comm: Handle) -> Result<Attached, c_int> {
    let abi = abi::get();
    let (Some(p), Some(key)) = (real::pmpi(), keyval()) else { return Err(abi.err_intern) };
    let mut value: *mut c_void = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: valid out-pointers; the attribute's value is a pointer.
    let rc = unsafe { (p.comm_get_attr)(comm, key, (&mut value as *mut *mut c_void).cast(), &mut flag) };
    if rc != 0 {
        return Err(errors::raise(Some(comm), rc));
    }
    // SAFETY: a Box this module leaked, live while the communicator is.
    let a = (flag != 0 && !value.is_null()).then(|| unsafe { &*(value as *const Attached) }.clone());
    match a {
        Some(a) if a.stream.lane.is_some() => Ok(a),
        _ => {
            log::error(format_args!("{name}: the communicator is not a GPU stream communicator (make it with MPIX_Stream_comm_create over a stream made from a cudaStream_t)"));
            Err(errors::raise(Some(comm), abi.err_other))
        }
    }
}

/// A buffer of an enqueued operation, as the progress thread will see it.
struct Staged {
    /// Host memory for MPI.
    host: *mut c_void,
    /// The device buffer behind it, if any, and its bytes.
    device: Option<(*mut c_void, usize)>,
    leases: Vec<pool::Lease>,
}

/// Classifies `buf` for an operation on `stream`: host memory as it is, device memory of the
/// stream's GPU through a staging buffer (copied into it on the stream when `copy_in`).
fn stage(name: &'static str, comm: Handle, stream: &Stream, buf: *mut c_void, count: c_int, datatype: Handle, copy_in: bool) -> Result<Staged, c_int> {
    let abi = abi::get();
    let lane = stream.lane.as_ref().ok_or(abi.err_intern)?;
    let host = Staged { host: buf, device: None, leases: Vec::new() };
    if count < 0 {
        return Err(errors::raise(Some(comm), abi.err_count));
    }
    let t = datatype::query(datatype).map_err(|rc| errors::raise(Some(comm), rc))?;
    let bytes = (count as i64).checked_mul(t.size).filter(|&b| b >= 0).ok_or_else(|| errors::raise(Some(comm), abi.err_count))? as usize;
    if bytes == 0 || buf.is_null() || abi.is_in_place(buf) {
        return Ok(host);
    }
    let dev = match cuda::locate(buf) {
        Location::Host => return Ok(host),
        Location::Device(d) if d.managed => return Ok(host),
        Location::Device(d) => d,
        Location::Unreadable => return Err(errors::unreadable(name, Some(comm), buf)),
    };
    if dev.ordinal != lane.dev.ordinal {
        log::error(format_args!("{name}: the buffer {buf:p} is on GPU {} and the stream on GPU {}", dev.ordinal, lane.dev.ordinal));
        return Err(errors::raise(Some(comm), abi.err_buffer));
    }
    if !t.packed() {
        log::error(format_args!("{name}: a device buffer with a datatype that has gaps or a lower bound is not served by the enqueue calls; pack it first"));
        return Err(errors::raise(Some(comm), abi.err_type));
    }
    let ctx = InContext::enter(&lane.dev).map_err(|e| errors::cuda_wait(name, Some(comm), e))?;
    // Pinned, up to twice the pool's bound: the stream's copies into and out of pageable memory
    // would make the caller and the progress thread wait for the stream, which may wait for them.
    let lease = pool::lease_pinned(bytes, &ctx, config::get().pool_bytes).ok_or_else(|| {
        log::error(format_args!("{name}: no pinned staging buffer of {bytes} bytes: the operations in flight hold twice CUDAMPI_POOL_BYTES ({} bytes); raise it", config::get().pool_bytes));
        errors::raise(Some(comm), abi.err_no_mem)
    })?;
    if copy_in {
        lane.to_host(lease.ptr(), buf, bytes).map_err(|e| errors::cuda(name, Some(comm), e, buf, bytes, &dev))?;
    }
    stats::device_call(name);
    Ok(Staged { host: lease.ptr(), device: Some((buf, bytes)), leases: vec![lease] })
}

/// Queues `works` on the stream behind a mark that releases them to the progress thread, and,
/// with `wait`, a wait of the stream for them; under the lane's number lock.
fn queue(name: &str, comm: Handle, stream: &Arc<Stream>, works: impl FnOnce(u32) -> Vec<Work>, wait: bool) -> c_int {
    let abi = abi::get();
    let Some(lane) = stream.lane.as_ref() else { return abi.err_intern };
    if let Err(rc) = progress::ensure(name) {
        return errors::raise(Some(comm), rc);
    }
    let mut issued = stream.issuing();
    let number = issued.wrapping_add(1);
    let ticket = match lane.mark() {
        Ok(t) => t,
        Err(e) => {
            log::error(format_args!("{name}: the stream refused the operation ({} in {})", e.name(), e.call));
            return errors::raise(Some(comm), abi.err_other);
        }
    };
    progress::submit(Job::new(stream.clone(), ticket, works(number)));
    if wait {
        *issued = number;
        if let Err(e) = lane.wait_for(number) {
            log::error(format_args!("{name}: the stream cannot be made to wait for the operation ({} in {})", e.name(), e.call));
            return errors::raise(Some(comm), abi.err_other);
        }
    }
    drop(issued);
    if config::get().debug {
        log::debug(format_args!("{name}: queued on stream {:p}{}", lane.stream, if wait { ", which waits for it" } else { "" }));
    }
    0
}

/// Whether the enqueue calls synchronise the stream and make the operation in the call
/// (`immediate`), as they do unless `CUDAMPI_ENQUEUE=ordered`: the stream-ordered engine is
/// correct but, as measured so far, far slower than blocking calls (`immediate` says how much).
fn immediately() -> bool {
    config::get().enqueue_immediate.unwrap_or(true)
}

/// The transfer of `op` on the staged buffer `s`, which owns its staging buffers.
fn transfer(op: Op, s: Staged, count: c_int, datatype: Handle, tag: c_int, comm: Handle, stream: &Arc<Stream>, name: &'static str) -> Arc<Transfer> {
    let mut t = Transfer::new(op, s.host, count, datatype, tag, comm, stream.clone(), name);
    t.device = s.device;
    t.state().leases = s.leases;
    Arc::new(t)
}

/// Notes a request of a stream communicator on NCCL, which the wait calls hand to its matching.
fn held_matched(rc: c_int, request: Option<*mut c_void>, m: &Arc<matched::Matched>) -> c_int {
    if let (0, Some(r)) = (rc, request) {
        // SAFETY: the request the call just wrote.
        let h = unsafe { abi::get().handle_at(r) };
        lock(&REQUESTS).get_or_insert_with(HashMap::new).insert(abi::get().key(h), Held::Matched(m.clone()));
    }
    rc
}

/// `MPIX_Send_enqueue`, and with `request` `MPIX_Isend_enqueue`.
pub fn send(name: &'static str, buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: Option<*mut c_void>) -> c_int {
    let a = match attached(name, comm) {
        Ok(a) => a,
        Err(rc) => return rc,
    };
    if let Some(m) = &a.matched {
        if let Some(rc) = m.send(name, buf, count, datatype, dest, tag, comm, request) {
            return held_matched(rc, request, m);
        }
    }
    let stream = a.stream;
    if immediately() {
        let rc = immediate::send(name, &stream, buf, count, datatype, dest, tag, comm, request);
        return held_immediately(rc, request);
    }
    let staged = match stage(name, comm, &stream, buf.cast_mut(), count, datatype, true) {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    let device = staged.device.is_some();
    let t = transfer(Op::Send { dest }, staged, count, datatype, tag, comm, &stream, name);
    if let Some(out) = request {
        return posted(name, comm, &stream, t, out);
    }
    // A device buffer is in the staging buffer once the stream passes the job's mark: the
    // stream waits only for the send to start. The program's host memory it must not touch
    // before the send is done.
    let (x, s) = (t.clone(), stream.clone());
    queue(
        name,
        comm,
        &stream,
        move |n| match device {
            true => vec![Work::Start(x), Work::Release { stream: s, number: n }],
            false => vec![Work::Start(x.clone()), Work::Finish { transfers: vec![x], statuses: Statuses::Ignore, number: n }],
        },
        true,
    )
}

/// `MPIX_Recv_enqueue`, and with `request` `MPIX_Irecv_enqueue`.
pub fn recv(name: &'static str, buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status: *mut c_void, request: Option<*mut c_void>) -> c_int {
    let a = match attached(name, comm) {
        Ok(a) => a,
        Err(rc) => return rc,
    };
    if let Some(m) = &a.matched {
        if let Some(rc) = m.recv(name, buf, count, datatype, source, tag, comm, status, request) {
            return held_matched(rc, request, m);
        }
    }
    let stream = a.stream;
    if immediately() {
        let rc = immediate::recv(name, &stream, buf, count, datatype, source, tag, comm, status, request);
        return held_immediately(rc, request);
    }
    let staged = match stage(name, comm, &stream, buf, count, datatype, false) {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    let t = transfer(Op::Recv { source }, staged, count, datatype, tag, comm, &stream, name);
    if let Some(out) = request {
        return posted(name, comm, &stream, t, out);
    }
    let x = t.clone();
    queue(name, comm, &stream, move |n| vec![Work::Start(x.clone()), Work::Finish { transfers: vec![x], statuses: Statuses::One(status), number: n }], true)
}

/// What a request of an enqueue call stands for.
enum Held {
    /// A transfer of the progress thread's, behind a generalized request.
    Ordered(Arc<Transfer>),
    /// MPI's request from a call made at once (`immediate`), through cudampi's entry point;
    /// how many the program holds under that handle, which MPI may share among requests it
    /// completed at their post.
    Immediate(usize),
    /// A request of a stream communicator on NCCL (`matched`): complete once its matching
    /// has queued its operation, or, for a message through MPI, cudampi's own.
    Matched(Arc<matched::Matched>),
}

/// The requests the program holds from `MPIX_Isend_enqueue` and `MPIX_Irecv_enqueue`.
static REQUESTS: Mutex<Option<HashMap<Handle, Held>>> = Mutex::new(None);

/// Notes the request a call made at once returned, so that the wait calls know it.
fn held_immediately(rc: c_int, request: Option<*mut c_void>) -> c_int {
    if let (0, Some(r)) = (rc, request) {
        // SAFETY: the request the call just wrote.
        let h = unsafe { abi::get().handle_at(r) };
        // MPICH hands out one built-in request for every send it completed at its post, in
        // every thread: the key counts the requests the program holds under it.
        let mut map = lock(&REQUESTS);
        match map.get_or_insert_with(HashMap::new).entry(abi::get().key(h)) {
            Entry::Occupied(mut e) => match e.get_mut() {
                Held::Immediate(n) => *n += 1,
                other => *other = Held::Immediate(1),
            },
            Entry::Vacant(e) => {
                e.insert(Held::Immediate(1));
            }
        }
    }
    rc
}

unsafe extern "C" fn query(_: *mut c_void, status: *mut c_void) -> c_int {
    if let Some(p) = real::pmpi() {
        // SAFETY: the status MPI passes.
        unsafe {
            (p.status_set_elements_x)(status, abi::get().byte, 0);
            (p.status_set_cancelled)(status, 0);
        }
    }
    0
}

unsafe extern "C" fn nothing(_: *mut c_void) -> c_int {
    0
}

unsafe extern "C" fn no_cancel(_: *mut c_void, _: c_int) -> c_int {
    0
}

/// Starts `t` in the stream's order and gives the program a request for it: a generalized
/// request of the library, complete when the transfer is.
fn posted(name: &'static str, comm: Handle, stream: &Arc<Stream>, t: Arc<Transfer>, out: *mut c_void) -> c_int {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return abi.err_intern };
    if out.is_null() {
        return errors::raise(Some(comm), abi.err_request);
    }
    let mut g: Handle = abi.request_null;
    // SAFETY: valid callbacks; an out-pointer the size of every family's request.
    let rc = unsafe { (p.grequest_start)(query, nothing, no_cancel, std::ptr::null_mut(), (&mut g as *mut Handle).cast()) };
    if rc != 0 {
        return errors::raise(Some(comm), rc);
    }
    t.state().grequest = Some(g);
    let (x, s) = (t.clone(), stream.clone());
    // The stream goes on once the operation is started, as after MPI_Isend.
    let rc = queue(name, comm, stream, move |n| vec![Work::Start(x), Work::Release { stream: s, number: n }], true);
    if rc != 0 {
        // SAFETY: the request made above, never handed out.
        unsafe {
            (p.grequest_complete)(g);
            (p.request_free)((&mut g as *mut Handle).cast());
        }
        return rc;
    }
    lock(&REQUESTS).get_or_insert_with(HashMap::new).insert(abi.key(g), Held::Ordered(t));
    // SAFETY: the program's request, checked for null.
    unsafe { abi.set_handle(out, g) };
    0
}

/// `MPIX_Wait_enqueue` (`count` 1, one status) and `MPIX_Waitall_enqueue` (`all`): the program's
/// stream waits until the operations are done, in its order.
pub fn wait(name: &'static str, count: c_int, requests: *mut c_void, statuses: *mut c_void, all: bool) -> c_int {
    let abi = abi::get();
    if count < 0 || (count > 0 && requests.is_null()) {
        log::error(format_args!("{name}: a negative count or a null request array"));
        return errors::raise(None, abi.err_arg);
    }
    let mut found = Vec::with_capacity(count as usize);
    let mut immediate = 0;
    let mut held: Vec<(Arc<matched::Matched>, Vec<Handle>)> = Vec::new();
    {
        let mut map = lock(&REQUESTS);
        let map = map.get_or_insert_with(HashMap::new);
        for i in 0..count as usize {
            // SAFETY: the program's array of `count` requests.
            let h = unsafe { abi.request_at(requests, i) };
            if abi.same(h, abi.request_null) {
                continue;
            }
            match map.get(&abi.key(h)) {
                Some(Held::Ordered(t)) => found.push(t.clone()),
                Some(Held::Immediate(_)) => immediate += 1,
                Some(Held::Matched(m)) => {
                    immediate += 1;
                    match held.iter_mut().find(|(x, _)| Arc::ptr_eq(x, m)) {
                        Some((_, keys)) => keys.push(abi.key(h)),
                        None => held.push((m.clone(), vec![abi.key(h)])),
                    }
                }
                None => {
                    log::error(format_args!("{name}: request {i} was not made by MPIX_Isend_enqueue or MPIX_Irecv_enqueue"));
                    return errors::raise(None, abi.err_request);
                }
            }
        }
        if immediate > 0 && !found.is_empty() {
            log::error(format_args!("{name}: the requests were made in different modes (CUDAMPI_ENQUEUE changed)"));
            return errors::raise(None, abi.err_request);
        }
        if let Some(first) = found.first() {
            if found.iter().any(|t| !Arc::ptr_eq(&t.stream, &first.stream)) {
                log::error(format_args!("{name}: the requests belong to different streams"));
                return errors::raise(None, abi.err_request);
            }
        }
        for i in 0..count as usize {
            // SAFETY: as above.
            let key = abi.key(unsafe { abi.request_at(requests, i) });
            if let Some(Held::Immediate(n)) = map.get_mut(&key) {
                if *n > 1 {
                    *n -= 1;
                    continue;
                }
            }
            map.remove(&key);
        }
    }
    // A matching that fails completes its requests with the error, which the wait reports.
    let flushed = held.iter().map(|(m, keys)| m.flush(name, keys)).find(|&rc| rc != 0).unwrap_or(0);
    if immediate > 0 {
        // One request's MPI_STATUS_IGNORE is the array's MPI_STATUSES_IGNORE.
        let statuses = if !all && abi.is_status_ignore(statuses) { abi.statuses_ignore as *mut c_void } else { statuses };
        let rc = immediate::wait(count, requests, statuses);
        return if rc != 0 { rc } else { flushed };
    }
    for i in 0..count as usize {
        // SAFETY: as above.
        unsafe { abi.set_request_null(requests, i) };
    }
    let statuses = match (all, statuses) {
        (true, s) if abi.is_statuses_ignore(s) => Statuses::Ignore,
        (true, s) => Statuses::Array(s),
        (false, s) => Statuses::One(s),
    };
    let Some(first) = found.first() else { return 0 };
    let (stream, comm) = (first.stream.clone(), first.comm);
    queue(name, comm, &stream, move |n| vec![Work::Finish { transfers: found, statuses, number: n }], true)
}

/// `MPIX_Allreduce_enqueue`: on NCCL on the program's stream where the collectives' engine
/// runs it, else through the progress thread.
pub fn allreduce(name: &'static str, send: *const c_void, recv: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle) -> c_int {
    let abi = abi::get();
    let stream = match lane_of(name, comm) {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    let Some(lane) = stream.lane.as_ref() else { return abi.err_intern };
    let job = crate::engine::Job::Allreduce { send, recv, count: count as i64, datatype, op };
    if let Some(rc) = crate::engine::enqueue(name, comm, &job, lane.stream) {
        return rc;
    }
    if immediately() {
        return immediate::allreduce(name, &stream, send, recv, count, datatype, op, comm);
    }
    let in_place = abi.is_in_place(send);
    let out = match stage(name, comm, &stream, recv, count, datatype, in_place) {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    let input = match stage(name, comm, &stream, send.cast_mut(), count, datatype, true) {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    let x = transfer(Op::Allreduce { send: input.host, op }, out, count, datatype, 0, comm, &stream, name);
    x.state().leases.extend(input.leases);
    queue(name, comm, &stream, move |n| vec![Work::Start(x.clone()), Work::Finish { transfers: vec![x], statuses: Statuses::Ignore, number: n }], true)
}

/// Before the library's `MPI_Finalize`: the progress thread finishes what the streams have
/// released and stops; the streams the program did not free are closed.
pub fn finalize() {
    matched::finalize();
    progress::stop();
    lock(&STREAMS).clear();
    lock(&REQUESTS).take();
    for s in lock(&ALL).drain(..).filter_map(|w| w.upgrade()) {
        if let Some(lane) = &s.lane {
            lane.close();
        }
    }
    close_gone();
}
