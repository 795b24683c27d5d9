//! Large device messages in chunks (on unless `CUDAMPI_PIPELINE=0`), so that the copy out of the
//! sender's GPU, the transfer and the copy into the receiver's GPU overlap instead of following
//! one another.
//!
//! The sender sends the envelope first, on the program's communicator and tag, then copies the
//! message to host memory a chunk at a time and sends each chunk as soon as it is there, on the
//! private communicator with a tag of the message's own. The receive that matches the envelope
//! receives the chunks into a ring of a few pinned chunk buffers and starts each chunk's copy to
//! the device as it arrives; once its last chunk's receive is posted, it begins the next device
//! receive whose envelope is here, so that a window of messages keeps the link busy.
//!
//! Each chunk has a pinned buffer of its own from the staging pool, given back when its send
//! completes, so a stream of messages recycles a few chunks' worth of pinned memory instead of
//! holding whole messages. The send returns once every chunk is posted: it waits for the
//! receiver only while the pool is at its bound and the receiver is seen taking chunks; when
//! none is taken for `CUDAMPI_PIPELINE_WAIT` the receiver may be elsewhere (in `MPI_Barrier`,
//! say) until it completes its receive, and the rest of the message goes through pageable
//! memory instead, as do later messages until a chunk is seen taken. Meanwhile, and between
//! its chunks, the send takes the chunks its peers send this process (`receive_meanwhile`):
//! two ranks sending each other more than the pool holds would otherwise each wait for the
//! other.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::envelope::{self, Envelope};
use super::peers;
use crate::base::{config, stats};
use crate::cuda::copy::check;
use crate::cuda::{CudaError, Device, InContext};
use crate::mpi::abi::{self, Handle};
use crate::mpi::real;
use crate::staging::pool::{self, Lease};
use crate::staging::stage::{received_bytes, Window};

/// Chunk tags on the private communicator: 1 is the IPC releases', and wrapping below MPI's
/// smallest allowed tag bound keeps every tag valid.
const FIRST_TAG: u64 = 2;
const TAGS: u64 = 32000;

/// Set when a send gave up waiting for pinned buffers, cleared when a chunk in flight is seen
/// taken: until then later sends do not wait either, so a receiver busy elsewhere costs one
/// wait, not one per message.
static STALLED: AtomicBool = AtomicBool::new(false);

/// A chunk on its way, the buffer it is sent from, and its message's chunk tag.
struct InFlight {
    request: Handle,
    _buffer: Lease,
    tag: c_int,
}

struct State {
    sending: Vec<InFlight>,
    next_tag: u64,
}

// SAFETY: request handles and staging buffers, used under the mutex.
unsafe impl Send for State {}

static STATE: Mutex<State> = Mutex::new(State { sending: Vec::new(), next_tag: 0 });

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Tests a chunk's send: true once it completed (or failed), when its buffer may go back.
fn done(p: &real::Pmpi, c: &mut InFlight) -> bool {
    let (mut flag, mut status) = (0, abi::Status::zeroed());
    // SAFETY: a send this module posted; its buffer is kept beside it.
    let rc = unsafe { (p.test)((&mut c.request as *mut Handle).cast(), &mut flag, status.as_mut_ptr()) };
    rc != 0 || flag != 0
}

/// Gives back the buffers of the chunks whose sends completed; true when there were any.
fn collect() -> bool {
    let Some(p) = real::pmpi() else { return false };
    let mut s = state();
    let before = s.sending.len();
    s.sending.retain_mut(|c| !done(p, c));
    let taken = s.sending.len() < before;
    if taken {
        STALLED.store(false, Relaxed);
    }
    taken
}

/// Lets MPI move the chunks already sent: tests the oldest one still in flight.
fn progress() {
    let Some(p) = real::pmpi() else { return };
    let mut s = state();
    if s.sending.first_mut().is_some_and(|c| done(p, c)) {
        s.sending.remove(0);
        STALLED.store(false, Relaxed);
    }
}

/// A chunk whose copy to host memory is queued: the event that marks the copy done.
struct Copying {
    len: usize,
    event: *mut c_void,
    buffer: Option<Lease>,
}

/// A message to send in chunks, once its envelope is on its way.
pub struct Outgoing {
    dev: Device,
    src: *const c_void,
    bytes: usize,
    chunk: usize,
    dest: c_int,
    tag: c_int,
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

