//! One path on every rank: whether a blocking collective runs on NCCL is agreed by all ranks
//! of the communicator, since each rank knows only where its own buffers live and a correct
//! program may pass host memory on some ranks and device memory on others.
//!
//! What every rank knows alike decides first, with no message: the call and its size (the
//! count and datatype of a collective match on every rank), whether NCCL carries its operation
//! and datatype, and the communicator's state below, which changes only at agreements and so
//! identically on every rank. Only a call that passes these asks the other ranks: one
//! `MPI_Allreduce` (`MPI_MAX` of `FLAGS` integers) on the program's own communicator, inside the
//! program's own blocking collective on it (or its twin through shared memory, once the
//! communicator's NCCL communicator exists and its ranks share a node: `board`), saying
//! whether each rank can run its part on NCCL
//! (its significant buffers are device memory of one GPU, without gaps, and NCCL loaded),
//! whether it passed device memory at all, whether it has device memory but no NCCL (then the
//! communicator never asks again), its largest buffer, for the calls whose counts differ by
//! rank (`MPI_Gatherv`, `MPI_Scatterv`, `MPI_Alltoallv`), and whether it went through scratch
//! memory since the last agreement. NCCL runs when every rank can; otherwise every rank
//! stages, as before.
//!
//! Why it cannot hang: the agreement is a collective on the same communicator as the
//! program's call, made by every rank at the same point of its sequence of collectives on it
//! (the state that decides whether to ask is the same on every rank), so it matches exactly as
//! the program's call would; and a blocking collective may synchronise the ranks in any
//! correct MPI program (MPI-4.1 section 6.14). After it, every rank queues its part on NCCL
//! before waiting for its own, so NCCL's collective always finds all its ranks. Nonblocking
//! collectives never ask, since their starts must not wait for other ranks: they follow the
//! last agreement (`flight`). Persistent collectives ask at their initialization, which may
//! wait.
//!
//! What it costs: a program that never passes device memory asks at its first 8 large
//! collectives on a communicator (`HOST_STREAK`), then after gaps of 1, 3, 7 ... calls, and
//! from then on at every 64th (`MAX_INTERVAL`); each ask is one small host allreduce. A
//! communicator that saw device memory in one of its last 8 agreements asks at every call,
//! which is what lets mixed host and device calls each take their best path. Calls in a gap are
//! staged as before, whatever their buffers. After `NCCL_STREAK` agreements in a row that
//! chose NCCL, the reductions (whose datatype and operation match on every rank) stop asking
//! in gaps of the same shape, and go to NCCL as a nonblocking start does (`Slot::chose`).

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::cuda::nccl;
use crate::mpi::abi::Handle;
use crate::mpi::real;

/// Longest run of large collectives on one communicator taken without asking.
pub const MAX_INTERVAL: u32 = 64;
/// Agreements without device memory after which a communicator starts asking less often.
pub const HOST_STREAK: u32 = 8;
/// Agreements on NCCL after which a communicator's reductions start asking less often.
pub const NCCL_STREAK: u32 = 8;

/// What one communicator's ranks have agreed, the same on each of them.
pub struct State {
    /// Agreements in a row that found no device memory on any rank.
    host_streak: u32,
    /// Agreements in a row that chose NCCL, with no rank having gone through scratch memory
    /// since.
    nccl_streak: u32,
    /// This rank ran a collective on NCCL through scratch memory (host buffers, say) since the
    /// last agreement: it says so at the next, which then starts the streak afresh.
    pub strayed: bool,
    /// Never NCCL here: an intercommunicator, two ranks on one GPU, a rank without NCCL, or
    /// NCCL failed to start.
    pub never: bool,
    /// This rank's NCCL communicator, made at the first collective every rank could run on it;
    /// shared with the nonblocking collectives still running on it.
    pub nccl: Option<Shared>,
    /// Where the agreements go once the NCCL communicator is made, if every rank is on one
    /// node: shared memory instead of a host collective.
    pub board: Option<super::board::Board>,
}

impl State {
    /// The agreement (the maximum over the ranks of each of `flags`), through the board where
    /// the communicator has one.
    pub fn agree(&mut self, comm: Handle, flags: [i64; FLAGS]) -> Result<[i64; FLAGS], c_int> {
        match self.board.as_mut() {
            Some(b) => b.agree(comm, flags),
            None => agree(comm, flags),
        }
    }
}

/// An NCCL communicator as the communicator's state and its collectives in flight hold it.
pub type Shared = Arc<Mutex<nccl::Comm>>;

pub fn lock(c: &Shared) -> MutexGuard<'_, nccl::Comm> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

