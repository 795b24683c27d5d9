//! Words in host memory shared by the ranks of a node, on which the sender and the receiver of
//! a message left in the program's own device buffer (`direct`) agree who moves it: the
//! receiver takes it and copies it, or the sender, tired of waiting, withdraws it and copies it
//! into its exported memory first. Every change of hands is one compare-and-swap on the slot's
//! state, so neither can read the buffer after the other has let it go.
//!
//! ```text
//!            sender                          receiver
//! FREE --post--> FILLING --publish--> POSTED --take--> TAKEN --done--> DONE --sender sees it--> FREE
//!                                       |
//!                                       +--withdraw--> WITHDRAWN --copied--> MOVED --receiver read it--> FREE
//! ```
//!
//! The envelope leaves while the slot is FILLING: the sender makes sure that the program's
//! work on the buffer is done while the envelope travels, then publishes, and a receiver that
//! finds the slot still FILLING waits for that.
//!
//! Each rank makes one segment of [`SLOTS`] slots at `MPI_Init`. After a barrier every rank
//! maps the segments of the others of its node, the ranks agree that all of them could, and
//! each unlinks its own name, so a job that dies leaves no file behind.
//!
//! This module may use `peers`, `mpi` and `base`.

use std::ffi::{c_int, CString};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::OnceLock;

use super::peers::Peers;
use crate::base::{log, shm};
use crate::mpi::abi;
use crate::mpi::real;

/// Slots per rank: messages from one rank's own buffers in flight at once. A send that finds
/// none free takes the other paths.
pub const SLOTS: usize = 1024;

const FREE: u32 = 0;
/// Claimed by a sending thread; the receiver may not copy yet.
const FILLING: u32 = 1;
const POSTED: u32 = 2;
const TAKEN: u32 = 3;
const DONE: u32 = 4;
const WITHDRAWN: u32 = 5;
const MOVED: u32 = 6;

#[repr(C, align(128))]
struct Slot {
    state: AtomicU32,
    /// Counts the slot's uses, so that an envelope names one use of it.
    seq: AtomicU32,
    /// With DONE: the receiver copied on the sender's GPU.
    same_gpu: AtomicU32,
    _pad: u32,
    /// With MOVED: the exported arena holding the data, the offset in it and its IPC handle.
    arena: AtomicU64,
    offset: AtomicU64,
    handle: [AtomicU64; 8],
}

/// After the slots: what the rank tells the senders of its node about itself.
#[repr(C, align(128))]
struct Header {
    /// Whom the rank waits for in a receive, while it does (`Listening`): the world rank plus
    /// one of the source in the high half, the tag in the low half, [`ANY`] in either for any;
    /// 0 while it waits for none.
    awaits: AtomicU64,
    door: Door,
}

/// Bytes a sender may write through a door, at most.
pub const DOOR_BYTES: usize = 1056;

/// A small device receive the rank waits in, open to one sender's write (`pushed`):
///
/// ```text
///            receiver                       sender                          receiver
/// SHUT --open--> OPEN --claim--> CLAIMED --written/abandoned--> WRITTEN/ABANDONED --shut--> SHUT
///                  |
///                  +--shut (nobody claimed)--> SHUT
/// ```
///
/// The state word holds the door's use in its high bits, so a sender that read an earlier
/// opening claims nothing.
#[repr(C, align(128))]
struct Door {
    state: AtomicU64,
    /// Whom the receive waits for, as in `awaits`.
    whom: AtomicU64,
    capacity: AtomicU64,
    /// The receive buffer: its allocation's id, its offset there, the allocation's IPC handle
    /// and the GPU it is on, as `peers::device_token` names it.
    id: AtomicU64,
    offset: AtomicU64,
    handle: [AtomicU64; 8],
    token: [AtomicU64; TOKEN_WORDS],
    /// With WRITTEN or ABANDONED: how many bytes of the buffer the sender's write covered (none,
    /// for a claim given up before its write was queued).
    written: AtomicU64,
    /// With WRITTEN: the bytes written, which the sender's message also carries.
    data: [AtomicU64; DOOR_BYTES / 8],
    /// What the buffer held there before the write: a receive that takes another message, or
    /// none, puts back what that message does not cover, since MPI changes only the bytes a
    /// message brings.
    old: [AtomicU64; DOOR_BYTES / 8],
}