    /// Copies each chunk to host memory and posts its send, then gives back the envelope.
    /// Copies are queued as long as buffers are at hand, and each chunk is sent as soon as its
    /// copy is done; meanwhile the chunks already sent are tested, which lets an MPI that moves
    /// large messages only inside its calls move them while the copies run.
    /// With `settle` (a blocking send), then drives the chunks' sends until they complete
    /// (see [`Outgoing::settle`]).
    pub fn stream(self, settle: bool) -> (Result<(), CudaError>, Box<[u8; envelope::BYTES]>) {
        let result = self.send_chunks();
        if settle {
            self.settle();
        }
        (result, self.envelope)
    }

    /// Tests this message's chunk sends until they complete, for as long as the receiver is
    /// seen taking chunks (`CUDAMPI_PIPELINE_WAIT` at most without one taken). Transports
    /// whose sender moves the data after the receiver's answer (shared memory without
    /// single-copy, TCP) move it several times slower while the sender waits in a receive
    /// of its own than while it tests its sends: a ping-pong of 2 MiB in two chunks took
    /// 1,074 us one way against 399 staged on 2 x H200 (Open MPI 4.1.6, each rank a node);
    /// on the stand-in, 665 against 151 before, and 170 against 172 with the sends tested.
    /// A blocking send may wait for its receiver anyway, as the MPI's own does at this size.
    fn settle(&self) {
        let wait = Duration::from_micros(config::get().pipeline_wait_us);
        let mut since = Instant::now();
        while state().sending.iter().any(|c| c.tag == self.tag) {
            if collect() {
                since = Instant::now();
            } else if since.elapsed() > wait {
                return;
            } else {
                receive_meanwhile();
            }
        }
    }

    fn send_chunks(&self) -> Result<(), CudaError> {
        let ctx = InContext::enter(&self.dev)?;
        let mut failed = Ok(());
        let mut queued: VecDeque<Copying> = VecDeque::new();
        let mut patient = !STALLED.load(Relaxed);
        let mut at = 0;
        while at < self.bytes {
            let len = self.chunk.min(self.bytes - at);
            let mut buffer = self.buffer(len, &ctx, &mut queued, &mut patient, &mut failed);
            let mut event = std::ptr::null_mut();
            match &buffer {
                Some(b) if failed.is_ok() => {
                    let d = ctx.driver();
                    // SAFETY: `len` bytes of the buffer and of the program's span; the legacy
                    // default stream, after the program's work on blocking streams, as a
                    // synchronous copy is.
                    failed = unsafe {
                        check("cuMemcpyDtoHAsync", (d.memcpy_dtoh_async)(b.ptr(), self.src as u64 + at as u64, len, std::ptr::null_mut()))
                            .and_then(|()| check("cuEventCreate", (d.event_create)(&mut event, EVENT_DISABLE_TIMING)))
                            .and_then(|()| check("cuEventRecord", (d.event_record)(event, std::ptr::null_mut())))
                    };
                }
                Some(_) => {}
                None => failed = failed.and(Err(CudaError { call: "cuMemHostAlloc", code: OUT_OF_MEMORY })),
            }
            if failed.is_err() && event.is_null() {
                buffer = None;
            }
            queued.push_back(Copying { len, event, buffer });
            self.send_ready(&ctx, &mut queued, false, &mut failed);
            // The peer may be sending this process chunks too, its pinned buffers spent until
            // this process takes them. Taken only while this send waited, a peer whose chunks
            // this process never needed to take to get its own buffers back starved: both ways
            // at once at 64 MiB, it fell back to pageable memory after every few messages.
            receive_meanwhile();
            at += len;
        }
        self.send_ready(&ctx, &mut queued, true, &mut failed);
        drop(ctx);
        stats::add(&stats::CHUNKED_BYTES_SENT, self.bytes);
        failed
    }

