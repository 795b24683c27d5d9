//! Nonblocking receives into host memory that an envelope may reach, watched at little cost.
//!
//! A peer that sends a device buffer may send an envelope in its place, and the program may
//! receive it into host memory: the completion call must then bring the data, so it must know
//! the receive's buffer. Every `MPI_Irecv` and `MPI_Imrecv` into host memory large enough for
//! an envelope is noted here, by request handle, and forgotten when its request completes; only
//! a receive that completes with exactly an envelope's bytes is looked at further. Where the
//! program asks for no status, MPI is asked for none either, and the buffer's first bytes tell
//! an envelope (`settle_unseen`). A host-only program pays a slot per receive and a look among
//! a few slots per request it completes, with no MPI call of cudampi's own and no lock unless
//! MPI calls may overlap.
//!
//! An entry leaves the store once its completion call reports the request complete. Where MPI
//! calls may overlap, it is taken out before the call and put back if the request is still
//! pending, as `requests` does, so that a handle MPI hands another thread meanwhile is never
//! taken for it. Requests that the inspection calls or `MPI_Request_free` handle are first
//! moved into `requests` (`promote`), which knows their rules.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

use crate::mpi::abi::{self, Handle};
use super::{self as requests, Entry, HostRecv, Kind};
use crate::fastpath::Packed;

/// A watched receive: its buffer, and what reports an error.
#[derive(Clone, Copy)]
pub struct Watched {
    name: &'static str,
    comm: Option<Handle>,
    host: HostRecv,
    /// An envelope would lie packed from the buffer's address (`fastpath::may_land`).
    packed: bool,
}

/// Request handles are addresses or small integers: one multiplication spreads them enough.
#[derive(Default)]
struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 ^ (n as u64 >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Map = HashMap<Handle, Watched, BuildHasherDefault<Spread>>;

/// Receives a program keeps posted at once are usually few: they sit in a few slots (the bits
/// of `used` mark the taken ones, so a look passes over free slots at no cost), the rest in a map.
const SLOTS: usize = 8;

/// What an empty slot holds; never read, as `used` marks it free.
const VACANT: Watched = Watched { name: "", comm: None, host: HostRecv { buf: std::ptr::null_mut(), count: 0, datatype: 0 }, packed: true };

/// The slots' handles apart from what they watch, so that a look reads only handles.
struct Store {
    keys: [Handle; SLOTS],
    slots: [Watched; SLOTS],
    used: u8,
    more: Option<Map>,
}

impl Store {
    #[inline(always)]
    fn slot(&self, h: Handle) -> Option<usize> {
        let mut bits = self.used;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            if self.keys[i] == h {
                return Some(i);
            }
            bits &= bits - 1;
        }
        None
    }

    #[inline(always)]
    fn insert(&mut self, h: Handle, w: Watched) {
        let old = match self.slot(h) {
            Some(i) => Some(std::mem::replace(&mut self.slots[i], w)),
            None if self.used != u8::MAX => {
                let i = self.used.trailing_ones() as usize;
                self.keys[i] = h;
                self.slots[i] = w;
                self.used |= 1 << i;
                None
            }
            None => self.more.get_or_insert_with(Map::default).insert(h, w),
        };
        if let Some(old) = old {
            tally(-1, &old);
        }
        tally(1, &w);
    }

    fn contains(&self, h: Handle) -> bool {
        self.slot(h).is_some() || self.more.as_ref().is_some_and(|m| m.contains_key(&h))
    }

    #[inline(always)]
    fn remove(&mut self, h: Handle) -> Option<Watched> {
        let found = match self.slot(h) {
            Some(i) => {
                self.used &= !(1 << i);
                Some(self.slots[i])
            }
            None => self.more.as_mut().and_then(|m| m.remove(&h)),
        };
        if let Some(w) = &found {
            tally(-1, w);
        }
        found
    }
}