const TOKEN_WORDS: usize = 6;
const SHUT: u64 = 0;
const OPEN: u64 = 1;
const CLAIMED: u64 = 2;
const WRITTEN: u64 = 3;
const ABANDONED: u64 = 4;
/// Being opened by one of the rank's threads.
const FILLING_DOOR: u64 = 5;

const ANY: u32 = u32::MAX;

/// Whom a receive waits for, as `awaits` and a door hold it.
fn whom(source: Option<u32>, tag: Option<u32>) -> u64 {
    (source.map_or(ANY, |r| r.wrapping_add(1)) as u64) << 32 | tag.unwrap_or(ANY) as u64
}

/// Whether a message with `tag` from world rank `me` is what [`whom`] value `v` waits for.
fn waits_for(v: u64, me: u32, tag: u32) -> bool {
    let (source, waited) = ((v >> 32) as u32, v as u32);
    (source == ANY || source == me.wrapping_add(1)) && (waited == ANY || waited == tag)
}

/// Bytes kept in shared words (an IPC handle, a door's data), in native byte order.
fn store_bytes(words: &[AtomicU64], bytes: &[u8]) {
    for (w, chunk) in words.iter().zip(bytes.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        w.store(u64::from_ne_bytes(b), Relaxed);
    }
}

fn load_bytes(words: &[AtomicU64], out: &mut [u8]) {
    for (w, chunk) in words.iter().zip(out.chunks_mut(8)) {
        let b = w.load(Relaxed).to_ne_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

const SEGMENT_BYTES: usize = SLOTS * std::mem::size_of::<Slot>() + std::mem::size_of::<Header>();

struct Segments {
    own: usize,
    /// (process id, address) of every other rank of the node that takes IPC with this one.
    peers: Vec<(u32, usize)>,
    /// Where the next search for a free slot starts.
    next: AtomicUsize,
}

static SEGMENTS: OnceLock<Segments> = OnceLock::new();

fn name(pid: u32) -> CString {
    CString::new(format!("/cudampi-slots-{pid}")).unwrap_or_default()
}

fn create() -> Option<usize> {
    shm::create(&name(std::process::id()), SEGMENT_BYTES).map(|p| p as usize)
}

fn open(pid: u32) -> Option<usize> {
    shm::open(&name(pid), SEGMENT_BYTES).map(|p| p as usize)
}

/// After the records are exchanged, on every rank (two barriers and an allgather on the
/// private communicator). Afterwards [`ready`] says whether the slots are there, on every rank
/// alike.
pub fn setup(peers: &Peers) {
    let Some(p) = real::pmpi() else { return };
    let abi = abi::get();
    let own = create();
    // SAFETY: the private communicator; every rank calls this.
    unsafe { (p.barrier)(peers.shadow) };
    let mut mapped = Vec::new();
    let mut ok = own.is_some();
    for pid in peers.node_pids() {
        match open(pid) {
            Some(at) => mapped.push((pid, at)),
            None => ok = false,
        }
    }
    let size = peers.size();
    let mut all = vec![0 as c_int; size];
    let mine = ok as c_int;
    // SAFETY: one int from each rank into an array of as many; every rank calls this.
    let gathered = unsafe { (p.allgather)((&mine as *const c_int).cast(), 4, abi.byte, all.as_mut_ptr().cast(), 4, abi.byte, peers.shadow) } == 0;
    // Every peer has mapped it by now (the allgather).
    shm::unlink(&name(std::process::id()));
    match (own, gathered && all.iter().all(|&x| x == 1)) {
        (Some(own), true) => {
            let _ = SEGMENTS.set(Segments { own, peers: mapped, next: AtomicUsize::new(0) });
        }
        _ => {
            // Not a warning: a program that never sends device memory must print nothing more.
            if crate::base::config::get().debug {
                log::debug(format_args!("no shared memory for IPC slots on {} rank (shm_open); device messages over IPC are copied once more", if ok { "another" } else { "this" }));
            }
            for (_, at) in mapped.into_iter().chain(own.map(|o| (0, o))) {
                // A mapping made above and never handed out.
                shm::unmap(at as *mut libc::c_void, SEGMENT_BYTES);
            }
        }
    }
}

/// Whether every rank has its slots and can see those of its node.
pub fn ready() -> bool {
    SEGMENTS.get().is_some()
}

/// This rank's slot `index`; every index a sender holds came from [`post`], after setup.
fn own(index: u32) -> Option<&'static Slot> {
    let s = SEGMENTS.get()?;
    // SAFETY: the index is bounded; the segment lives as long as the process.
    Some(unsafe { &*(s.own as *const Slot).add(index as usize % SLOTS) })
}

fn peer(pid: u32, index: u32) -> Option<&'static Slot> {
    let s = SEGMENTS.get()?;
    let &(_, at) = s.peers.iter().find(|&&(p, _)| p == pid)?;
    // SAFETY: the index is bounded; the mapping lives as long as the process.
    Some(unsafe { &*(at as *const Slot).add(index as usize % SLOTS) })
}