    /// A buffer for the next chunk: a pinned one, waited for while chunks in flight are taken
    /// (at most `CUDAMPI_PIPELINE_WAIT` without one), else a pageable one. `None`: no memory
    /// at all.
    fn buffer(&self, len: usize, ctx: &InContext, queued: &mut VecDeque<Copying>, patient: &mut bool, failed: &mut Result<(), CudaError>) -> Option<Lease> {
        if let Some(b) = pool::lease_pinned(len, ctx, 0) {
            return Some(b);
        }
        let wait = Duration::from_micros(config::get().pipeline_wait_us);
        let mut since = Instant::now();
        while *patient {
            // Chunks copied but not yet sent cannot come back until they are sent.
            self.send_ready(ctx, queued, false, failed);
            if collect() {
                if let Some(b) = pool::lease_pinned(len, ctx, 0) {
                    return Some(b);
                }
                since = Instant::now();
            } else if state().sending.is_empty() && queued.is_empty() || since.elapsed() > wait {
                *patient = false;
                STALLED.store(true, Relaxed);
                if config::get().debug {
                    self.report_stall(since.elapsed());
                }
            } else {
                receive_meanwhile();
            }
        }
        pool::lease(len, ctx)
    }

    #[cold]
    fn report_stall(&self, waited: Duration) {
        let (taking, done) = begun().iter().fold((0, 0), |(t, d), x| match x.state {
            Early::Taking(_) => (t + 1, d),
            Early::Done(_) => (t, d + 1),
            Early::Claimed => (t, d),
        });
        crate::base::log::debug(format_args!(
            "chunked send to rank {}: no chunk in flight was taken in {waited:?} ({} in flight; receives begun meanwhile: {taking} taking chunks, {done} done); \
             this message and the next ones go through pageable memory until one is",
            self.dest,
            state().sending.len(),
        ));
    }

    /// Posts the sends of the queued chunks whose copies are done, in order; with `all`, waits
    /// for every copy. A chunk without a copy (it failed, or no memory) is sent empty, so the
    /// receiver is not left waiting and sees the message short; the error goes to the sender.
    fn send_ready(&self, ctx: &InContext, queued: &mut VecDeque<Copying>, all: bool, failed: &mut Result<(), CudaError>) {
        let (Some(p), Some(peers)) = (real::pmpi(), peers::get()) else { return };
        let abi = abi::get();
        let d = ctx.driver();
        while let Some(front) = queued.front() {
            let mut copied = true;
            if !front.event.is_null() {
                // SAFETY: an event recorded by `stream`.
                match unsafe { (d.event_query)(front.event) } {
                    0 => {}
                    NOT_READY if all => {
                        progress();
                        continue;
                    }
                    NOT_READY => return,
                    code => {
                        *failed = failed.and(check("cuEventQuery", code));
                        copied = false;
                    }
                }
            }
            let Some(mut c) = queued.pop_front() else { return };
            if !c.event.is_null() {
                // SAFETY: created by `stream`; its copy is done or failed.
                unsafe { (d.event_destroy)(c.event) };
            }
            if !copied {
                c.buffer = None;
            }
            let (ptr, len) = c.buffer.as_ref().map_or((std::ptr::null_mut(), 0), |b| (b.ptr(), c.len));
            let mut request: Handle = 0;
            // SAFETY: `len` bytes of the chunk's buffer, kept until the send completes; the
            // private communicator and the world rank of the destination.
            if unsafe { (p.isend)(ptr, len as c_int, abi.byte, self.dest, self.tag, peers.shadow, &mut request) } == 0 {
                if let Some(buffer) = c.buffer {
                    state().sending.push(InFlight { request, _buffer: buffer.uncounted(), tag: self.tag });
                }
            }
        }
    }
}

/// `CU_EVENT_DISABLE_TIMING`, `CUDA_ERROR_OUT_OF_MEMORY` and `CUDA_ERROR_NOT_READY`.
const EVENT_DISABLE_TIMING: u32 = 2;
const OUT_OF_MEMORY: crate::cuda::driver::CuResult = 2;
const NOT_READY: crate::cuda::driver::CuResult = 600;
/// `CUDA_ERROR_UNKNOWN`: what went wrong happened on the sender.
const UNKNOWN: crate::cuda::driver::CuResult = 999;

// SAFETY: the address of the program's device buffer, used by the sending thread.
unsafe impl Send for Outgoing {}

/// The smallest chunk a message is cut into by default.
const MIN_CHUNK: usize = 256 << 10;

/// The chunk size of a message of `bytes`: a quarter of it in whole 64 KiB, from 256 KiB (or
/// `most`, if smaller) to `most` (`CUDAMPI_PIPELINE_CHUNK`). Four chunks give a message its
/// overlap of copies and transfer, where a fixed chunk left a message of twice its size with
/// two; large messages keep chunks of `most`, so that the receiver's ring still holds
/// several of them in flight.
fn chunk_for(bytes: usize, most: usize) -> usize {
    bytes.div_ceil(4).next_multiple_of(64 << 10).clamp(MIN_CHUNK.min(most), most)
}