/// The store, with a lock only where MPI calls may run at once (`MPI_THREAD_MULTIPLE`):
/// otherwise the program never makes two MPI calls at a time, and the calls it makes from
/// different threads are ordered by its own synchronisation.
struct Shared {
    store: std::cell::UnsafeCell<Store>,
    lock: Mutex<()>,
}

// SAFETY: the store is reached only through `with`, which locks unless calls are serial.
unsafe impl Sync for Shared {}

static STORE: Shared = Shared { store: std::cell::UnsafeCell::new(Store { keys: [0; SLOTS], slots: [VACANT; SLOTS], used: 0, more: None }), lock: Mutex::new(()) };
/// Entries in the store: completion calls look there only when some are.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Entries whose envelope would not lie packed from the buffer's address, changed under the
/// store's lock where calls overlap.
static SPREAD: AtomicUsize = AtomicUsize::new(0);
/// No two MPI calls run at once (`MPI_THREAD_MULTIPLE` was not granted).
static SERIAL: AtomicBool = AtomicBool::new(false);

fn with<R>(f: impl FnOnce(&mut Store) -> R) -> R {
    let _guard: Option<MutexGuard<()>> = match SERIAL.load(Relaxed) {
        true => None,
        false => Some(STORE.lock.lock().unwrap_or_else(|e| e.into_inner())),
    };
    // SAFETY: exclusive, by the lock or because MPI calls do not overlap.
    f(unsafe { &mut *STORE.store.get() })
}

/// After the library's `MPI_Init`: whether MPI calls may overlap.
pub fn init() {
    let serial = crate::mpi::real::calls_overlap() == Some(false);
    SERIAL.store(serial, Relaxed);
}

/// Counts an entry in or out of `COUNT` and `SPREAD`, without a locked instruction where calls
/// do not overlap (under the lock otherwise, but `any` reads `COUNT` without).
fn tally(delta: isize, w: &Watched) {
    let add = |n: &AtomicUsize| match SERIAL.load(Relaxed) {
        true => bump(n, delta),
        false => {
            n.fetch_add(delta as usize, Relaxed);
        }
    };
    add(&COUNT);
    if !w.packed {
        add(&SPREAD);
    }
}

#[inline(always)]
pub fn any() -> bool {
    COUNT.load(Relaxed) != 0
}

/// Notes the receive MPI just posted under `*request`. The usual case, calls that do not
/// overlap and a free slot, is inlined into the receive call: out of line, it took a quarter of
/// the instructions the fast paths add to a host `MPI_Irecv` + `MPI_Isend` + `MPI_Waitall`
/// (callgrind).
#[inline(always)]
pub fn insert(request: *const c_void, name: &'static str, comm: Option<Handle>, host: HostRecv, packed: Packed) {
    if request.is_null() {
        return;
    }
    let abi = abi::get();
    // SAFETY: MPI has just written the handle of a successfully posted request there.
    let h = abi.key(unsafe { abi.request_at(request, 0) });
    if SERIAL.load(Relaxed) {
        // SAFETY: calls do not overlap.
        let s = unsafe { &mut *STORE.store.get() };
        // A handle MPI hands out again while watched would be a receive the program never
        // completed; the general path replaces its entry.
        if s.used != u8::MAX && s.slot(h).is_none() {
            let i = s.used.trailing_ones() as usize;
            s.keys[i] = h;
            let slot = &mut s.slots[i];
            slot.name = name;
            slot.comm = comm;
            slot.host = host;
            slot.packed = packed.0;
            s.used |= 1 << i;
            bump(&COUNT, 1);
            if !packed.0 {
                bump(&SPREAD, 1);
            }
            return;
        }
    }
    insert_any(h, Watched { name, comm, host, packed: packed.0 });
}

/// `n += delta` where calls do not overlap: no locked instruction.
#[inline(always)]
fn bump(n: &AtomicUsize, delta: isize) {
    n.store(n.load(Relaxed).wrapping_add_signed(delta), Relaxed);
}