fn header(at: usize) -> &'static Header {
    // SAFETY: a segment of SEGMENT_BYTES, mapped as long as the process lives; the header
    // follows the slots.
    unsafe { &*((at + SLOTS * std::mem::size_of::<Slot>()) as *const Header) }
}

// ---- whom a rank awaits -----------------------------------------------------------------

/// While alive, the rank's senders on this node see it waiting in a receive for a message from
/// world rank `source` (`None`: from any), and may send it small device messages over IPC
/// from their buffers: it copies them at once. A hint only: a sender that misses it stages.
pub struct Listening(u64);

impl Listening {
    pub fn new(source: Option<u32>, tag: Option<u32>) -> Option<Listening> {
        let h = header(SEGMENTS.get()?.own);
        Some(Listening(h.awaits.swap(whom(source, tag), Relaxed)))
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        if let Some(s) = SEGMENTS.get() {
            header(s.own).awaits.store(self.0, Relaxed);
        }
    }
}

/// Whether the rank of process `pid` waits in a receive for a message with `tag` from world
/// rank `me`.
pub fn awaits(pid: u32, me: u32, tag: u32) -> bool {
    let Some(s) = SEGMENTS.get() else { return false };
    let Some(&(_, at)) = s.peers.iter().find(|&&(p, _)| p == pid) else { return false };
    waits_for(header(at).awaits.load(Relaxed), me, tag)
}

// ---- doors: small messages written into a waiting receiver's buffer ------------------------

/// The receive buffer a door opens onto.
pub struct DoorBuffer {
    pub capacity: usize,
    pub id: u64,
    pub offset: u64,
    pub handle: [u8; 64],
    pub token: [u8; TOKEN_WORDS * 8],
}

/// An open door of this rank (its use); shut it with [`shut`] before the receive returns.
pub struct Opened(u64);

/// Opens this rank's door to senders of `tag` from world rank `source` (`None`: any), onto `b`.
pub fn open_door(source: Option<u32>, tag: Option<u32>, b: &DoorBuffer) -> Option<Opened> {
    header(SEGMENTS.get()?.own).door.open(source, tag, b)
}

/// A sender's write into the buffer behind a door: the first `len` bytes of the buffer held
/// `old` before it, and hold `data` after it. `sent`: the sender's message carries `data`;
/// otherwise it gave up after its write (its send failed) and `data` is not known.
pub struct Write {
    pub len: usize,
    pub sent: bool,
    pub data: [u8; DOOR_BYTES],
    pub old: [u8; DOOR_BYTES],
}

/// Shuts the door: the write a sender made into the buffer meanwhile, or `None`. A sender that
/// claimed it is waited for.
pub fn shut(o: Opened) -> Option<Box<Write>> {
    header(SEGMENTS.get()?.own).door.shut(o)
}

/// A peer's door this rank has claimed: [`Claimed::written`] or, if dropped before, abandoned.
pub struct Claimed {
    door: &'static Door,
    state: u64,
    pub buffer: DoorBuffer,
}

/// Whether the door of any other rank of the node is open.
pub fn any_door_open() -> bool {
    SEGMENTS.get().is_some_and(|s| s.peers.iter().any(|&(_, at)| header(at).door.state.load(Relaxed) & 0xff == OPEN))
}