/// Prepares a chunked send of `bytes` of device memory at `src` to world rank `dest`.
pub fn offer(dev: &Device, src: *const c_void, bytes: usize, sender: c_int, dest: c_int) -> Outgoing {
    collect();
    let chunk = chunk_for(bytes, config::get().pipeline_chunk);
    let tag = {
        let mut s = state();
        s.next_tag = (s.next_tag + 1) % TAGS;
        (FIRST_TAG + s.next_tag) as c_int
    };
    let mut envelope = Box::new([0u8; envelope::BYTES]);
    Envelope::new(sender as u32, envelope::CHUNKS, bytes as u64, tag as u64, chunk as u64, [0; 64], [0; envelope::TOKEN_BYTES]).write(&mut envelope);
    Outgoing { dev: *dev, src, bytes, chunk, dest, tag, envelope }
}

/// Receives the chunks `e` announces into `len` bytes of host memory at `at`; with `device`,
/// the chunks go to that device address instead, each chunk's copy starting as it arrives.
/// Every chunk is received, even when `at` is null (a truncated receive: the chunks are
/// dropped). A receive that a waiting send began (`receive_meanwhile`) is carried on.
pub fn receive(e: &Envelope, at: *mut c_void, device: Option<(Device, *mut c_void)>) -> Result<(), CudaError> {
    let result = match claim(e) {
        Early::Done(r) => r,
        Early::Taking(ring) => ring.complete(true),
        Early::Claimed => match device {
            Some((dev, user)) if !at.is_null() => through_ring(e, at, &dev, user),
            _ => direct(e, at, None),
        },
    };
    unclaim(e);
    if result.is_ok() {
        stats::add(&stats::CHUNKED_BYTES_RECEIVED, e.bytes as usize);
    }
    result
}

/// Chunk buffers a receive cycles through: one copying to the device while the others receive.
const RING: usize = 4;

/// A ring slot: a pinned chunk buffer, the receive posted into it, and the event that marks
/// its last copy to the device done.
struct Slot {
    buffer: Lease,
    request: Handle,
    event: *mut c_void,
    copying: bool,
}

/// A receive taking a message's chunks through a few pinned buffers of its own, copying each
/// to the device as it arrives. Chunk `k` goes through slot `k % slots.len()`.
struct Ring {
    /// The message's envelope: its sender, chunk tag, size and chunk size.
    e: Envelope,
    dev: Device,
    user: *mut c_void,
    /// Chunks in the message.
    n: usize,
    slots: Vec<Slot>,
    /// Chunks taken (their copies started), and chunks whose receives are posted.
    taken: usize,
    posted: usize,
    failed: Result<(), CudaError>,
    /// Once the last chunk's receive is posted, begin the next device receive whose envelope
    /// has arrived (`receive_meanwhile`): set only for a ring its completion call owns.
    then_next: bool,
}

// SAFETY: the program's device span and buffers of the ring's own; a ring is used by one
// thread at a time, under `BEGUN`'s lock or after being taken out of it.
unsafe impl Send for Ring {}

impl Ring {
    /// Leases the slots and posts the first chunks' receives; `None` when fewer than two
    /// pinned chunk buffers can be had.
    fn open(e: &Envelope, ctx: &InContext, dev: Device, user: *mut c_void) -> Option<Ring> {
        let bytes = e.bytes as usize;
        let chunk = (e.offset as usize).max(1);
        let n = bytes.div_ceil(chunk);
        let d = ctx.driver();
        let len = chunk.min(bytes);
        let mut slots = Vec::with_capacity(RING);
        while slots.len() < RING.min(n) {
            let Some(buffer) = spare(len).or_else(|| pool::lease_pinned(len, ctx, RING * chunk)) else { break };
            let mut event = std::ptr::null_mut();
            // SAFETY: an out-pointer for a new event of the current context.
            if unsafe { (d.event_create)(&mut event, EVENT_DISABLE_TIMING) } != 0 {
                break;
            }
            slots.push(Slot { buffer, request: 0, event, copying: false });
        }
        let mut ring = Ring { e: *e, dev, user, n, slots, taken: 0, posted: 0, failed: Ok(()), then_next: false };
        if ring.slots.len() < RING.min(n).min(2) {
            ring.destroy(ctx);
            return None;
        }
        while ring.posted < ring.slots.len() {
            ring.post_next();
        }
        Some(ring)
    }

