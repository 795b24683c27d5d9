//! The fast paths for device messages between ranks that both run cudampi, on unless turned
//! off: GPU to GPU over CUDA IPC inside a node (`CUDAMPI_IPC`), and staging in chunks that
//! overlap the transfer (`CUDAMPI_PIPELINE`, `pipeline`).
//!
//! For IPC the sender sends, in place of the data, an envelope with the program's own
//! communicator, destination and tag, naming either the program's own buffer (`direct`: the
//! send completes once the receiver has copied, as a slot in shared memory says, `claims`) or
//! a copy in device memory of its own that peers can map (`exported`: the send is then
//! complete). The envelope is
//! matched by whatever receive MPI's rules pick, so the order of messages, wildcards and
//! cancellation of unmatched receives stay MPI's own. When a receive completes with an envelope,
//! cudampi maps the sender's buffer (`imported`), copies the data to the receive buffer (device
//! or host), sets the status to the true size, and releases the buffer.
//!
//! A chunked message's envelope is matched the same way and announces the chunks that follow
//! on a private communicator. Probes look inside envelope-sized messages (`held`).
//!
//! Both ends must agree: the handshake at `MPI_Init` (`peers`) stops a job whose ranks do not
//! all run cudampi with the same paths, and tells which ranks share a node and can open each
//! other's handles. Anything else (a rank with the paths off, a GPU the receiver cannot see, a
//! datatype with gaps, a full pool) is staged through host memory as before.
//!
//! This layer may use `staging`, `mpi`, `cuda` and `base`. The handlers offer it device sends
//! and probes; the request table (above) keeps the envelope a nonblocking send still reads and
//! hands a completed host receive to [`host_received`]. What it needs of the layers above comes
//! as function values at [`init`] (the receives in flight, [`Waiting`], which `lifecycle` takes
//! from the request table), and it hands staging what brings the data of an envelope that lands
//! in a staged receive ([`stage::Envelopes`]).

mod claims;
mod direct;
mod envelope;
mod exported;
pub mod held;
mod imported;
mod patience;
mod peers;
mod pipeline;
mod pushed;
mod queued;

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use self::envelope::Envelope;
use crate::base::{config, log, stats};
use crate::cuda::{self, Device, InContext, Location};
use crate::mpi::abi::{self, Handle};
use crate::mpi::{datatype, errors, real};
use crate::staging::stage::{self, received_bytes, Envelopes, Window};

pub use envelope::{BYTES as ENVELOPE_BYTES, TOKEN_BYTES};
pub use imported::LAZY_ENABLE_PEER_ACCESS;
pub use peers::{device_token, node_id};
pub use pipeline::Waiting;
pub use pushed::{Door, Landed, Push};
pub use queued::{at as queue_at, begin as queue_begin, end as queue_end, flush as queue_flush, pending as queue_pending};

/// A peer may send this process envelopes, so receives look at what arrived.
static RECEIVING: AtomicBool = AtomicBool::new(false);
/// This process may send envelopes.
static SENDING: AtomicBool = AtomicBool::new(false);

/// Whether every process of the intracommunicator `comm` is this one or one of this node that
/// takes IPC with it, from the records of `MPI_Init` alone: every process answers alike, with
/// no call to talk. False without records (`CUDAMPI_IPC=0` and `CUDAMPI_PIPELINE=0`, one rank).
pub fn node_mates(comm: Handle) -> bool {
    let (Some(p), Some(peers)) = (real::pmpi(), peers::get()) else { return false };
    let (mut n, mut inter) = (0, 0);
    // SAFETY: the caller's communicator; valid out-pointers.
    if unsafe { (p.comm_test_inter)(comm, &mut inter) } != 0 || inter != 0 || unsafe { (p.comm_size)(comm, &mut n) } != 0 {
        return false;
    }
    (0..n).all(|r| peers.world_rank(comm, r).is_some_and(|w| peers.maps_with(w)))
}