#[cold]
fn insert_any(h: Handle, w: Watched) {
    with(|s| s.insert(h, w));
}

/// The watched requests among those of a completion call, as (index, handle). Where MPI calls
/// may overlap, their entries are taken out of the store meanwhile (`out`, in the same order);
/// otherwise they stay, and only those that complete leave it.
pub struct Taken {
    inline: [(usize, Handle); INLINE],
    len: usize,
    more: Vec<(usize, Handle)>,
    out: Vec<Watched>,
}

const INLINE: usize = 4;

impl Default for Taken {
    fn default() -> Taken {
        Taken { inline: [(0, 0); INLINE], len: 0, more: Vec::new(), out: Vec::new() }
    }
}

impl Taken {
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.more.is_empty()
    }

    fn push(&mut self, k: usize, h: Handle) {
        if self.len < INLINE {
            self.inline[self.len] = (k, h);
            self.len += 1;
        } else {
            self.more.push((k, h));
        }
    }

    fn pairs(&self) -> impl Iterator<Item = (usize, Handle)> + '_ {
        self.inline[..self.len].iter().chain(&self.more).copied()
    }
}

/// The watched requests among the `n` at `reqs` (see the module comment).
pub fn take(reqs: *const c_void, n: c_int) -> Taken {
    let mut taken = Taken::default();
    if reqs.is_null() || n <= 0 {
        return taken;
    }
    let abi = abi::get();
    let serial = SERIAL.load(Relaxed);
    with(|s| {
        for k in 0..n as usize {
            // SAFETY: the caller passes n requests.
            let h = abi.key(unsafe { abi.request_at(reqs, k) });
            if serial {
                if s.contains(h) {
                    taken.push(k, h);
                }
            } else if let Some(w) = s.remove(h) {
                taken.push(k, h);
                taken.out.push(w);
            }
        }
    });
    taken
}

/// After the completion call, which returned `rc`: a request whose handle MPI replaced
/// completed, and if `status(index)` shows an envelope's bytes its data is brought now; the
/// others stay watched. Returns the landings that failed: (index, error).
pub fn settle(taken: Taken, reqs: *const c_void, rc: c_int, status: impl Fn(usize) -> Option<*mut c_void>) -> Vec<(usize, c_int)> {
    let abi = abi::get();
    let in_status = rc != 0 && crate::mpi::errors::class(rc) == abi.err_in_status;
    let mut failed = Vec::new();
    let mut pending: Vec<(Handle, Watched)> = Vec::new();
    let serial = taken.out.is_empty();
    for (i, (k, h)) in taken.pairs().enumerate() {
        // SAFETY: the same array the call was given.
        let completed = abi.key(unsafe { abi.request_at(reqs, k) }) != h;
        let w = match serial {
            true if !completed => continue,
            true => match with(|s| s.remove(h)) {
                Some(w) => w,
                None => continue,
            },
            false if !completed => {
                pending.push((h, taken.out[i]));
                continue;
            }
            false => taken.out[i],
        };
        let Some(st) = status(k) else { continue };
        // SAFETY: a status MPI filled for a completed request.
        let error = if in_status && !st.is_null() { unsafe { abi.status_error(st) } } else { rc };
        if error != 0 {
            continue;
        }
        if let Err(e) = crate::fastpath::host_received(w.name, w.host.buf, w.host.count, w.host.datatype, w.comm, st) {
            failed.push((k, e));
        }
    }
    if !pending.is_empty() {
        with(|s| pending.into_iter().for_each(|(h, w)| s.insert(h, w)));
    }
    failed
}

/// The handles of a completion call's requests before it, for a call that asks MPI for no
/// status (the caller asked for none): [`settle_unseen`] then tells which completed, as MPI
/// replaces their handles, and whether each received an envelope, from its buffer's first bytes.
/// Only where MPI calls do not overlap, so that entries stay in the store meanwhile, and while
/// every watched buffer would hold an envelope packed from its address.
pub struct Before {
    keys: [std::mem::MaybeUninit<Handle>; BEFORE],
    n: usize,
}