    /// (offset, bytes) of chunk `k`.
    fn span(&self, k: usize) -> (usize, usize) {
        let (bytes, chunk) = (self.e.bytes as usize, (self.e.offset as usize).max(1));
        (k * chunk, chunk.min(bytes - k * chunk))
    }

    fn post_next(&mut self) {
        let k = self.posted;
        let len = self.span(k).1;
        let r = self.slots.len();
        let slot = &mut self.slots[k % r];
        // The chunk fits the slot's buffer, which the ring keeps until the receive completes.
        slot.request = post_chunk(&self.e, slot.buffer.ptr(), len);
        self.posted += 1;
        self.begin_next();
    }

    /// With every chunk's receive posted, begins the next message's receive (`then_next`):
    /// its chunks then move while this message's last chunks arrive and land on the GPU,
    /// instead of after them, when a window of receives completes one message at a time.
    fn begin_next(&mut self) {
        if self.then_next && self.posted == self.n {
            self.then_next = false;
            receive_meanwhile();
        }
    }

    /// Whether slot `i`'s copy to the device is done; with `block`, waits for it.
    fn copied(&mut self, ctx: &InContext, i: usize, block: bool) -> bool {
        let slot = &mut self.slots[i];
        while slot.copying {
            // SAFETY: an event recorded after this slot's copy.
            match unsafe { (ctx.driver().event_query)(slot.event) } {
                0 => slot.copying = false,
                NOT_READY if block => std::hint::spin_loop(),
                NOT_READY => return false,
                code => {
                    self.failed = std::mem::replace(&mut self.failed, Ok(())).and(check("cuEventQuery", code));
                    slot.copying = false;
                }
            }
        }
        true
    }

    /// Takes the chunks that have arrived, starts their copies to the device and posts the
    /// receives of the chunks after them; with `block`, until every chunk is taken. True once
    /// every chunk is taken and copied.
    fn step(&mut self, ctx: &InContext, block: bool) -> bool {
        let r = self.slots.len();
        while self.taken < self.n {
            // A slot takes the next chunk not yet posted once its copy is done; the slot of the
            // chunk before the last one taken has had a whole chunk's transfer to finish it.
            while self.posted < self.n && self.posted + 1 < self.taken + r && self.copied(ctx, self.posted % r, block) {
                self.post_next();
            }
            if self.posted == self.taken {
                return false;
            }
            let k = self.taken;
            let (off, len) = self.span(k);
            let slot = &mut self.slots[k % r];
            match take_chunk(&mut slot.request, len, block) {
                None => return false,
                Some(Err(e)) => self.failed = std::mem::replace(&mut self.failed, Ok(())).and(Err(e)),
                Some(Ok(())) if self.failed.is_ok() => {
                    let d = ctx.driver();
                    // SAFETY: `len` bytes of the slot's buffer to the program's device span; the
                    // slot is not reused before the event recorded after the copy has fired.
                    self.failed = unsafe {
                        check("cuMemcpyHtoDAsync", (d.memcpy_htod_async)(self.user as u64 + off as u64, slot.buffer.ptr(), len, std::ptr::null_mut()))
                            .and_then(|()| check("cuEventRecord", (d.event_record)(slot.event, std::ptr::null_mut())))
                    };
                    slot.copying = self.failed.is_ok();
                }
                Some(Ok(())) => {}
            }
            self.taken += 1;
        }
        (0..r).all(|i| self.copied(ctx, i, block))
    }

    /// Takes every chunk left, waits for the copies, and gives the slots back; `then_next`: a
    /// completion call's, which begins the next receive once every chunk is posted.
    fn complete(mut self, then_next: bool) -> Result<(), CudaError> {
        let ctx = InContext::enter(&self.dev)?;
        self.then_next = then_next;
        self.begin_next();
        self.step(&ctx, true);
        // The copies ran on the context's legacy default stream.
        let synced = ctx.synchronize();
        self.close(&ctx).and(synced)
    }

