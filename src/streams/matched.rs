//! Enqueued sends and receives on NCCL with MPI's matching (`CUDAMPI_ENQUEUE=nccl`).
//!
//! NCCL pairs a sender's k-th send to a rank with that rank's k-th receive from it: no tags, no
//! `MPI_ANY_SOURCE`, and both must name the same count. MPI matches by source and tag, and a
//! receive may be larger than its message. So every send on a stream communicator of this mode
//! first sends an envelope through the library, on a duplicate of the communicator and with the
//! program's tag: the message's number among the sender's messages to that rank, its bytes, and
//! whether its data follows on NCCL or through MPI. A receive takes its envelope with the
//! library's own matching (source, tag, `MPI_ANY_SOURCE`, `MPI_ANY_TAG`), then queues its NCCL
//! receive. NCCL's order is the sender's: when a receive matches a later message than the next
//! one due from that sender, the envelopes before it are taken too (from that sender with any
//! tag, which MPI hands over in the order sent), their data received in turn into device memory
//! of the stream's order, and copied from there by the receives that match them later.
//!
//! Data goes on NCCL when the sender's buffer is memory of the stream's GPU without gaps (to the
//! rank itself, it is copied on the stream at the send instead, since NCCL takes a send to
//! itself only in one group with its receive); into a
//! receive buffer that is not (host memory, another GPU, gaps, a shorter buffer) it lands in
//! such memory first and is copied out once the stream is there, as a blocking call would.
//! Other sends go through MPI, made in the call after the stream (`immediate`).
//!
//! The cost: an envelope per message, and a receive waits in its call until the sender has
//! made its call (not until the sender's stream gets there). A nonblocking receive is matched
//! at the next wait or blocking receive, so that a halo exchange that posts its receives before
//! its sends never waits for itself; the nonblocking calls' NCCL operations go as one group
//! there too, since a receive queued alone would hold the stream until the peer's send, which
//! that peer may queue only after its own receive.

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::immediate;
use super::Stream;
use crate::base::log;
use crate::cuda::ordered::Lane;
use crate::cuda::{self, nccl, Location};
use crate::engine::Peers;
use crate::fastpath::held::{self, Pending};
use crate::mpi::abi::{self, Handle};
use crate::mpi::{datatype, errors, real};

/// What a sender tells the receiver of each message, ahead of its data.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Envelope {
    /// Its place among the sender's messages to this receiver, from 0.
    number: u64,
    bytes: u64,
    /// How the data follows: [`THROUGH_MPI`], [`ON_NCCL`] or [`COPIED`].
    way: u64,
}

/// Through MPI on the stream communicator, with the tag.
const THROUGH_MPI: u64 = 0;
const ON_NCCL: u64 = 1;
/// To the rank itself: copied on the stream into memory of the stream's order, at the send.
/// NCCL takes a send to the rank itself only in one group with its receive, which may come
/// after a wait that lets the program change the send buffer.
const COPIED: u64 = 2;

const ENVELOPE_BYTES: c_int = std::mem::size_of::<Envelope>() as c_int;

/// An envelope taken before the receive it matches; for data on NCCL, the memory of the
/// stream's order that receives it meanwhile.
struct Early {
    source: c_int,
    tag: c_int,
    env: Envelope,
    data: Option<*mut c_void>,
}

/// A nonblocking receive, matched at the next wait or blocking receive.
struct Posted {
    recv: Recv,
    request: Pending,
}

#[derive(Clone, Copy)]
struct Recv {
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
}

impl Recv {
    /// Whether one message could match both receives.
    fn overlaps(&self, other: &Recv) -> bool {
        let abi = abi::get();
        let sources = self.source == other.source || self.source == abi.any_source || other.source == abi.any_source;
        sources && (self.tag == other.tag || self.tag == abi.any_tag || other.tag == abi.any_tag)
    }
}

#[derive(Default)]
struct State {
    /// Per rank: the number of the next message to it.
    sent: Vec<u64>,
    /// Per rank: the number of the next message from it not taken yet (every one before is).
    next: Vec<u64>,
    early: Vec<Early>,
    posted: Vec<Posted>,
    /// NCCL operations for the next group, in call order.
    ops: Vec<nccl::Op>,
    /// After that group: copies out of early messages' memory, which then goes back.
    copies: Vec<(*mut c_void, *mut c_void, usize)>,
    /// Envelopes on their way, with their requests.
    outgoing: Vec<(Handle, Box<Envelope>)>,
    /// The copies of messages to the rank itself not taken yet, by number.
    own: Vec<(u64, *mut c_void)>,
}