/// `Slot::skip` of a communicator that never asks.
const NEVER: u32 = u32::MAX;

/// A communicator's state, hung on it as an attribute so that it goes when the communicator
/// does (`MPI_Comm_free`, from any language binding). The calls left before the next
/// agreement are kept outside the lock: most calls of a host program only count down.
pub struct Slot {
    skip: AtomicU32,
    /// Reductions left that follow the last agreement's choice of NCCL without asking.
    follow: AtomicU32,
    /// The last agreement ran its call on NCCL: the nonblocking collectives that follow, which
    /// cannot ask, run there too (`engine::start`).
    on_nccl: AtomicBool,
    state: Mutex<State>,
}

impl Slot {
    /// Whether this call is staged without asking: a gap of the schedule, or a communicator
    /// that never asks. MPI orders the collectives of one communicator, so no two threads
    /// count down at once.
    #[inline]
    pub fn skips(&self) -> bool {
        match self.skip.load(Ordering::Relaxed) {
            0 => false,
            NEVER => true,
            n => {
                self.skip.store(n - 1, Ordering::Relaxed);
                true
            }
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes an agreement's answer: how long until the next. A communicator that saw device
    /// memory in one of its last `HOST_STREAK` agreements asks at every call, so that a program
    /// alternating host and device collectives on it (a host norm between device steps) keeps
    /// its device calls on NCCL; after that the gaps double, up to `MAX_INTERVAL`.
    pub fn agreed(&self, st: &mut State, any_device: bool) {
        st.host_streak = if any_device { 0 } else { st.host_streak.saturating_add(1) };
        let doublings = st.host_streak.saturating_sub(HOST_STREAK);
        let gap = if doublings == 0 { 0 } else { (1u32 << doublings.min(6)).min(MAX_INTERVAL) - 1 };
        self.skip.store(if st.never { NEVER } else { gap }, Ordering::Relaxed);
    }

    /// The ranks agreed that this communicator never runs NCCL.
    pub fn never(&self, st: &mut State) {
        st.never = true;
        self.skip.store(NEVER, Ordering::Relaxed);
        self.follow.store(0, Ordering::Relaxed);
        self.on_nccl.store(false, Ordering::Relaxed);
    }

    /// What the last agreement chose: NCCL (every rank could run the call there) or staging;
    /// `strayed`: a rank went through scratch memory since the one before. After
    /// `NCCL_STREAK` choices of NCCL in a row, the reductions that follow go to NCCL without
    /// asking, in gaps that double up to `MAX_INTERVAL` calls (`Slot::follows`).
    pub fn chose(&self, st: &mut State, nccl: bool, strayed: bool) {
        st.nccl_streak = if nccl && !strayed { st.nccl_streak.saturating_add(1) } else { 0 };
        let doublings = st.nccl_streak.saturating_sub(NCCL_STREAK);
        let gap = if doublings == 0 { 0 } else { (1u32 << doublings.min(6)).min(MAX_INTERVAL) - 1 };
        self.follow.store(if nccl { gap } else { 0 }, Ordering::Relaxed);
        self.on_nccl.store(nccl, Ordering::Relaxed);
    }

    /// Whether this reduction goes to NCCL without asking (a gap of the schedule `chose`
    /// sets). MPI orders the collectives of one communicator, so no two threads count down at
    /// once.
    #[inline]
    pub fn follows(&self) -> bool {
        match self.follow.load(Ordering::Relaxed) {
            0 => false,
            n => {
                self.follow.store(n - 1, Ordering::Relaxed);
                true
            }
        }
    }

    /// Whether the last agreement chose NCCL: the same answer on every rank, since agreements
    /// come at the same points of every rank's sequence of collectives on the communicator.
    #[inline]
    pub fn on_nccl(&self) -> bool {
        self.on_nccl.load(Ordering::Relaxed)
    }
}

/// Bumped whenever a slot is deleted, so that a thread's remembered slot is looked up again.
static GENERATION: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The last communicator this thread asked about, its slot and the generation then.
    static LAST: std::cell::Cell<(u64, Handle, usize)> = const { std::cell::Cell::new((u64::MAX, 0, 0)) };
}

/// Every live slot, so that `MPI_Finalize` can free the NCCL communicators while MPI still runs.
static LIVE: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static KEYVAL: Mutex<Option<c_int>> = Mutex::new(None);

fn live() -> MutexGuard<'static, Vec<usize>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Copying a communicator (`MPI_Comm_dup`) does not copy the state: the copy agrees afresh.
unsafe extern "C" fn no_copy(_: Handle, _: c_int, _: *mut c_void, _: *mut c_void, _: *mut c_void, flag: *mut c_int) -> c_int {
    // SAFETY: MPI passes a valid flag pointer.
    unsafe { *flag = 0 };
    0
}

/// The communicator is being freed (every rank frees it, collectively): its NCCL
/// communicator goes with it.
unsafe extern "C" fn delete(_: Handle, _: c_int, value: *mut c_void, _: *mut c_void) -> c_int {
    let slot = value as *mut Slot;
    let _ = std::panic::catch_unwind(|| {
        GENERATION.fetch_add(1, Ordering::AcqRel);
        live().retain(|&s| s != slot as usize);
        // SAFETY: the Box leaked by `slot` for this communicator, deleted once.
        drop(unsafe { Box::from_raw(slot) });
    });
    0
}

fn keyval() -> Option<c_int> {
    let mut k = KEYVAL.lock().unwrap_or_else(|e| e.into_inner());
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

/// The state of `comm`, made on the first call that needs it. `None` where MPI refuses (a
/// bad communicator: the staged path gives the library's error).
pub fn slot(comm: Handle) -> Option<&'static Slot> {
    let generation = GENERATION.load(Ordering::Acquire);
    let (g, c, s) = LAST.get();
    if g == generation && c == comm {
        // SAFETY: no slot was deleted since this one was found, so it is live.
        return Some(unsafe { &*(s as *const Slot) });
    }
    let found = lookup(comm)?;
    LAST.set((generation, comm, found as *const Slot as usize));
    Some(found)
}

fn lookup(comm: Handle) -> Option<&'static Slot> {
    let p = real::pmpi()?;
    let key = keyval()?;
    let mut value: *mut c_void = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: valid out-pointers; MPI writes the attribute's value (a pointer) into `value`.
    if unsafe { (p.comm_get_attr)(comm, key, (&mut value as *mut *mut c_void).cast(), &mut flag) } != 0 {
        return None;
    }
    if flag != 0 && !value.is_null() {
        // SAFETY: a Slot this module leaked and that lives until the attribute is deleted.
        return Some(unsafe { &*(value as *const Slot) });
    }
    let g = crate::mpi::comm::group(comm).ok()?;
    let state = State { host_streak: 0, nccl_streak: 0, strayed: false, never: g.inter, nccl: None, board: None };
    let skip = AtomicU32::new(if g.inter { NEVER } else { 0 });
    let slot = Box::into_raw(Box::new(Slot { skip, follow: AtomicU32::new(0), on_nccl: AtomicBool::new(false), state: Mutex::new(state) }));
    // SAFETY: a live communicator and keyval; the value is the slot's address.
    if unsafe { (p.comm_set_attr)(comm, key, slot.cast()) } != 0 {
        // SAFETY: not handed to MPI; freed once.
        drop(unsafe { Box::from_raw(slot) });
        return None;
    }
    live().push(slot as usize);
    // SAFETY: as above.
    Some(unsafe { &*slot })
}