    /// Once every chunk is taken and copied: gives the slots back, and the receive's outcome.
    fn close(&mut self, ctx: &InContext) -> Result<(), CudaError> {
        self.destroy(ctx);
        std::mem::replace(&mut self.failed, Ok(()))
    }

    /// Gives the slots back: their buffers to the spares.
    fn destroy(&mut self, ctx: &InContext) {
        for s in self.slots.drain(..) {
            // SAFETY: created by `open`; its copies are done.
            unsafe { (ctx.driver().event_destroy)(s.event) };
            let mut spares = spares();
            if spares.0.len() < RING {
                spares.0.push(s.buffer.uncounted());
            }
        }
    }
}

/// Pinned chunk buffers a ring gave back, kept for the next ring instead of going back to the
/// pool: sends waiting for pinned buffers would take them there, and a ring that then finds
/// the pool spent (and the few buffers it may have beyond it taken too) cannot take their
/// chunks. Counted in the pool's bound, released at `MPI_Finalize`.
static SPARES: Mutex<Spares> = Mutex::new(Spares(Vec::new()));

struct Spares(Vec<Lease>);

// SAFETY: staging buffers, used under the mutex.
unsafe impl Send for Spares {}

fn spares() -> MutexGuard<'static, Spares> {
    SPARES.lock().unwrap_or_else(|e| e.into_inner())
}

/// A spare chunk buffer of at least `len` bytes.
fn spare(len: usize) -> Option<Lease> {
    let mut spares = spares();
    let i = spares.0.iter().position(|b| b.capacity().is_some_and(|c| c >= len))?;
    Some(spares.0.swap_remove(i).counted())
}

/// Receives the chunks through a ring of pinned buffers: the receive's staging buffer, pageable
/// when the pool is spent (a window of large receives), then only holds the envelope. Without
/// pinned chunk buffers the chunks land in the staging buffer, as `direct` does.
fn through_ring(e: &Envelope, at: *mut c_void, dev: &Device, user: *mut c_void) -> Result<(), CudaError> {
    if real::pmpi().is_none() || peers::get().is_none() {
        return Ok(());
    }
    let ring = Ring::open(e, &InContext::enter(dev)?, *dev, user);
    match ring {
        Some(ring) => ring.complete(true),
        None => direct(e, at, Some((*dev, user))),
    }
}

/// A chunked receive a waiting send began.
enum Early {
    /// Still taking chunks.
    Taking(Box<Ring>),
    /// Every chunk taken and copied.
    Done(Result<(), CudaError>),
    /// Its completion call is receiving it.
    Claimed,
}

/// A message's receive, by the message's sender and tag, and the program's request that got
/// its envelope (0 when claimed first).
struct Begun {
    sender: u32,
    tag: u64,
    request: Handle,
    state: Early,
}

impl Begun {
    fn of(&self, e: &Envelope) -> bool {
        (self.sender, self.tag) == (e.sender, e.arena)
    }
}

// SAFETY: see `Ring`; the handle is a plain value.
unsafe impl Send for Begun {}

static BEGUN: Mutex<Vec<Begun>> = Mutex::new(Vec::new());

fn begun() -> MutexGuard<'static, Vec<Begun>> {
    BEGUN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether sends may begin receives (`receive_meanwhile`): only while no two MPI calls run at
/// once, so that no completion call can take a request between its being looked at and its
/// receive being begun.
static SERIAL: AtomicBool = AtomicBool::new(false);

/// Receives a waiting send may have begun and not finished (each holds up to `RING` chunk
/// buffers beyond the pool's bound).
const TAKING: usize = 1;
/// Waiting receives whose envelopes have not arrived that a look goes past: envelopes from one
/// sender arrive in order.
const MISSES: usize = 4;

/// After the library's `MPI_Init`.
pub fn init(waiting: Waiting) {
    let _ = WAITING.set(waiting);
    let serial = real::calls_overlap() == Some(false);
    SERIAL.store(serial, Relaxed);
}

/// The completion call of `e`'s receive takes it over: what a waiting send began, or nothing
/// (and no send begins it from now on).
fn claim(e: &Envelope) -> Early {
    let mut b = begun();
    match b.iter_mut().find(|x| x.of(e)) {
        Some(x) => std::mem::replace(&mut x.state, Early::Claimed),
        None => {
            b.push(Begun { sender: e.sender, tag: e.arena, request: 0, state: Early::Claimed });
            Early::Claimed
        }
    }
}