#[inline(always)]
pub fn receiving() -> bool {
    RECEIVING.load(Relaxed)
}

#[inline(always)]
pub fn sending() -> bool {
    SENDING.load(Relaxed)
}

/// Whether device messages of `len` bytes to this process come as envelopes from every rank
/// that sends them from device memory (chunks reach any rank; IPC only those of the node):
/// a receive of that size then needs its staging buffer only for the envelope.
pub fn announced(len: usize) -> bool {
    let cfg = config::get();
    receiving() && cfg.pipeline && len >= cfg.pipeline_bytes
}

/// The smallest device receive an envelope may reach (`peers::Peers::smallest_envelope`); 0
/// until known.
static SMALLEST: AtomicUsize = AtomicUsize::new(0);

/// Whether a device receive of `len` bytes may get an envelope: the message is at least as
/// large as the smallest that a fast path takes from some rank to this one (`offer`). On a GPU
/// two ranks share, IPC between them takes messages from `CUDAMPI_IPC_SAME_GPU_BYTES` on, so
/// smaller receives complete as staged ones do, in the real completion call.
pub fn may_get_envelope(len: usize) -> bool {
    if !receiving() {
        return false;
    }
    let mut smallest = SMALLEST.load(Relaxed);
    if smallest == 0 {
        let Some(p) = peers::get() else { return false };
        smallest = envelope::BYTES.max(p.smallest_envelope());
        // A device receive has found the driver, which tells whether the node has one GPU.
        if crate::cuda::driver::get().is_some() {
            SMALLEST.store(smallest, Relaxed);
        }
    }
    len >= smallest
}

/// After the library's `MPI_Init`: every rank takes part in the handshake, which stops a job
/// whose ranks do not all run cudampi with the same fast paths. `waiting` lists the device
/// receives in flight, which chunks may begin before their completion call.
pub fn init(waiting: Waiting) {
    stage::envelopes(Envelopes { announced, landed, landed_packed, bytes: ENVELOPE_BYTES });
    peers::handshake();
    if peers::get().is_none() {
        return;
    }
    pipeline::init(waiting);
    if let Some(p) = peers::get() {
        if config::get().ipc {
            claims::setup(p);
        }
        if p.node_shared() {
            crate::cuda::signal::node_shared();
        }
        if p.one_visible_gpu_shared() {
            crate::cuda::signal::gpu_shared_by_ranks();
        }
        let on = p.may_receive();
        RECEIVING.store(on, Relaxed);
        SENDING.store(on, Relaxed);
    }
}

/// Before the library's `MPI_Finalize`: once every rank is here, no receiver still reads an
/// exported buffer.
pub fn finalize() {
    let Some(peers) = peers::get() else { return };
    RECEIVING.store(false, Relaxed);
    SENDING.store(false, Relaxed);
    pipeline::finish();
    if let Some(p) = real::pmpi() {
        // SAFETY: the private communicator; every rank calls MPI_Finalize.
        unsafe { (p.barrier)(peers.shadow) };
    }
    // The MPI's unexpected queue must hold nothing of cudampi's when the job ends (MPICH over
    // UCX prints a line for each such message at its finalize).
    exported::take_releases(std::time::Duration::from_secs(1));
    drop_unreceived(peers);
    held::clear();
    direct::finalizing();
    imported::release_all();
    direct::release_all();
    exported::release_all();
    peers.free();
}