/// Claims the door of the rank of process `pid` for `bytes` with `tag` from world rank `me`,
/// if it is open to them and `accept` takes its buffer.
pub fn claim(pid: u32, me: u32, tag: u32, bytes: usize, accept: impl FnOnce(&DoorBuffer) -> bool) -> Option<Claimed> {
    let s = SEGMENTS.get()?;
    let &(_, at) = s.peers.iter().find(|&&(p, _)| p == pid)?;
    header(at).door.claim(me, tag, bytes, accept)
}

impl Door {
    fn open(&self, source: Option<u32>, tag: Option<u32>, b: &DoorBuffer) -> Option<Opened> {
        let state = self.state.load(Acquire);
        let next = ((state >> 8) + 1) << 8;
        // Another thread of the rank may be opening it for a receive of its own.
        if state & 0xff != SHUT || self.state.compare_exchange(state, next | FILLING_DOOR, Acquire, Relaxed).is_err() {
            return None;
        }
        self.whom.store(whom(source, tag), Relaxed);
        self.capacity.store(b.capacity as u64, Relaxed);
        self.id.store(b.id, Relaxed);
        self.offset.store(b.offset, Relaxed);
        store_bytes(&self.handle, &b.handle);
        store_bytes(&self.token, &b.token);
        self.state.store(next | OPEN, Release);
        Some(Opened(next))
    }

    fn shut(&self, o: Opened) -> Option<Box<Write>> {
        if self.state.compare_exchange(o.0 | OPEN, o.0 | SHUT, AcqRel, Acquire).is_ok() {
            return None;
        }
        loop {
            let state = self.state.load(Acquire);
            let sent = match state & 0xff {
                CLAIMED => {
                    std::hint::spin_loop();
                    continue;
                }
                WRITTEN => true,
                ABANDONED => false,
                _ => {
                    self.state.store(o.0 | SHUT, Release);
                    return None;
                }
            };
            let len = (self.written.load(Relaxed) as usize).min(DOOR_BYTES);
            let mut w = Box::new(Write { len, sent, data: [0; DOOR_BYTES], old: [0; DOOR_BYTES] });
            if sent {
                load_bytes(&self.data, &mut w.data[..len]);
            }
            load_bytes(&self.old, &mut w.old[..len]);
            self.state.store(o.0 | SHUT, Release);
            return (len > 0).then_some(w);
        }
    }

    fn claim(&'static self, me: u32, tag: u32, bytes: usize, accept: impl FnOnce(&DoorBuffer) -> bool) -> Option<Claimed> {
        let state = self.state.load(Acquire);
        if state & 0xff != OPEN {
            return None;
        }
        let capacity = self.capacity.load(Relaxed) as usize;
        if !waits_for(self.whom.load(Relaxed), me, tag) || bytes > capacity || bytes > DOOR_BYTES {
            return None;
        }
        let mut buffer = DoorBuffer { capacity, id: self.id.load(Relaxed), offset: self.offset.load(Relaxed), handle: [0; 64], token: [0; TOKEN_WORDS * 8] };
        load_bytes(&self.handle, &mut buffer.handle);
        load_bytes(&self.token, &mut buffer.token);
        if !accept(&buffer) {
            return None;
        }
        // The fields were read under `state`: a door shut and opened again since has another use.
        let base = state & !0xff;
        self.state.compare_exchange(state, base | CLAIMED, AcqRel, Relaxed).ok()?;
        Some(Claimed { door: self, state: base, buffer })
    }
}

impl Claimed {
    /// The bytes are in the receiver's buffer, and these are they; `old`, as many, were there
    /// before.
    pub fn written(self, bytes: &[u8], old: &[u8]) {
        let n = bytes.len().min(old.len()).min(DOOR_BYTES);
        store_bytes(&self.door.data, &bytes[..n]);
        self.leave(n, &old[..n], WRITTEN);
    }

    /// The write of `old.len()` bytes landed, and the message will not follow: the receiver
    /// puts `old` back.
    pub fn abandoned(self, old: &[u8]) {
        let n = old.len().min(DOOR_BYTES);
        self.leave(n, &old[..n], ABANDONED);
    }

    fn leave(self, n: usize, old: &[u8], state: u64) {
        let d = self.door;
        store_bytes(&d.old, old);
        d.written.store(n as u64, Relaxed);
        d.state.store(self.state | state, Release);
        std::mem::forget(self);
    }
}