fn unclaim(e: &Envelope) {
    begun().retain(|x| !x.of(e));
}

/// The program's requests in flight, as the request table (a layer above) knows them: handed
/// down by `init`.
pub struct Waiting {
    /// Whether any request with a staged buffer is in flight.
    pub any: fn() -> bool,
    /// The device receives posted and not completed, oldest first, with their staging buffers.
    pub receives: fn() -> Vec<(Handle, Window)>,
    /// Delivers a receive that MPI reports complete (its status given) before its completion
    /// call, which then copies nothing.
    pub deliver: fn(Handle, *mut c_void) -> Result<(), c_int>,
}

static WAITING: OnceLock<Waiting> = OnceLock::new();

fn any_request() -> bool {
    WAITING.get().is_some_and(|w| (w.any)())
}

/// A send waiting for pinned buffers takes the chunks its peers send it meanwhile: it carries
/// on the receives begun so, and begins the oldest device receive whose chunks' envelope has
/// arrived. Two ranks sending each other more than the pool holds then free each other's
/// buffers by taking each other's chunks, instead of each waiting for the other. The
/// receive's completion call carries on from there.
fn receive_meanwhile() {
    if !SERIAL.load(Relaxed) || !any_request() {
        return;
    }
    let mut b = begun();
    if step(&mut b) >= TAKING {
        return;
    }
    let begun_requests: Vec<Handle> = b.iter().map(|x| x.request).collect();
    arrived(|h| begun_requests.contains(&h), |h, w, e, _| {
        if e.kind != envelope::CHUNKS || e.bytes as usize > w.len || b.iter().any(|x| x.of(&e)) {
            return false;
        }
        let Ok(ctx) = InContext::enter(&w.dev) else { return true };
        if let Some(mut ring) = Ring::open(&e, &ctx, w.dev, w.user) {
            ring.step(&ctx, false);
            b.push(Begun { sender: e.sender, tag: e.arena, request: h, state: Early::Taking(Box::new(ring)) });
        }
        true
    });
}

/// A send waiting for its receiver to copy from the program's buffer (`direct`) lands, meanwhile,
/// the messages over IPC that its peers sent it, oldest receive first: two ranks that each wait
/// in a send for the other's receive (each in `MPI_Waitall` of its sends before its receives)
/// then copy each other's messages instead of waiting for each other.
pub fn land_meanwhile() {
    if !SERIAL.load(Relaxed) || !any_request() {
        return;
    }
    let Some(deliver) = WAITING.get().map(|w| w.deliver) else { return };
    arrived(|_| false, |h, _, e, status| {
        if e.kind != envelope::CHUNKS {
            let _ = deliver(h, status);
        }
        false
    });
}

/// Hands `visit` each device receive in flight (oldest first, past those `skip` names) that MPI
/// reports complete with an envelope, with its staging window and status, until `visit` returns
/// `true`. It stops at the [`MISSES`]th receive that has not completed: envelopes from one
/// sender arrive in order. No other MPI call may run meanwhile; the requests are not freed.
fn arrived(skip: impl Fn(Handle) -> bool, mut visit: impl FnMut(Handle, &Window, Envelope, *mut c_void) -> bool) {
    let (Some(p), Some(w)) = (real::pmpi(), WAITING.get()) else { return };
    let mut misses = 0;
    for (h, win) in (w.receives)() {
        if skip(h) {
            continue;
        }
        let (mut flag, mut status) = (0, abi::Status::zeroed());
        // SAFETY: a request the program posted and has not completed (no other MPI call runs
        // meanwhile); the request is not freed.
        let rc = unsafe { (p.request_get_status)(h, &mut flag, status.as_mut_ptr()) };
        if rc != 0 || flag == 0 {
            misses += 1;
            if misses == MISSES {
                return;
            }
            continue;
        }
        if received_bytes(status.as_mut_ptr()) != Some(envelope::BYTES) {
            continue;
        }
        // SAFETY: the staging buffer holds what the receive got, at least the envelope's bytes.
        let Some(e) = (unsafe { Envelope::read(win.host) }) else { continue };
        if visit(h, &win, e, status.as_mut_ptr()) {
            return;
        }
    }
}