/// What each rank says at an agreement: whether it cannot run the call on NCCL, whether it
/// passed device memory, whether it has device memory but no NCCL, its largest buffer, and
/// whether it went through scratch memory since the last agreement.
pub const FLAGS: usize = 5;

/// The agreement itself: the maximum over the ranks of each of `flags`.
pub fn agree(comm: Handle, flags: [i64; FLAGS]) -> Result<[i64; FLAGS], c_int> {
    let p = real::pmpi().ok_or(crate::mpi::abi::get().err_intern)?;
    let (long_long, max) = super::kinds::agreement_type_and_op();
    let mut out = [0i64; FLAGS];
    // SAFETY: FLAGS 64-bit integers each way, with the library's own handles.
    match unsafe { (p.allreduce)(flags.as_ptr().cast(), out.as_mut_ptr().cast(), FLAGS as c_int, long_long, max, comm) } {
        0 => Ok(out),
        rc => Err(rc),
    }
}

/// Frees every NCCL communicator, before the library's `MPI_Finalize` (which may never call the
/// attributes' delete functions). Every rank finalizes, so every rank frees its own.
pub fn finalize() {
    let slots: Vec<usize> = live().clone();
    for s in slots {
        // SAFETY: a live slot (deleted ones leave LIVE first).
        let slot = unsafe { &*(s as *const Slot) };
        let mut st = slot.lock();
        // Collectives still in flight hold their own reference; the last one frees it.
        if let Some(c) = st.nccl.take().and_then(|c| Arc::try_unwrap(c).ok()) {
            c.into_inner().unwrap_or_else(|e| e.into_inner()).destroy();
        }
        slot.never(&mut st);
    }
}