/// The matching of one stream communicator whose device messages go on NCCL.
pub struct Matched {
    peers: Arc<Peers>,
    /// This rank in the stream communicator.
    rank: c_int,
    stream: Arc<Stream>,
    /// Where the envelopes go: a duplicate of the stream communicator.
    envelopes: Handle,
    state: Mutex<State>,
}

// SAFETY: the state names the program's memory by address only, and is used under its lock.
unsafe impl Send for Matched {}
unsafe impl Sync for Matched {}

/// Every [`Matched`] made, so that `MPI_Finalize` finishes what the program left.
static ALL: Mutex<Vec<Weak<Matched>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a receive buffer can take from NCCL.
enum Into {
    /// Memory of the stream's GPU, without gaps: NCCL writes it.
    Stream,
    /// Device memory of another GPU, or host memory, without gaps: copied into once received.
    Copied { on_device: bool },
    /// Host memory with gaps: unpacked by the library once received.
    Unpacked,
}

impl Matched {
    /// Sets up matching on `comm`, a stream communicator just made whose ranks all have
    /// `peers`: collective over `comm`.
    pub fn open(name: &'static str, comm: Handle, stream: Arc<Stream>, peers: Arc<Peers>) -> Option<Arc<Matched>> {
        let abi = abi::get();
        let p = real::pmpi()?;
        // The same on every rank: NCCL was agreed on only where every rank has a GPU stream.
        stream.lane.as_ref()?;
        let mut envelopes: Handle = 0;
        // SAFETY: a communicator just made, and an out-pointer of every family's handle size.
        if unsafe { (p.comm_dup)(comm, &mut envelopes) } != 0 {
            log::warn(format_args!("{name}: no communicator for envelopes: the enqueued point-to-point calls go through MPI"));
            return None;
        }
        // SAFETY: cudampi's communicator; a predefined error handler.
        unsafe { (p.comm_set_errhandler)(envelopes, abi.errors_return) };
        let ranks = peers.ranks() as usize;
        let (rank, _) = crate::mpi::comm::rank_size(comm).ok()?;
        let state = State { sent: vec![0; ranks], next: vec![0; ranks], ..State::default() };
        let m = Arc::new(Matched { peers, rank, stream, envelopes, state: Mutex::new(state) });
        let mut all = lock(&ALL);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&m));
        Some(m)
    }

    fn lane(&self) -> &Lane {
        self.stream.lane.as_ref().expect("a stream communicator on NCCL has a GPU stream")
    }

    /// `MPIX_Send_enqueue`, or with `request` `MPIX_Isend_enqueue`; `None` where the call is
    /// not the envelopes' (no peer, a rank or tag the library refuses), to be made as in mode
    /// immediate.
    pub fn send(&self, name: &'static str, buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: Option<*mut c_void>) -> Option<c_int> {
        let abi = abi::get();
        if dest == abi.proc_null || !self.peers.has(dest) || tag < 0 || count < 0 {
            return None;
        }
        let t = datatype::query(datatype).ok()?;
        let bytes = (count as i64).checked_mul(t.size)? as usize;
        let place = (bytes > 0).then(|| cuda::locate(buf));
        // Bad buffers get the error of the call made as it is, and no envelope goes.
        if bytes > 0 && (buf.is_null() || matches!(place, Some(Location::Unreadable))) {
            return None;
        }
        let gpu = self.lane().dev.ordinal;
        let on_nccl = t.packed() && matches!(place, Some(Location::Device(d)) if !d.managed && d.ordinal == gpu);
        let mut st = lock(&self.state);
        reap(&mut st.outgoing);
        let way = match on_nccl {
            true if dest == self.rank => COPIED,
            true => ON_NCCL,
            false => THROUGH_MPI,
        };
        let number = st.sent[dest as usize];
        if way == COPIED {
            let lane = self.lane();
            let copied = lane.alloc(bytes).and_then(|at| lane.copy(at, buf, bytes).map(|()| at));
            match copied {
                Ok(at) => st.own.push((number, at)),
                Err(e) => {
                    log::error(format_args!("{name}: no copy of a message of {bytes} bytes to this rank ({} in {})", e.name(), e.call));
                    return Some(errors::raise(Some(comm), abi.err_no_mem));
                }
            }
        }
        let env = Box::new(Envelope { number, bytes: bytes as u64, way });
        let p = real::pmpi()?;
        let mut r: Handle = abi.request_null;
        // SAFETY: the envelope lives in `outgoing` until the send is done.
        let rc = unsafe { (p.isend)((&*env as *const Envelope).cast(), ENVELOPE_BYTES, abi.byte, dest, tag, self.envelopes, &mut r) };
        if rc != 0 {
            // A tag above the library's bound: the call made as it is gives its error.
            if let Some((_, at)) = st.own.pop().filter(|&(n, _)| n == number) {
                let _ = self.lane().free(at);
            }
            return None;
        }
        st.sent[dest as usize] += 1;
        st.outgoing.push((r, env));
        if !on_nccl {
            if let Err(rc) = self.run(name, &mut st, comm) {
                return Some(rc);
            }
            drop(st);
            return Some(immediate::send(name, &self.stream, buf, count, datatype, dest, tag, comm, request));
        }
        if way == ON_NCCL {
            st.ops.push(nccl::Op::Send { buf, count: bytes, dtype: nccl::DataType::ncclUint8, peer: dest });
        }
        let Some(r) = request else { return Some(self.run(name, &mut st, comm).err().unwrap_or(0)) };
        drop(st);
        let rc = held::completed(r, &status(dest, tag, 0), 0);
        Some(if rc != 0 { errors::raise(Some(comm), rc) } else { 0 })
    }

    /// `MPIX_Recv_enqueue`, or with `request` `MPIX_Irecv_enqueue`; `None` as for [`Matched::send`].
    pub fn recv(&self, name: &'static str, buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status_out: *mut c_void, request: Option<*mut c_void>) -> Option<c_int> {
        let abi = abi::get();
        if source == abi.proc_null || (source != abi.any_source && !self.peers.has(source)) || (tag < 0 && tag != abi.any_tag) || count < 0 {
            return None;
        }
        let t = datatype::query(datatype).ok()?;
        if count > 0 && t.size > 0 && (buf.is_null() || matches!(cuda::locate(buf), Location::Unreadable)) {
            return None;
        }
        let recv = Recv { buf, count, datatype, source, tag, comm };
        if let Some(r) = request {
            let pending = match held::pending(r) {
                Ok(p) => p,
                Err(rc) => return Some(errors::raise(Some(comm), rc)),
            };
            lock(&self.state).posted.push(Posted { recv, request: pending });
            return Some(0);
        }
        let mut st = lock(&self.state);
        // Receives posted earlier that could take its message match first, as MPI orders them.
        self.match_posted(name, &mut st, |p| p.recv.overlaps(&recv));
        let (st_out, rc) = self.receive(name, &mut st, &recv);
        let rc = match self.run(name, &mut st, comm) {
            Err(e) if rc == 0 => e,
            _ => rc,
        };
        if !abi.is_status_ignore(status_out) {
            // SAFETY: the program's status, of its family's size.
            unsafe { std::ptr::copy_nonoverlapping(st_out.0.as_ptr(), status_out.cast::<u8>(), abi.status_size) };
        }
        Some(rc)
    }

    /// `MPIX_Wait(all)_enqueue` on requests of this communicator (`keys`, as `abi::key` gives
    /// them): matches the receives among them and queues what is held, so that the stream
    /// waits for it.
    pub fn flush(&self, name: &'static str, keys: &[Handle]) -> c_int {
        let abi = abi::get();
        let mut st = lock(&self.state);
        self.match_posted(name, &mut st, |p| keys.contains(&abi.key(p.request.handle())));
        let comm = self.envelopes;
        self.run(name, &mut st, comm).err().unwrap_or(0)
    }

    /// Matches the posted receives that `wanted` picks, and those posted before them that
    /// could take the same message, as MPI matches in the order posted; the others stay
    /// posted, so that a receive the program does not wait for yet never waits for its
    /// sender here.
    fn match_posted(&self, name: &'static str, st: &mut State, wanted: impl Fn(&Posted) -> bool) {
        let posted = std::mem::take(&mut st.posted);
        let mut needed: Vec<bool> = posted.iter().map(&wanted).collect();
        for i in (0..posted.len()).rev() {
            if !needed[i] {
                needed[i] = (i + 1..posted.len()).any(|k| needed[k] && posted[i].recv.overlaps(&posted[k].recv));
            }
        }
        for (p, needed) in posted.into_iter().zip(needed) {
            if !needed {
                st.posted.push(p);
                continue;
            }
            let (status, rc) = self.receive(name, st, &p.recv);
            p.request.complete(&status, rc);
        }
    }

    /// Takes the envelope `r` matches and queues or makes the receive of its data; its
    /// status and result.
    fn receive(&self, name: &'static str, st: &mut State, r: &Recv) -> (abi::Status, c_int) {
        let abi = abi::get();
        let (source, tag, env, data) = match self.take(name, st, r) {
            Ok(m) => m,
            Err(rc) => return (abi::Status::zeroed(), errors::raise(Some(r.comm), rc)),
        };
        let bytes = env.bytes as usize;
        if env.way == THROUGH_MPI {
            if let Err(rc) = self.run(name, st, r.comm) {
                return (abi::Status::zeroed(), rc);
            }
            let mut out = abi::Status::zeroed();
            let rc = immediate::recv(name, &self.stream, r.buf, r.count, r.datatype, source, tag, r.comm, out.as_mut_ptr(), None);
            return (out, rc);
        }
        let t = match datatype::query(r.datatype) {
            Ok(t) => t,
            Err(rc) => return (status(source, tag, 0), errors::raise(Some(r.comm), rc)),
        };
        let room = (r.count as i64 * t.size).max(0) as usize;
        let into = match cuda::locate(r.buf) {
            Location::Device(d) if t.packed() && !d.managed && d.ordinal == self.lane().dev.ordinal => Into::Stream,
            Location::Device(_) if t.packed() => Into::Copied { on_device: true },
            Location::Host if t.packed() => Into::Copied { on_device: false },
            Location::Host => Into::Unpacked,
            Location::Device(_) => {
                log::error(format_args!("{name}: a device receive buffer with gaps is not served on NCCL; pack it first"));
                self.drop_data(name, st, source, data, bytes);
                return (status(source, tag, 0), errors::raise(Some(r.comm), abi.err_type));
            }
            Location::Unreadable => {
                self.drop_data(name, st, source, data, bytes);
                return (status(source, tag, 0), errors::unreadable(name, Some(r.comm), r.buf));
            }
        };
        let taken = bytes.min(room);
        let truncated = bytes > room;
        let rc = match (into, data, truncated) {
            (Into::Stream, None, false) => {
                st.ops.push(nccl::Op::Recv { buf: r.buf, count: bytes, dtype: nccl::DataType::ncclUint8, peer: source });
                0
            }
            (Into::Stream, Some(at), false) => {
                st.copies.push((r.buf, at, bytes));
                0
            }
            (into, data, _) => self.received_out(name, st, r, into, source, data, bytes, taken),
        };
        if truncated && rc == 0 {
            log::error(format_args!("{name}: a message of {bytes} bytes from rank {source} (tag {tag}) is longer than the receive buffer ({room} bytes)"));
            return (status(source, tag, taken), errors::raise(Some(r.comm), abi.err_truncate));
        }
        (status(source, tag, taken), rc)
    }

    /// Receives NCCL data into memory of the stream's order (or takes that of an early
    /// message), waits for the stream, and copies `taken` bytes into the receive buffer.
    #[allow(clippy::too_many_arguments)]
    fn received_out(&self, name: &'static str, st: &mut State, r: &Recv, into: Into, source: c_int, data: Option<*mut c_void>, bytes: usize, taken: usize) -> c_int {
        let abi = abi::get();
        let at = match data {
            Some(at) => at,
            None => match self.landing(name, st, source, bytes, r.comm) {
                Ok(at) => at,
                Err(rc) => return rc,
            },
        };
        if let Err(rc) = self.run(name, st, r.comm) {
            return rc;
        }
        let lane = self.lane();
        let done = match into {
            _ if taken == 0 => lane.synchronize().map(|()| 0),
            Into::Stream => lane.fetch(r.buf, true, at, taken).map(|()| 0),
            Into::Copied { on_device } => lane.fetch(r.buf, on_device, at, taken).map(|()| 0),
            Into::Unpacked => {
                let mut host = vec![0u8; taken];
                lane.fetch(host.as_mut_ptr().cast(), false, at, taken).map(|()| unpack(&host, r))
            }
        };
        let _ = lane.free(at);
        match done {
            Ok(0) => 0,
            Ok(rc) => errors::raise(Some(r.comm), rc),
            Err(e) => {
                log::error(format_args!("{name}: the stream failed ({} in {})", e.name(), e.call));
                errors::raise(Some(r.comm), abi.err_other)
            }
        }
    }

    /// Memory of the stream's order for `bytes` of NCCL data from `source`, its receive queued
    /// with the next group.
    fn landing(&self, name: &'static str, st: &mut State, source: c_int, bytes: usize, comm: Handle) -> Result<*mut c_void, c_int> {
        let at = self.lane().alloc(bytes).map_err(|e| {
            log::error(format_args!("{name}: no device memory for a message of {bytes} bytes from rank {source} ({} in {})", e.name(), e.call));
            errors::raise(Some(comm), abi::get().err_no_mem)
        })?;
        st.ops.push(nccl::Op::Recv { buf: at, count: bytes, dtype: nccl::DataType::ncclUint8, peer: source });
        Ok(at)
    }

    /// Receives and drops a message's NCCL data that no buffer can take, so that the next
    /// message of the pair still meets its own receive.
    fn drop_data(&self, name: &'static str, st: &mut State, source: c_int, data: Option<*mut c_void>, bytes: usize) {
        let at = match data {
            Some(at) => Some(at),
            None => self.landing(name, st, source, bytes, self.envelopes).ok(),
        };
        if let Some(at) = at {
            let lane = self.lane();
            if self.run(name, st, self.envelopes).is_ok() {
                let _ = lane.free(at);
            }
        }
    }

    /// The envelope `r` matches, with its source and tag, and the memory its data already
    /// went to, if it came early.
    fn take(&self, name: &'static str, st: &mut State, r: &Recv) -> Result<(c_int, c_int, Envelope, Option<*mut c_void>), c_int> {
        let abi = abi::get();
        let fits = |e: &Early| (r.source == abi.any_source || e.source == r.source) && (r.tag == abi.any_tag || e.tag == r.tag);
        if let Some(i) = st.early.iter().position(fits) {
            let e = st.early.remove(i);
            return Ok((e.source, e.tag, e.env, e.data));
        }
        let (source, tag, env) = self.envelope(r.source, r.tag)?;
        let due = st.next[source as usize];
        if env.number < due {
            log::error(format_args!("{name}: message {} from rank {source} came after {due} (the stream communicator's envelopes are out of step)", env.number));
            return Err(abi.err_intern);
        }
        // The sender's earlier messages come first on NCCL: take them now, in order.
        while st.next[source as usize] < env.number {
            let (_, etag, e) = self.envelope(source, abi.any_tag)?;
            let data = match e.way {
                ON_NCCL => Some(self.landing(name, st, source, e.bytes as usize, r.comm)?),
                COPIED => own_copy(st, e.number),
                _ => None,
            };
            st.early.push(Early { source, tag: etag, env: e, data });
            st.next[source as usize] += 1;
        }
        st.next[source as usize] = env.number + 1;
        let data = if env.way == COPIED { own_copy(st, env.number) } else { None };
        Ok((source, tag, env, data))
    }

    /// Receives the next envelope from `source` with `tag` (either may be MPI's wildcard).
    fn envelope(&self, source: c_int, tag: c_int) -> Result<(c_int, c_int, Envelope), c_int> {
        let abi = abi::get();
        let p = real::pmpi().ok_or(abi.err_intern)?;
        let mut env = Envelope::default();
        let mut st = abi::Status::zeroed();
        // SAFETY: a buffer of one envelope; a full status.
        let rc = unsafe { (p.recv)((&mut env as *mut Envelope).cast(), ENVELOPE_BYTES, abi.byte, source, tag, self.envelopes, st.as_mut_ptr()) };
        if rc != 0 {
            return Err(rc);
        }
        // SAFETY: the status MPI just wrote.
        let (s, t) = unsafe { abi.status_source_tag(st.as_mut_ptr()) };
        Ok((s, t, env))
    }

    /// Queues the held NCCL operations as one group, then the copies out of early messages'
    /// memory and its return.
    fn run(&self, name: &'static str, st: &mut State, comm: Handle) -> Result<(), c_int> {
        let abi = abi::get();
        let lane = self.lane();
        let ops = std::mem::take(&mut st.ops);
        if let Err(why) = self.peers.run(name, &ops, lane.stream) {
            log::error(format_args!("{name}: {why}"));
            return Err(errors::raise(Some(comm), abi.err_other));
        }
        for (dst, src, len) in std::mem::take(&mut st.copies) {
            let copied = lane.copy(dst, src, len).and_then(|()| lane.free(src));
            if let Err(e) = copied {
                log::error(format_args!("{name}: the stream refused a copy ({} in {})", e.name(), e.call));
                return Err(errors::raise(Some(comm), abi.err_other));
            }
        }
        Ok(())
    }

    /// Finishes what is left: the envelopes on their way, the memory of messages no receive
    /// took (`MPI_Comm_free` of the stream communicator, `MPI_Finalize`).
    fn close(&self) {
        let mut st = lock(&self.state);
        let abi = abi::get();
        if let Some(p) = real::pmpi() {
            for (mut r, _env) in st.outgoing.drain(..) {
                // SAFETY: a request of an envelope, whose buffer lives until this returns.
                unsafe { (p.wait)((&mut r as *mut Handle).cast(), abi.status_ignore as *mut c_void) };
            }
        }
        let lane = self.lane();
        let st = &mut *st;
        for at in st.early.drain(..).filter_map(|e| e.data).chain(st.own.drain(..).map(|(_, at)| at)) {
            let _ = lane.free(at);
        }
        for p in st.posted.drain(..) {
            p.request.complete(&abi::Status::zeroed(), abi.err_other);
        }
        st.ops.clear();
        st.copies.clear();
    }
}