/// Given up before any write was queued: the buffer is as it was.
impl Drop for Claimed {
    fn drop(&mut self) {
        self.door.written.store(0, Relaxed);
        self.door.state.store(self.state | ABANDONED, Release);
    }
}

// ---- the sender's side -------------------------------------------------------------------

/// A free slot, FILLING until [`publish`]: (index, use), or `None` when all are in use.
pub fn post() -> Option<(u32, u32)> {
    let s = SEGMENTS.get()?;
    let start = s.next.load(Relaxed);
    for i in 0..SLOTS {
        let index = ((start + i) % SLOTS) as u32;
        let slot = own(index)?;
        if slot.state.compare_exchange(FREE, FILLING, Acquire, Relaxed).is_ok() {
            let seq = slot.seq.load(Relaxed).wrapping_add(1);
            slot.seq.store(seq, Relaxed);
            slot.same_gpu.store(0, Relaxed);
            s.next.store(index as usize + 1, Relaxed);
            return Some((index, seq));
        }
    }
    None
}

/// The buffer of a posted slot may be read from now on.
pub fn publish(index: u32) {
    if let Some(slot) = own(index) {
        slot.state.store(POSTED, Release);
    }
}

/// What became of a posted message, as the sender sees it.
pub enum Seen {
    /// Not yet taken: the sender may still withdraw it.
    Posted,
    /// The receiver is copying.
    Taken,
    /// The receiver has copied (on the sender's GPU, or not); the slot is free again.
    Done { same_gpu: bool },
}

pub fn look(index: u32) -> Seen {
    let Some(slot) = own(index) else { return Seen::Done { same_gpu: false } };
    match slot.state.load(Acquire) {
        DONE => {
            let same_gpu = slot.same_gpu.load(Relaxed) != 0;
            slot.state.store(FREE, Release);
            Seen::Done { same_gpu }
        }
        TAKEN => Seen::Taken,
        _ => Seen::Posted,
    }
}

/// Whether the receiver has marked the message done, without acting on it.
pub fn is_done(index: u32) -> bool {
    own(index).is_some_and(|s| s.state.load(Acquire) == DONE)
}

/// Takes a posted message back: `true` when the receiver had not taken it, and the sender must
/// now put the data where [`moved`] says.
pub fn withdraw(index: u32) -> bool {
    own(index).is_some_and(|s| s.state.compare_exchange(POSTED, WITHDRAWN, AcqRel, Relaxed).is_ok())
}

/// A withdrawn message's data is now at `offset` in the exported arena `arena` (0: it could not
/// be copied, and the receiver fails its receive).
pub fn moved(index: u32, arena: u64, offset: u64, handle: &[u8; 64]) {
    let Some(slot) = own(index) else { return };
    slot.arena.store(arena, Relaxed);
    slot.offset.store(offset, Relaxed);
    store_bytes(&slot.handle, handle);
    slot.state.store(MOVED, Release);
}

/// A message whose envelope MPI never delivered (its send failed or was cancelled, and it was
/// withdrawn): the slot is free again.
pub fn forget(index: u32) {
    if let Some(s) = own(index) {
        s.state.store(FREE, Release);
    }
}

// ---- the receiver's side -----------------------------------------------------------------

/// What the receiver of an envelope finds in the sender's slot.
pub enum Found {
    /// It is the receiver's to copy from the sender's buffer; [`done`] when finished.
    Mine,
    /// The sender moved the data to its exported arena: (arena, offset, handle); the slot is
    /// already free again.
    Moved(u64, u64, [u8; 64]),
    /// No such slot or use (a sender this rank cannot see).
    Lost,
}

pub fn take(pid: u32, index: u32, seq: u32) -> Found {
    let Some(slot) = peer(pid, index) else { return Found::Lost };
    if slot.seq.load(Acquire) != seq {
        return Found::Lost;
    }
    loop {
        match slot.state.compare_exchange(POSTED, TAKEN, AcqRel, Acquire) {
            Ok(_) => return Found::Mine,
            Err(MOVED) => {
                let mut handle = [0u8; 64];
                load_bytes(&slot.handle, &mut handle);
                let found = Found::Moved(slot.arena.load(Relaxed), slot.offset.load(Relaxed), handle);
                slot.state.store(FREE, Release);
                return found;
            }
            // The sender, within its own MPI call, is making sure that the program's work on
            // the buffer is done, or copying the data out of it.
            Err(FILLING | WITHDRAWN) => std::hint::spin_loop(),
            Err(_) => return Found::Lost,
        }
    }
}