/// Receives and drops what arrived on the private communicator that nobody will take (the
/// release receive is still posted and matches releases first), counting it.
fn drop_unreceived(peers: &peers::Peers) {
    let Some(p) = real::pmpi() else { return };
    let abi = abi::get();
    loop {
        let (mut flag, mut status) = (0, abi::Status::zeroed());
        // SAFETY: the private communicator; a status of our own.
        if unsafe { (p.iprobe)(abi.any_source, abi.any_tag, peers.shadow, &mut flag, status.as_mut_ptr()) } != 0 || flag == 0 {
            return;
        }
        let Some(len) = received_bytes(status.as_mut_ptr()) else { return };
        // SAFETY: the status iprobe filled.
        let (source, tag) = unsafe { abi.status_source_tag(status.as_mut_ptr()) };
        let mut sink = vec![0u8; len.max(1)];
        let mut req: Handle = 0;
        // SAFETY: `len` bytes of our own buffer, kept until the receive completes; the message
        // just probed.
        let rc = unsafe {
            match (p.irecv)(sink.as_mut_ptr().cast(), len as c_int, abi.byte, source, tag, peers.shadow, &mut req) {
                0 => (p.wait)((&mut req as *mut Handle).cast(), status.as_mut_ptr()),
                rc => rc,
            }
        };
        if rc != 0 {
            return;
        }
        stats::add(&stats::OWN_UNRECEIVED, 1);
        if config::get().debug {
            log::debug(format_args!("MPI_Finalize: dropped a message of {len} bytes from rank {source} (tag {tag}) that nothing of cudampi's took"));
        }
    }
}

/// Exported bytes held and buffers out with receivers, for statistics.
pub fn usage() -> (usize, usize) {
    exported::usage()
}

/// A device send taking a fast path: send `envelope()` (`ENVELOPE_BYTES` of `MPI_BYTE`) in
/// place of the data, then give the result to [`Offer::sent`].
pub enum Offer {
    /// The data already sits in an exported buffer.
    Ipc(*const c_void),
    /// The receiver copies the data from the program's buffer; the send completes when it has.
    Direct(direct::Send),
    /// The data follows in chunks once the envelope is sent.
    Chunks(pipeline::Outgoing),
}

impl Offer {
    pub fn envelope(&self) -> *const c_void {
        match self {
            Offer::Ipc(e) => *e,
            Offer::Direct(d) => d.envelope(),
            Offer::Chunks(out) => out.envelope(),
        }
    }

    /// The send of the envelope returned `rc`: sends the chunks that follow it. A chunked
    /// message's envelope comes back when its send was posted: a nonblocking send must keep it
    /// until the send completes (an IPC envelope stays with its exported block instead). A
    /// direct message comes back as well, and dropping it completes the send: a blocking send
    /// drops it at once, a nonblocking one when its request completes.
    pub fn sent(self, name: &'static str, rc: c_int, comm: Handle) -> (c_int, Option<Kept>) {
        self.sent_as(name, rc, comm, false)
    }

    /// [`Offer::sent`] for a blocking send, which drives its chunks' sends to completion
    /// before it returns (`pipeline::Outgoing::settle`); a buffered one does not.
    pub fn sent_blocking(self, name: &'static str, rc: c_int, comm: Handle) -> c_int {
        let settle = !buffered(name);
        self.sent_as(name, rc, comm, settle).0
    }

    fn sent_as(self, name: &'static str, rc: c_int, comm: Handle, settle: bool) -> (c_int, Option<Kept>) {
        match self {
            Offer::Chunks(out) if rc == 0 => {
                let (dev, src, bytes) = out.source();
                let (streamed, envelope) = out.stream(settle);
                let rc = match streamed {
                    Ok(()) => 0,
                    Err(e) => errors::cuda(name, Some(comm), e, src, bytes, &dev),
                };
                (rc, Some(Kept::Envelope(envelope)))
            }
            Offer::Direct(mut d) if rc == 0 => match d.publish() {
                Ok(()) => (rc, Some(Kept::Direct(d))),
                Err(e) => {
                    let (dev, src, bytes) = d.source();
                    (errors::cuda(name, Some(comm), e, src, bytes, &dev), None)
                }
            },
            Offer::Direct(d) => {
                d.unsent();
                (rc, None)
            }
            _ => (rc, None),
        }
    }
}