impl Drop for Matched {
    fn drop(&mut self) {
        self.close();
        if let Some(p) = real::pmpi() {
            // SAFETY: cudampi's communicator, freed once.
            unsafe { (p.comm_free)(&mut self.envelopes) };
        }
    }
}

/// Takes the copy of the message to this rank numbered `number`.
fn own_copy(st: &mut State, number: u64) -> Option<*mut c_void> {
    let i = st.own.iter().position(|&(n, _)| n == number)?;
    Some(st.own.remove(i).1)
}

/// Forgets the envelope sends that are done.
fn reap(outgoing: &mut Vec<(Handle, Box<Envelope>)>) {
    let Some(p) = real::pmpi() else { return };
    let abi = abi::get();
    outgoing.retain_mut(|(r, _)| {
        let mut done: c_int = 0;
        // SAFETY: a live request of an envelope.
        unsafe { (p.test)((r as *mut Handle).cast(), &mut done, abi.status_ignore as *mut c_void) };
        done == 0
    });
}

/// Unpacks `host`, a message's bytes, into the receive buffer's datatype with the library.
fn unpack(host: &[u8], r: &Recv) -> c_int {
    let Some(p) = real::pmpi() else { return abi::get().err_intern };
    let mut pos: c_int = 0;
    let t = datatype::query(r.datatype).map(|t| t.size.max(1)).unwrap_or(1);
    let count = (host.len() as i64 / t) as c_int;
    // SAFETY: the message's bytes, and the program's host buffer of `count` elements or more.
    unsafe { (p.unpack)(host.as_ptr().cast(), host.len() as c_int, &mut pos, r.buf, count, r.datatype, r.comm) }
}

/// The status of a receive: its source, tag and bytes.
pub fn status(source: c_int, tag: c_int, bytes: usize) -> abi::Status {
    let abi = abi::get();
    let mut st = abi::Status::zeroed();
    // SAFETY: a status of every family's size.
    unsafe { abi.set_status_source_tag(st.as_mut_ptr(), source, tag) };
    if let Some(p) = real::pmpi() {
        // SAFETY: as above; MPI sets the count in its own status.
        unsafe { (p.status_set_elements_x)(st.as_mut_ptr(), abi.byte, bytes as i64) };
    }
    st
}

/// Finishes every stream communicator's matching before the library's `MPI_Finalize`.
pub fn finalize() {
    let all: Vec<Arc<Matched>> = lock(&ALL).drain(..).filter_map(|w| w.upgrade()).collect();
    for m in all {
        m.close();
    }
}