/// The receiver has copied what it took (or given up on it).
pub fn done(pid: u32, index: u32, same_gpu: bool) {
    if let Some(slot) = peer(pid, index) {
        slot.same_gpu.store(same_gpu as u32, Relaxed);
        slot.state.store(DONE, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn door() -> &'static Door {
        // SAFETY: every field is an atomic integer, for which zero is a valid value (SHUT).
        Box::leak(Box::new(unsafe { std::mem::zeroed::<Door>() }))
    }

    fn buffer(capacity: usize) -> DoorBuffer {
        DoorBuffer { capacity, id: 7, offset: 64, handle: [3; 64], token: [b'1'; TOKEN_WORDS * 8] }
    }

    #[test]
    fn written_bytes_reach_the_receiver() {
        let d = door();
        let o = d.open(Some(2), Some(9), &buffer(100)).expect("a shut door opens");
        assert!(d.open(None, None, &buffer(8)).is_none(), "an open door opens again");
        let c = d.claim(2, 9, 100, |b| b.id == 7 && b.offset == 64 && b.handle == [3; 64]).expect("the sender it waits for claims it");
        assert!(d.claim(2, 9, 100, |_| true).is_none(), "a claimed door is claimed twice");
        c.written(&[5; 100], &[6; 100]);
        let w = d.shut(o).expect("a write");
        assert!(w.sent && w.len == 100);
        assert_eq!(&w.data[..100], &[5; 100][..]);
        assert_eq!(&w.old[..100], &[6; 100][..]);
        assert!(d.open(None, None, &buffer(8)).is_some(), "a shut door opens again");
    }

    #[test]
    fn only_whom_it_waits_for_fits_in() {
        let d = door();
        let o = d.open(Some(2), Some(9), &buffer(100)).unwrap();
        assert!(d.claim(1, 9, 8, |_| true).is_none(), "another source");
        assert!(d.claim(2, 8, 8, |_| true).is_none(), "another tag");
        assert!(d.claim(2, 9, 101, |_| true).is_none(), "more than the receive holds");
        assert!(d.claim(2, 9, 8, |_| false).is_none(), "a buffer the sender refuses");
        assert!(d.shut(o).is_none(), "nobody wrote");
        let o = d.open(None, None, &buffer(DOOR_BYTES)).unwrap();
        assert!(d.claim(5, 123, DOOR_BYTES, |_| true).is_some_and(|c| {
            drop(c);
            true
        }));
        assert!(d.shut(o).is_none(), "a claim given up wrote nothing");
        let o = d.open(None, None, &buffer(DOOR_BYTES)).unwrap();
        d.claim(5, 123, 3, |_| true).unwrap().abandoned(&[1, 2, 3]);
        let w = d.shut(o).expect("a write given up after it landed");
        assert!(!w.sent && w.len == 3 && w.old[..3] == [1, 2, 3]);
    }

    #[test]
    fn a_claim_on_an_earlier_opening_fails() {
        let d = door();
        let o = d.open(None, None, &buffer(16)).unwrap();
        let seen = d.state.load(Acquire);
        assert!(d.shut(o).is_none());
        let o = d.open(None, None, &buffer(16)).unwrap();
        // A sender that read the first opening's state now tries its compare-and-swap.
        assert!(d.state.compare_exchange(seen, (seen & !0xff) | CLAIMED, AcqRel, Relaxed).is_err());
        assert!(d.shut(o).is_none());
    }

    #[test]
    fn shut_waits_for_a_writer() {
        let d = door();
        let o = d.open(None, None, &buffer(8)).unwrap();
        let c = d.claim(0, 1, 8, |_| true).unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            c.written(&42u64.to_ne_bytes(), &[0; 8]);
        });
        let w = d.shut(o).expect("a write");
        assert_eq!(u64::from_ne_bytes(w.data[..8].try_into().unwrap()), 42);
        writer.join().unwrap();
    }
}