/// What a send in flight still needs: the envelope it reads, or the direct message it waits on.
pub enum Kept {
    Envelope(#[allow(dead_code)] Box<[u8; envelope::BYTES]>),
    Direct(#[allow(dead_code)] direct::Send),
}

impl Kept {
    /// Whether the send it belongs to may complete now without waiting for its receiver.
    pub fn settled(&self) -> bool {
        match self {
            Kept::Envelope(_) => true,
            Kept::Direct(d) => d.settled(),
        }
    }

    /// A send from the program's buffer, which completes only once its receiver has copied.
    pub fn is_direct(&self) -> bool {
        matches!(self, Kept::Direct(_))
    }

    /// Completes the send now if it is [`settled`](Kept::settled): a call that reports it
    /// complete without freeing its request (`MPI_Request_get_status`) must not leave the
    /// program's buffer to a receiver still to come.
    pub fn finish_settled(&mut self) {
        if let Kept::Direct(d) = self {
            if d.settled() {
                d.finish(false);
            }
        }
    }
}

/// A completion call that must not wait (`MPI_Test`) found a send still waiting for its
/// receiver: lands meanwhile what peers sent this rank, as a waiting send does.
pub fn progress() {
    pipeline::land_meanwhile();
}

/// Buffered sends must complete without their receiver: never from the program's buffer.
fn buffered(name: &str) -> bool {
    name.as_bytes().windows(5).any(|w| w.eq_ignore_ascii_case(b"bsend"))
}

/// `MPI_Isend` and its kin (the Fortran names too).
fn nonblocking(name: &str) -> bool {
    name.as_bytes().get(4).is_some_and(|c| c.eq_ignore_ascii_case(&b'i'))
}

/// How long a blocking send looks for its receiver to start waiting: in a ping-pong the peer
/// enters its receive just after this rank's last message to it completed.
const AWAIT_SPIN: std::time::Duration = std::time::Duration::from_micros(2);

/// Whether world rank `dest` waits in a receive for a message with `tag` from this rank; a
/// blocking send looks for [`AWAIT_SPIN`].
fn awaited(peers: &peers::Peers, dest: c_int, tag: c_int, blocking: bool) -> bool {
    let Some(pid) = peers.pid(dest) else { return false };
    let (me, tag) = (peers.rank as u32, tag as u32);
    if claims::awaits(pid, me, tag) {
        return true;
    }
    if !blocking {
        return false;
    }
    let start = std::time::Instant::now();
    while start.elapsed() < AWAIT_SPIN {
        if claims::awaits(pid, me, tag) {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}

/// While alive, this rank's senders on the node see it waiting in a receive from `source` with
/// `tag` (any rank for `MPI_ANY_SOURCE`, and where the world rank is not at hand without asking
/// MPI; any tag for `MPI_ANY_TAG`): they may send it small device messages over IPC
/// (`CUDAMPI_IPC_AWAITED_BYTES`). The communicator is not told: a message of the same source and
/// tag on another one goes from the sender's buffer all the same, and is withdrawn if the
/// receiver does not take it at once (`direct::AWAITED_PATIENCE`).
pub fn listening(comm: Option<Handle>, source: c_int, tag: c_int) -> Option<claims::Listening> {
    if !receiving() {
        return None;
    }
    let abi = abi::get();
    let world = comm.is_some_and(|c| abi.same(c, abi.comm_world)) && source >= 0;
    claims::Listening::new(world.then_some(source as u32), (tag != abi.any_tag).then_some(tag as u32))
}

/// Opens a door onto a blocking device receive smaller than an envelope (`pushed`): a sender
/// on another GPU of the node may write the message straight into the buffer meanwhile.
pub fn door(comm: Option<Handle>, source: c_int, tag: c_int, dev: &Device, user: *mut c_void, len: usize) -> Option<Door> {
    pushed::open(comm, source, tag, dev, user, len)
}

/// A staged device send smaller than an envelope whose receiver waits behind an open door:
/// its bytes are on their way into the receiver's buffer (`pushed`).
pub fn push(buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) -> Option<Push> {
    pushed::offer(buf, count, datatype, dest, tag, comm)
}

/// Offers a device send to the fast paths: `Some` when it takes one.
pub fn offer(name: &'static str, buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) -> Option<Offer> {
    let peers = peers::get()?;
    let abi = abi::get();
    if count <= 0 || dest == abi.proc_null || abi.same(datatype, abi.datatype_null) {
        return None;
    }
    let t = datatype::query(datatype).ok()?;
    // Packed order is memory order only for predefined datatypes.
    if !t.named {
        return None;
    }
    let span = t.span(count).ok()?;
    let cfg = config::get();
    if span.len < envelope::BYTES.max(cfg.ipc_awaited_from(false).min(cfg.pipeline_bytes)) {
        return None;
    }
    let world = peers.world_rank(comm, dest)?;
    let chunks = span.len >= cfg.pipeline_bytes && peers.pipelines(world);
    let shared = || peers.shares_gpu(world) || crate::cuda::signal::gpu_shared();
    // After the sizes: a message no path takes is staged, which asks the driver where it lies
    // anyway. (Before the driver is loaded, the GPU does not count as shared yet: the bounds
    // here are never above the ones below.)
    if !chunks && span.len < cfg.ipc_awaited_from(shared()) {
        return None;
    }
    let direct = cfg.ipc_direct && !buffered(name);
    // Below the IPC size only a receiver that waits for the message, and copies it at once,
    // gets it from the program's buffer; for the others it stays an eager, staged message.
    let small = !chunks && span.len < cfg.ipc_from(shared());
    if small && !(direct && world != peers.rank && peers.maps_with(world) && awaited(peers, world, tag, !nonblocking(name))) {
        return None;
    }
    let Location::Device(dev) = cuda::locate(buf) else { return None };
    let src = buf.cast::<u8>().wrapping_offset(span.offset as isize).cast();
    let token = peers::device_token(dev.ordinal);
    let ipc_from = cfg.ipc_from(shared());
    // The receiver copies from the program's buffer; `awaited`: it waits for this message.
    let from_buffer = |awaited: bool| {
        let d = direct::offer(&dev, src, span.len, peers.rank, token, world, awaited)?;
        if d.is_ok() {
            stats::device_call(name);
            stats::add(&stats::IPC_BYTES_SENT, span.len);
            stats::add(&stats::IPC_BYTES_DIRECT, span.len);
            if cfg.debug {
                let to = if awaited { ", to a receiver waiting for it" } else { "" };
                log::debug(format_args!("{name}: device buffer {buf:p} (GPU {}), {} bytes over CUDA IPC from the buffer itself{to}", dev.ordinal, span.len));
            }
        }
        Some(d.map(Offer::Direct))
    };
    if small {
        return match peers.can_map(world, &token) {
            true => from_buffer(true).and_then(Result::ok),
            false => None,
        };
    }
    if span.len >= ipc_from && peers.can_map(world, &token) {
        if direct {
            match from_buffer(false) {
                Some(Ok(offer)) => return Some(offer),
                Some(Err(e)) => log::warn(format_args!("{name}: {} failed with {}; copying the message for IPC", e.call, e.name())),
                None => {}
            }
        }
        match exported::offer(&dev, src, span.len, peers.rank, token) {
            Some(Ok(out)) => {
                stats::device_call(name);
                stats::add(&stats::IPC_BYTES_SENT, span.len);
                if cfg.debug {
                    log::debug(format_args!("{name}: device buffer {buf:p} (GPU {}), {} bytes over CUDA IPC", dev.ordinal, span.len));
                }
                return Some(Offer::Ipc(out.envelope));
            }
            Some(Err(e)) => log::warn(format_args!("{name}: {} failed with {}; staging the message through host memory", e.call, e.name())),
            None => stats::add(&stats::IPC_FALLBACKS, 1),
        }
    }
    if chunks {
        stats::device_call(name);
        if cfg.debug {
            log::debug(format_args!("{name}: device buffer {buf:p} (GPU {}), {} bytes in chunks", dev.ordinal, span.len));
        }
        return Some(Offer::Chunks(pipeline::offer(&dev, src, span.len, peers.rank, world)));
    }
    None
}

/// Where a completed receive put what arrived, and where its data belongs.
pub struct Landing<'a> {
    /// Host memory holding the message as MPI wrote it: the staging buffer or the program's
    /// own host buffer, at the first byte of the datatype's span.
    pub at: *mut c_void,
    /// The datatype's byte runs within the span when it has gaps, in the order the message
    /// fills them (a staged receive with the datatype's blocks), or sorted.
    pub runs: Option<&'a [(usize, usize)]>,
    /// Bytes the receive accepts.
    pub capacity: usize,
    /// The device span the data belongs in; `None` when `at` is its final place.
    pub device: Option<(Device, *mut c_void)>,
}

/// A staged receive completed (see [`stage::Envelopes`]).
fn landed(name: &'static str, comm: Option<Handle>, status: *mut c_void, w: Window, runs: Option<&[(usize, usize)]>) -> Option<Result<(), c_int>> {
    if !receiving() || status.is_null() {
        return None;
    }
    let capacity = runs.map(|r| r.iter().map(|x| x.1).sum()).unwrap_or(w.len);
    incoming(name, comm, status, Landing { at: w.host, runs, capacity, device: Some((w.dev, w.user)) })
}

/// A staged receive of a packed payload completed (see [`stage::Envelopes`]).
fn landed_packed(name: &'static str, comm: Option<Handle>, status: *mut c_void, host: *mut c_void, capacity: usize) -> Option<Result<(), c_int>> {
    if !receiving() || status.is_null() {
        return None;
    }
    incoming(name, comm, status, Landing { at: host, runs: None, capacity, device: None })
}

/// If the receive described by `status` got an envelope, brings the data where it belongs and
/// sets the status to the message's true size. `None`: an ordinary message.
pub fn incoming(name: &'static str, comm: Option<Handle>, status: *mut c_void, to: Landing) -> Option<Result<(), c_int>> {
    if status.is_null() || received_bytes(status)? != envelope::BYTES {
        return None;
    }
    let mut head = [0u8; envelope::BYTES];
    gather(&mut head, to.at, to.runs);
    // SAFETY: head holds BYTES bytes.
    let e = unsafe { Envelope::read(head.as_ptr().cast()) }?;
    let abi = abi::get();
    // A direct message is the receiver's to copy from the sender's buffer, unless the sender
    // has moved it to exported memory meanwhile: it then lands as an IPC message.
    let mut taken = None;
    let e = match e.kind {
        envelope::DIRECT => match direct::claim(&e) {
            Some(direct::Source::Taken(t)) => {
                taken = Some(t);
                e
            }
            Some(direct::Source::Moved(moved)) => moved,
            None => {
                log::error(format_args!("{name}: the sender of a {}-byte device message could not keep it for this receive", e.bytes));
                return Some(Err(errors::raise(comm, abi.err_other)));
            }
        },
        _ => e,
    };
    let bytes = e.bytes as usize;
    // A completion call's direct copies into device memory run back to back (`queued`).
    let queue = match (&taken, to.runs, to.device) {
        (Some(_), None, Some(_)) => queued::on(),
        _ => false,
    };
    if e.kind == envelope::CHUNKS {
        // Its chunks come from a sender that may wait for a queued copy.
        queued::flush();
    }
    let result = if bytes > to.capacity {
        log::error(format_args!("{name}: message of {bytes} bytes truncated to {} (MPI_ERR_TRUNCATE); the buffer is left unchanged", to.capacity));
        if e.kind == envelope::CHUNKS {
            // The sender's chunks are taken all the same, and dropped.
            let _ = pipeline::receive(&e, std::ptr::null_mut(), None);
        }
        Err(errors::raise(comm, abi.err_truncate))
    } else {
        land(&e, &to, !queue).map_err(|err| {
            let at = to.device.map(|d| d.1).unwrap_or(to.at);
            errors::cuda(name, comm, err, at, bytes, &to.device.map(|d| d.0).unwrap_or(Device::primary(-1)))
        })
    };
    // Data with gaps and host receives are copied out in a context on the sender's GPU.
    let on_senders_gpu = match (to.runs, to.device) {
        (None, Some((dev, _))) => peers::local_ordinal(&e.token) == Some(dev.ordinal),
        _ => true,
    };
    if let Some(t) = taken {
        match (queue && result.is_ok(), to.device) {
            (true, Some((dev, user))) => queued::push(name, comm, user, bytes, dev, t, on_senders_gpu),
            _ => t.done(on_senders_gpu),
        }
    } else if e.kind == envelope::IPC {
        imported::release(&e, on_senders_gpu);
    }
    if let Some(p) = real::pmpi() {
        // SAFETY: a status MPI filled for this receive.
        unsafe { (p.status_set_elements_x)(status, abi.byte, bytes as i64) };
    }
    if result.is_ok() && e.kind != envelope::CHUNKS {
        stats::add(&stats::IPC_BYTES_RECEIVED, bytes);
    }
    Some(result)
}

/// Without `wait`, a direct copy into device memory is only started.
fn land(e: &Envelope, to: &Landing, wait: bool) -> Result<(), cuda::CudaError> {
    let bytes = e.bytes as usize;
    if e.kind == envelope::CHUNKS {
        return match (to.runs, to.device) {
            (None, device) => pipeline::receive(e, to.at, device),
            (Some(runs), device) => {
                let mut packed = vec![0u8; bytes];
                pipeline::receive(e, packed.as_mut_ptr().cast(), None)?;
                scatter(&packed, to, runs, device)
            }
        };
    }
    let copy = |dst: *mut c_void, dev: Option<Device>| match e.kind {
        envelope::DIRECT => direct::copy(e, dst, dev, bytes, wait),
        _ => imported::copy(e, dst, dev, bytes),
    };
    match (to.runs, to.device) {
        (None, Some((dev, user))) => copy(user, Some(dev)),
        (None, None) => copy(to.at, None),
        (Some(runs), device) => {
            // Packed bytes first, then spread over the datatype's runs.
            let mut packed = vec![0u8; bytes];
            copy(packed.as_mut_ptr().cast(), None)?;
            scatter(&packed, to, runs, device)
        }
    }
}

/// Spreads packed bytes over the datatype's runs at `to.at`, then to the device if there is one.
fn scatter(packed: &[u8], to: &Landing, runs: &[(usize, usize)], device: Option<(Device, *mut c_void)>) -> Result<(), cuda::CudaError> {
    let mut left = packed;
    let mut written = Vec::new();
    for &(at, len) in runs {
        let n = len.min(left.len());
        // SAFETY: each run lies within the span at `to.at`.
        unsafe { std::ptr::copy_nonoverlapping(left.as_ptr(), to.at.cast::<u8>().add(at), n) };
        written.push((at, n));
        left = &left[n..];
        if left.is_empty() {
            break;
        }
    }
    // Runs in packing order may go down as well as up; the copy takes them sorted.
    written.sort_unstable();
    match device {
        Some((dev, user)) => InContext::enter(&dev)?.runs_to_device(user, to.at, &written, None),
        None => Ok(()),
    }
}

/// The first `head.len()` bytes of the message, read along the runs.
fn gather(head: &mut [u8], at: *const c_void, runs: Option<&[(usize, usize)]>) {
    let whole = [(0, head.len())];
    let mut filled = 0;
    for &(off, len) in runs.unwrap_or(&whole) {
        let n = len.min(head.len() - filled);
        // SAFETY: the run lies within the span at `at`, which holds what MPI wrote.
        unsafe { std::ptr::copy_nonoverlapping(at.cast::<u8>().add(off), head[filled..].as_mut_ptr(), n) };
        filled += n;
        if filled == head.len() {
            break;
        }
    }
}


/// A receive into host memory completed (`status` filled by MPI): if it got an envelope, the
/// data is brought into the buffer. Runs and capacity come from the datatype, asked only when
/// an envelope-sized message arrived.
pub fn host_received(name: &'static str, buf: *mut c_void, count: i64, datatype: Handle, comm: Option<Handle>, status: *mut c_void) -> Result<(), c_int> {
    if status.is_null() || received_bytes(status) != Some(envelope::BYTES) {
        return Ok(());
    }
    let Ok(t) = datatype::query(datatype) else { return Ok(()) };
    let Ok(span) = t.span(count) else { return Ok(()) };
    let capacity = (t.size.max(0) as usize).saturating_mul(count.max(0) as usize);
    let mut runs = None;
    if !span.named {
        let Ok(element) = datatype::element_runs(datatype, &t) else { return Ok(()) };
        let mut r = Vec::new();
        datatype::push_runs(&mut r, &element, t.extent, 0, count);
        runs = Some(datatype::normalize(r, span.offset));
    }
    let at = buf.cast::<u8>().wrapping_offset(span.offset as isize).cast();
    match incoming(name, comm, status, Landing { at, runs: runs.as_deref(), capacity, device: None }) {
        Some(Err(e)) => {
            if runs.is_none() {
                // SAFETY: an envelope's bytes arrived at `at`.
                unsafe { envelope::unmark(at) };
            }
            Err(e)
        }
        Some(Ok(())) | None => Ok(()),
    }
}

/// [`host_received`] for a receive into a packed buffer (see [`may_land`]) whose status the
/// program did not ask for: the buffer's first bytes tell an envelope.
#[inline(always)]
pub fn host_received_unseen(name: &'static str, buf: *mut c_void, count: i64, datatype: Handle, comm: Option<Handle>) -> Result<(), c_int> {
    // SAFETY: a completed receive into a buffer of at least an envelope's bytes.
    if !unsafe { envelope::marked(buf) } {
        return Ok(());
    }
    land_unseen(name, buf, count, datatype, comm)
}

#[cold]
fn land_unseen(name: &'static str, buf: *mut c_void, count: i64, datatype: Handle, comm: Option<Handle>) -> Result<(), c_int> {
    let (abi, Some(p)) = (abi::get(), real::pmpi()) else { return Ok(()) };
    let mut status = abi::Status::zeroed();
    // SAFETY: a status of this family, ours.
    unsafe { (p.status_set_elements_x)(status.as_mut_ptr(), abi.byte, envelope::BYTES as i64) };
    host_received(name, buf, count, datatype, comm, status.as_mut_ptr())
}

/// Whether an envelope can land in a host receive of `count` elements (smaller buffers make the
/// library report truncation itself), and if so whether it would lie packed from the buffer's
/// address, where [`host_received_unseen`] can tell it.
#[inline(always)]
pub fn may_land(count: i64, datatype: Handle) -> Option<Packed> {
    if count <= 0 {
        return None;
    }
    let (size, packed) = datatype::size_packed(datatype)?;
    holds_envelope(count, size).then_some(Packed(packed))
}

/// Whether `count` elements of `size` bytes have room for an envelope.
#[inline(always)]
fn holds_envelope(count: i64, size: i64) -> bool {
    size.saturating_mul(count) >= envelope::BYTES as i64
}

/// A host receive of `count` elements that no envelope fits, told from loads alone: MPI itself
/// reports an envelope there as a truncation, so the receive goes to MPI unwatched. `false`
/// where the datatype's size is not known yet (`datatype::size_known`).
#[inline(always)]
pub fn below_envelope(count: i64, datatype: Handle) -> bool {
    count >= 0 && datatype::size_known(datatype).is_some_and(|size| !holds_envelope(count, size))
}

/// A datatype's elements lie back to back from the buffer's address.
#[derive(Clone, Copy)]
pub struct Packed(pub bool);