const BEFORE: usize = 8;

/// Inlined into the completion call, which then reads the handles where they were written,
/// not from a copy of a returned struct: on the development VM a 4 KiB `MPI_Irecv` +
/// `MPI_Isend` + `MPI_Waitall` exchange on host buffers then cost +5.3% over `PMPI` instead of
/// +7.5% (medians of 8 alternated runs of `bench/exchange`, stand-in driver), where `perf` had
/// found the load of that copy among the two costliest of cudampi's. On an H100 host it did
/// not help: +4.95% against +3.5%, the runs' spreads overlapping
/// (`2026-11-26-1xH100-ompi4.1.6-exchange`).
#[inline(always)]
pub fn before(reqs: *const c_void, n: c_int) -> Option<Before> {
    if !SERIAL.load(Relaxed) || SPREAD.load(Relaxed) != 0 || reqs.is_null() || n <= 0 || n as usize > BEFORE {
        return None;
    }
    let abi = abi::get();
    let mut keys = [std::mem::MaybeUninit::uninit(); BEFORE];
    for (k, key) in keys.iter_mut().enumerate().take(n as usize) {
        // SAFETY: the caller passes n requests.
        key.write(abi.key(unsafe { abi.request_at(reqs, k) }));
    }
    Some(Before { keys, n: n as usize })
}

/// After the completion call of `before`: the watched requests that completed leave the store,
/// and an envelope in one's buffer brings its data. Returns the first landing that failed, all
/// being tried: the program asked for no status to report the others in. Inlined into the
/// completion call, as `before` is: out of line, its own frame cost as many instructions as
/// the rest of the watch's work in the call.
#[inline(always)]
pub fn settle_unseen(before: &Before, reqs: *const c_void) -> Option<c_int> {
    let abi = abi::get();
    let mut failed = None;
    for (k, key) in before.keys[..before.n].iter().enumerate() {
        // SAFETY: `before` wrote the first n keys.
        let h = unsafe { key.assume_init() };
        // SAFETY: the same array the call was given.
        if abi.key(unsafe { abi.request_at(reqs, k) }) == h {
            continue;
        }
        // SAFETY: calls do not overlap (`before`).
        let s = unsafe { &mut *STORE.store.get() };
        let landed = match s.slot(h) {
            Some(i) => {
                // Every watched buffer holds an envelope packed from its address (`before`).
                s.used &= !(1 << i);
                bump(&COUNT, -1);
                let w = &s.slots[i];
                crate::fastpath::host_received_unseen(w.name, w.host.buf, w.host.count, w.host.datatype, w.comm)
            }
            None => match s.remove(h) {
                Some(w) => crate::fastpath::host_received_unseen(w.name, w.host.buf, w.host.count, w.host.datatype, w.comm),
                None => continue,
            },
        };
        if let Err(e) = landed {
            failed.get_or_insert(e);
        }
    }
    failed
}

/// Moves the watched requests among `n` into `requests`, as tracked host receives, for the
/// calls that only `requests` serves.
pub fn promote(reqs: *const c_void, n: c_int) {
    if !any() {
        return;
    }
    let taken = take(reqs, n);
    let serial = taken.out.is_empty();
    for (i, (_, h)) in taken.pairs().enumerate() {
        let w = match serial {
            true => match with(|s| s.remove(h)) {
                Some(w) => w,
                None => continue,
            },
            false => taken.out[i],
        };
        // The handle by value, read back as a one-element array (little-endian, so an `int`
        // handle reads the same).
        let slot = [h];
        let _ = requests::insert(slot.as_ptr().cast(), Entry::host(w.name, w.comm, None, w.host, Kind::Once));
    }
}

/// Forgets everything (`MPI_Finalize`).
pub fn clear() {
    with(|s| {
        s.used = 0;
        s.more = None;
    });
    COUNT.store(0, Relaxed);
    SPREAD.store(0, Relaxed);
}