/// Takes what has arrived for the receives begun; returns how many still take chunks.
fn step(b: &mut [Begun]) -> usize {
    let mut taking = 0;
    for x in b.iter_mut() {
        let Early::Taking(ring) = &mut x.state else { continue };
        let Ok(ctx) = InContext::enter(&ring.dev) else { continue };
        if ring.step(&ctx, false) {
            x.state = Early::Done(ring.close(&ctx));
        } else {
            taking += 1;
        }
    }
    taking
}

/// Posts the receive of a chunk of `e`'s message, `len` bytes into `to`, which must stay
/// valid until the receive completes.
fn post_chunk(e: &Envelope, to: *mut c_void, len: usize) -> Handle {
    let mut request: Handle = 0;
    if let (Some(p), Some(peers)) = (real::pmpi(), peers::get()) {
        // SAFETY: `len` bytes at `to`, per the caller; the sender's world rank and the
        // message's tag on the private communicator.
        unsafe { (p.irecv)(to, len as c_int, abi::get().byte, e.sender as c_int, e.arena as c_int, peers.shadow, &mut request) };
    }
    request
}

/// Completes a chunk's receive posted by `post_chunk` (with `block`, waits for it; else `None`
/// while it has not arrived). A chunk shorter than `len` is one the sender could not copy and
/// reported: the message is incomplete.
fn take_chunk(request: &mut Handle, len: usize, block: bool) -> Option<Result<(), CudaError>> {
    let Some(p) = real::pmpi() else { return Some(Ok(())) };
    let mut status = abi::Status::zeroed();
    let req = (request as *mut Handle).cast();
    if block {
        // SAFETY: a receive `post_chunk` posted.
        unsafe { (p.wait)(req, status.as_mut_ptr()) };
    } else {
        let mut flag = 0;
        // SAFETY: as above.
        if unsafe { (p.test)(req, &mut flag, status.as_mut_ptr()) } == 0 && flag == 0 {
            return None;
        }
    }
    Some(match received_bytes(status.as_mut_ptr()) == Some(len) {
        true => Ok(()),
        false => Err(CudaError { call: "the sender's copy of a chunk", code: UNKNOWN }),
    })
}

/// Receives every chunk straight into `at` (host memory holding the whole message; null:
/// dropped into one scratch chunk), posting all the receives at once; with `device`, each
/// chunk's copy to that device address starts as it arrives.
fn direct(e: &Envelope, at: *mut c_void, device: Option<(Device, *mut c_void)>) -> Result<(), CudaError> {
    if real::pmpi().is_none() || peers::get().is_none() {
        return Ok(());
    }
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
        requests.push((post_chunk(e, to.cast(), len), off, len));
        off += len;
    }
    let ctx = match device {
        Some((dev, _)) => Some(InContext::enter(&dev)?),
        None => None,
    };
    let mut failed = Ok(());
    for (mut req, off, len) in requests {
        failed = failed.and(take_chunk(&mut req, len, true).unwrap_or(Ok(())));
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
        failed = failed.and(ctx.synchronize());
    }
    failed
}

/// Waits for every chunk still being sent (`MPI_Finalize`, before the ranks part).
pub fn finish() {
    let Some(p) = real::pmpi() else { return };
    // Receives begun for requests the program never completed.
    for x in std::mem::take(&mut *begun()) {
        if let Early::Taking(ring) = x.state {
            let _ = ring.complete(false);
        }
    }
    drop(std::mem::take(&mut spares().0));
    let sending = std::mem::take(&mut state().sending);
    for mut c in sending {
        let mut status = abi::Status::zeroed();
        // SAFETY: a send this module posted.
        unsafe { (p.wait)((&mut c.request as *mut Handle).cast(), status.as_mut_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::chunk_for;

    #[test]
    fn a_message_goes_in_four_chunks_within_the_bounds() {
        const K: usize = 1 << 10;
        assert_eq!(chunk_for(1 << 20, 1 << 20), 256 * K);
        assert_eq!(chunk_for((1 << 20) + 1, 1 << 20), 320 * K);
        assert_eq!(chunk_for(2 << 20, 1 << 20), 512 * K);
        assert_eq!(chunk_for(64 << 20, 1 << 20), 1 << 20);
        assert_eq!(chunk_for(100, 1 << 20), 256 * K);
        // A configured chunk below the smallest default is the chunk of every message.
        assert_eq!(chunk_for(8 << 20, 64 * K), 64 * K);
        assert_eq!(chunk_for(16 << 20, 4 << 20), 4 << 20);
    }
}
