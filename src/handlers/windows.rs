//! Windows: the windows over device memory and their synchronisation, and the one-sided
//! operations on device buffers that wait for their completion point.
//!
//! A window over device memory is mapped inside a node (`mapped.rs`) or served by its owners
//! elsewhere (`served.rs`), device memory attached to a dynamic window served too; each of
//! their calls goes there first. What follows is the path left where neither is taken
//! (`CUDAMPI_RMA_RING=0`, a process without a CUDA driver at a dynamic window's creation):
//! a window created over device memory gets a host public copy (`staging::shadow`) and
//! reports `MPI_WIN_MODEL` = `MPI_WIN_SEPARATE`; `MPI_WIN_BASE` stays the device address.
//! Device memory attached to a dynamic window gets one too, and there the library is given the
//! public copy's address: an origin names target memory by the address `MPI_Get_address`
//! gave at the target (MPI-4.1 §12.2.4), so `MPI_Get_address` of attached device memory
//! answers with the public copy's address, the one the library knows. The
//! copies are synchronised where MPI's separate model says (MPI-4.1 §12.7): the program's stores
//! become public at `MPI_Win_fence`, `MPI_Win_post`, `MPI_Win_unlock(_all)` and `MPI_Win_sync`
//! (before the real call, so that no access of the next epoch sees stale bytes), and remote
//! updates reach device memory at `MPI_Win_fence`, `MPI_Win_wait` (and a successful
//! `MPI_Win_test`), `MPI_Win_lock(_all)`, `MPI_Win_sync` (after the real call) and also at
//! `MPI_Win_unlock(_all)` and `MPI_Win_free`.
//!
//! A blocking RMA call on a device buffer (`rma.rs`) stages it, and the staging buffer stays
//! here, with the window, until the operation completes at the origin: `MPI_Win_fence`,
//! `MPI_Win_complete`, `MPI_Win_unlock(_all)`, `MPI_Win_flush(_local)(_all)` (those to one
//! target complete only its operations). There a get's result is copied to device memory,
//! also a request-based one's whose request the program has not completed yet.
//!
//! A program with no device window and no pending staged operation pays one atomic load in
//! each synchronisation call. Locks are held for list operations only, never across a copy
//! or an MPI call. It may use every layer below the handlers; `rma.rs` and `lifecycle.rs` use it.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::base::log;
use crate::cuda::{self, Location};
use crate::handlers::mapped::{self, Plan};
use crate::handlers::served;
use crate::handlers::side::Carried;
use crate::mpi::abi::{self, Handle};
use crate::mpi::errors;
use crate::requests;
use crate::staging::shadow::Shadow;
use crate::staging::stage::Staged;

/// What cudampi keeps of one window.
#[derive(Default)]
struct Win {
    /// This process's part of the window is device memory.
    shadow: Option<Arc<Mutex<Shadow>>>,
    /// Device memory attached to this dynamic window.
    attached: Vec<Arc<Mutex<Shadow>>>,
    /// Blocking operations on device buffers not yet complete at the origin, oldest first.
    pending: Vec<Pending>,
    /// Request-based operations with a device result: (target, request, entry number). A
    /// completion call on the window completes them too, so their results are copied then,
    /// before the program completes the request.
    requests: Vec<(c_int, Handle, u64)>,
}

/// One staged blocking operation.
pub struct Pending {
    pub name: &'static str,
    pub target: c_int,
    /// The buffers MPI reads, kept until then.
    pub _origin: Vec<Staged>,
    /// The buffer MPI writes, copied to the device at completion.
    pub result: Option<Staged>,
}

static WINDOWS: Mutex<BTreeMap<Handle, Win>> = Mutex::new(BTreeMap::new());
/// Entries in `WINDOWS`.
static TRACKED: AtomicUsize = AtomicUsize::new(0);

fn windows() -> MutexGuard<'static, BTreeMap<Handle, Win>> {
    WINDOWS.lock().unwrap_or_else(|e| e.into_inner())
}

fn lock(s: &Mutex<Shadow>) -> MutexGuard<'_, Shadow> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether any window has device memory or a pending staged operation.
#[inline(always)]
fn any() -> bool {
    TRACKED.load(Relaxed) != 0
}

/// Whether a synchronisation call on some window may have work for cudampi: the Fortran entry
/// points serve window calls without buffers only then.
pub fn tracked() -> bool {
    any() || carried()
}

/// Whether some window's device parts are cudampi's to reach (mapped or served windows): an
/// RMA call on a window then comes to cudampi whatever its buffers.
pub fn carried() -> bool {
    mapped::any() || served::any()
}

fn recount(t: &BTreeMap<Handle, Win>) {
    TRACKED.store(t.len(), Relaxed);
}

/// Keeps a staged blocking operation with its window until it completes at the origin.
pub fn keep(win: Handle, op: Pending) {
    let mut t = windows();
    t.entry(abi::get().key(win)).or_default().pending.push(op);
    recount(&t);
}

/// Notes a request-based operation with a device result (see [`Win::requests`]).
pub fn keep_request(win: Handle, target: c_int, request: Handle, number: u64) {
    let mut t = windows();
    let w = t.entry(abi::get().key(win)).or_default();
    // Requests the program completed itself are forgotten before the list grows long, so that
    // a long epoch of request-based gets keeps only those in flight.
    if w.requests.len() >= 64 {
        w.requests.retain(|&(_, h, n)| requests::is_live(h, n));
    }
    w.requests.push((target, request, number));
    recount(&t);
}

/// The public copies of `win` in this process: the created window's, or the attached ones.
fn shadows(win: Handle) -> Vec<Arc<Mutex<Shadow>>> {
    if !any() {
        return Vec::new();
    }
    windows().get(&abi::get().key(win)).map(|w| w.shadow.iter().chain(&w.attached).cloned().collect()).unwrap_or_default()
}

/// Completes the pending operations of `win` to `target` (all of them for `None`): results go
/// to the device, staging buffers are released. The first failed copy's code is returned.
fn complete(win: Handle, target: Option<c_int>) -> Result<(), c_int> {
    if !any() {
        return Ok(());
    }
    let (done, reqs) = {
        let mut t = windows();
        let key = abi::get().key(win);
        let Some(w) = t.get_mut(&key) else { return Ok(()) };
        let mine = |r: c_int| target.map_or(true, |t| t == r);
        let (done, left): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut w.pending).into_iter().partition(|p| mine(p.target));
        w.pending = left;
        let (reqs, left): (Vec<_>, Vec<_>) = std::mem::take(&mut w.requests).into_iter().partition(|r| mine(r.0));
        w.requests = left;
        if w.pending.is_empty() && w.requests.is_empty() && w.shadow.is_none() && w.attached.is_empty() {
            t.remove(&key);
        }
        recount(&t);
        (done, reqs)
    };
    let errh = errors::on_window(win);
    let mut first = Ok(());
    for (_, h, number) in reqs {
        if let Err(e) = requests::deliver_now(h, number) {
            first = first.and(Err(e));
        }
    }
    for p in done {
        if let Some(r) = &p.result {
            if let Err(e) = r.deliver(p.name, errh, std::ptr::null_mut()) {
                first = first.and(Err(e));
            }
        }
    }
    first
}

/// Runs `f` on every public copy of `win`, all of them even after a failure; the first
/// failure's code is returned.
fn each(win: Handle, mut f: impl FnMut(&mut Shadow) -> Result<(), c_int>) -> Result<(), c_int> {
    shadows(win).iter().fold(Ok(()), |first, s| {
        let r = f(&mut lock(s));
        first.and(r)
    })
}

/// Private to public, before the real call (see the module comment).
fn publish(name: &'static str, win: Handle) -> Result<(), c_int> {
    each(win, |s| s.publish(name, errors::on_window(win)))
}

/// Public to private, after the real call. `fresh`: this call published before the real call
/// (or the program asserted `MPI_MODE_NOSTORE`), so the device memory equals the snapshot.
fn absorb(name: &'static str, win: Handle, fresh: bool) -> Result<(), c_int> {
    each(win, |s| s.absorb(name, errors::on_window(win), fresh))
}

/// The call's own code if it failed, else the first of cudampi's.
fn outcome(rc: c_int, mine: &[Result<(), c_int>]) -> c_int {
    if rc != 0 {
        return rc;
    }
    mine.iter().find_map(|r| r.err()).unwrap_or(0)
}

/// The library's `MPI_Win_create` of a carried window: no bytes of a device part.
fn create_carried(c: impl Carried, base: *mut c_void, size: isize, win: *mut c_void, call: impl FnOnce(*mut c_void, isize) -> c_int) -> c_int {
    let rc = if c.own_device() { call(std::ptr::null_mut(), 0) } else { call(base, size) };
    if rc == 0 && !win.is_null() {
        // SAFETY: MPI has just written the new window's handle there.
        c.register(unsafe { abi::get().handle_at(win) });
    } else {
        c.discard();
    }
    rc
}

/// `MPI_Win_create_dynamic`: served by the owners of the device memory attached to it
/// (`served.rs`) where a process can reach device memory, else as the library makes it.
pub fn win_create_dynamic(name: &'static str, comm: Handle, win: *mut c_void, call: impl FnOnce() -> c_int) -> c_int {
    match served::prepare_dynamic(name, comm) {
        Err(rc) => rc,
        Ok(Some(s)) => create_carried(*s, std::ptr::null_mut(), 0, win, |_, _| call()),
        Ok(None) => call(),
    }
}

/// `MPI_Win_create(_c)`: inside a node a window may be mapped (`mapped.rs`), elsewhere served
/// (`served.rs`), a process with a device part then giving the library no bytes; otherwise
/// (`CUDAMPI_RMA_RING=0`) a device base gets a host public copy, which the library is given.
pub fn win_create(name: &'static str, base: *mut c_void, size: isize, disp_unit: i64, comm: Handle, win: *mut c_void, call: impl FnOnce(*mut c_void, isize) -> c_int) -> c_int {
    match mapped::prepare(name, base, size, disp_unit, comm) {
        Err(rc) => return rc,
        Ok(Plan::Mapped(m)) => return create_carried(*m, base, size, win, call),
        Ok(Plan::Declined) => (),
    }
    match served::prepare(name, base, size, disp_unit, comm) {
        Err(rc) => return rc,
        Ok(Some(s)) => return create_carried(*s, base, size, win, call),
        Ok(None) => (),
    }
    let dev = match cuda::locate(base) {
        Location::Device(dev) if size >= 0 => dev,
        Location::Unreadable if size > 0 => return errors::unreadable(name, Some(comm), base),
        _ => return call(base, size),
    };
    let s = match Shadow::new(name, Some(comm), dev, base, size as usize) {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    let rc = call(s.public(), size);
    if rc == 0 && !win.is_null() {
        // SAFETY: MPI has just written the new window's handle there.
        let h = abi::get().key(unsafe { abi::get().handle_at(win) });
        let mut t = windows();
        t.insert(h, Win { shadow: Some(Arc::new(Mutex::new(s))), ..Win::default() });
        recount(&t);
    }
    rc
}

/// Device memory attached to dynamic windows, every window's: (device address, length, its
/// public copy), for `MPI_Get_address`. A range attached to several windows has one copy.
static ATTACHED: Mutex<Vec<(usize, usize, Arc<Mutex<Shadow>>)>> = Mutex::new(Vec::new());
/// Entries in `ATTACHED`: `MPI_Get_address` looks no further while there are none.
static N_ATTACHED: AtomicUsize = AtomicUsize::new(0);

fn attached() -> MutexGuard<'static, Vec<(usize, usize, Arc<Mutex<Shadow>>)>> {
    ATTACHED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drops the ranges no window holds any more (only `ATTACHED` holds their copy).
fn forget_unattached() {
    let mut a = attached();
    a.retain(|(_, _, s)| Arc::strong_count(s) > 1);
    N_ATTACHED.store(a.len(), Relaxed);
}

/// `MPI_Win_attach`: device memory gets a public copy, which is what the library attaches (see
/// the module comment). The same range attached to a second window shares the first one's
/// copy; a range that overlaps another attached range without being it is refused
/// (`MPI_ERR_RMA_ATTACH`): one address at the target could then name two copies.
pub fn win_attach(name: &'static str, win: Handle, base: *mut c_void, size: isize, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    let errh = errors::on_window(win);
    let dev = match cuda::locate(base) {
        Location::Device(dev) if size > 0 => match served::attach(name, win, base, size, dev) {
            Some(rc) => return rc,
            None => dev,
        },
        Location::Unreadable if size > 0 => return errors::unreadable(name, errh, base),
        _ => return call(base),
    };
    let (at, len) = (base as usize, size as usize);
    let known = attached().iter().find(|(d, l, _)| at < d + l && *d < at + len).map(|(d, l, s)| (*d, *l, s.clone()));
    let shadow = match known {
        Some((d, l, s)) if (d, l) == (at, len) => s,
        Some((d, l, _)) => {
            log::error(format_args!(
                "{name}: device memory {base:p} ({len} bytes) overlaps device memory {d:#x} ({l} bytes) attached already; attach the same range or ranges apart"
            ));
            return errors::raise(errh, abi::get().err_rma_attach);
        }
        None => match Shadow::new(name, errh, dev, base, len) {
            Ok(s) => Arc::new(Mutex::new(s)),
            Err(rc) => return rc,
        },
    };
    let public = lock(&shadow).public();
    let rc = call(public);
    if rc != 0 {
        return rc;
    }
    {
        let mut a = attached();
        if !a.iter().any(|(_, _, s)| Arc::ptr_eq(s, &shadow)) {
            a.push((at, len, shadow.clone()));
            N_ATTACHED.store(a.len(), Relaxed);
        }
    }
    let mut t = windows();
    t.entry(abi::get().key(win)).or_default().attached.push(shadow);
    recount(&t);
    rc
}

/// `MPI_Win_detach` of attached device memory: the remote updates since the last
/// synchronisation reach it, then the library detaches its public copy.
pub fn win_detach(name: &'static str, win: Handle, base: *const c_void, call: impl FnOnce(*const c_void) -> c_int) -> c_int {
    if let Some(rc) = served::detach(win, base) {
        return rc;
    }
    if N_ATTACHED.load(Relaxed) == 0 {
        return call(base);
    }
    let key = abi::get().key(win);
    let mine = windows().get(&key).map(|w| w.attached.clone()).unwrap_or_default();
    let Some(shadow) = mine.into_iter().find(|s| lock(s).device() as usize == base as usize) else { return call(base) };
    let absorbed = lock(&shadow).absorb(name, errors::on_window(win), false);
    let public = lock(&shadow).public();
    let rc = call(public);
    if rc != 0 {
        return rc;
    }
    {
        let mut t = windows();
        if let Some(w) = t.get_mut(&key) {
            if let Some(i) = w.attached.iter().position(|s| Arc::ptr_eq(s, &shadow)) {
                w.attached.remove(i);
            }
            if w.pending.is_empty() && w.requests.is_empty() && w.shadow.is_none() && w.attached.is_empty() {
                t.remove(&key);
            }
        }
        recount(&t);
    }
    drop(shadow);
    forget_unattached();
    outcome(rc, &[absorbed])
}

/// `MPI_Get_address`: an address within attached device memory is given as the same place in
/// its public copy, the address the library knows it by (see the module comment).
pub fn get_address(_name: &'static str, location: *const c_void, address: *mut isize, call: impl FnOnce() -> c_int) -> c_int {
    let rc = call();
    if rc != 0 || address.is_null() {
        return rc;
    }
    if let Some(tagged) = served::tagged(location) {
        // SAFETY: the caller's MPI_Aint, which MPI has just written.
        unsafe { address.write(tagged) };
        return rc;
    }
    if N_ATTACHED.load(Relaxed) == 0 {
        return rc;
    }
    let at = location as usize;
    if let Some((d, _, s)) = attached().iter().find(|(d, l, _)| (*d..d + l).contains(&at)) {
        let public = lock(s).public() as usize;
        // SAFETY: the caller's MPI_Aint, which MPI has just written.
        unsafe { address.write((public + (at - d)) as isize) };
    }
    rc
}

/// `MPI_Win_free`: remote updates of the last epoch reach device memory, then the public copy
/// goes.
pub fn win_free(name: &'static str, win: *mut c_void, call: impl FnOnce() -> c_int) -> c_int {
    if win.is_null() {
        return call();
    }
    // SAFETY: the caller's window handle.
    let h = unsafe { abi::get().handle_at(win) };
    let call = || served::free(name, h, || mapped::free(name, h, call));
    if !any() {
        return call();
    }
    let done = complete(h, None);
    // Out of the table before the library frees the handle, which another thread's new window
    // may get at once; back in if the free fails.
    let gone = {
        let mut t = windows();
        let w = t.remove(&abi::get().key(h));
        recount(&t);
        w
    };
    let rc = call();
    if rc != 0 {
        if let Some(w) = gone {
            let mut t = windows();
            t.insert(abi::get().key(h), w);
            recount(&t);
        }
        return rc;
    }
    // Memory still attached at the free is absorbed as at a detach.
    let absorbed = gone.map(|w| w.shadow.iter().chain(&w.attached).fold(Ok(()), |first, s| first.and(lock(s).absorb(name, errors::on_window(h), false))));
    forget_unattached();
    outcome(rc, &[done, absorbed.unwrap_or(Ok(()))])
}

fn nostore(assert: c_int) -> bool {
    assert & abi::get().mode_nostore != 0
}

pub fn win_fence(name: &'static str, assert: c_int, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let call = || served::fence(name, win, || mapped::fence(name, assert, win, call));
    if !any() {
        return call();
    }
    let published = if nostore(assert) { Ok(()) } else { publish(name, win) };
    let rc = call();
    if rc != 0 {
        return rc;
    }
    let fresh = published.is_ok();
    outcome(rc, &[published, complete(win, None), absorb(name, win, fresh)])
}

pub fn win_post(name: &'static str, group: Handle, assert: c_int, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let call = || served::post(name, win, || mapped::post(name, group, assert, win, call));
    if !any() {
        return call();
    }
    let published = if nostore(assert) { Ok(()) } else { publish(name, win) };
    outcome(call(), &[published])
}

/// `MPI_Win_start`: only a mapped window has work here.
pub fn win_start(name: &'static str, group: Handle, assert: c_int, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    mapped::start(name, group, assert, win, call)
}

/// `MPI_Win_complete`: what this process's operations of the epoch bring back lands as at a
/// flush of every target.
pub fn win_complete(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    completed(None, win, || served::complete(name, win, || mapped::complete(name, win, call)))
}

pub fn win_wait(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    win_absorb(name, win, || mapped::wait(name, win, call))
}

/// `MPI_Win_lock` (`Some((lock_type, rank))`) and `MPI_Win_lock_all` (`None`).
pub fn win_lock(name: &'static str, which: Option<(c_int, c_int)>, assert: c_int, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    win_absorb(name, win, || mapped::lock_target(name, which, assert, win, call))
}

/// `MPI_Win_wait`, `MPI_Win_lock` and `MPI_Win_lock_all`: the updates peers made before the
/// call reach device memory once it returns.
fn win_absorb(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    if !any() {
        return call();
    }
    let rc = call();
    if rc != 0 {
        return rc;
    }
    outcome(rc, &[absorb(name, win, false)])
}

pub fn win_test(name: &'static str, win: Handle, flag: *mut c_int, call: impl FnOnce() -> c_int) -> c_int {
    let call = || mapped::test(name, win, flag, call);
    if !any() {
        return call();
    }
    let rc = call();
    // SAFETY: the caller's flag, which MPI has just set.
    if rc != 0 || flag.is_null() || unsafe { *flag } == 0 {
        return rc;
    }
    outcome(rc, &[absorb(name, win, false)])
}

/// `MPI_Win_unlock` (`target`) and `MPI_Win_unlock_all` (`None`).
pub fn win_unlock(name: &'static str, target: Option<c_int>, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let call = || served::unlock(name, target, win, || mapped::unlock(name, target, win, call));
    if !any() {
        return call();
    }
    let published = publish(name, win);
    let rc = call();
    if rc != 0 {
        return rc;
    }
    let fresh = published.is_ok();
    outcome(rc, &[published, complete(win, target), absorb(name, win, fresh)])
}

/// `MPI_Win_flush(_local)` (`target`) and `MPI_Win_flush(_local)_all` (`None`).
pub fn win_flush(name: &'static str, target: Option<c_int>, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    completed(target, win, || served::flush(name, target, win, || mapped::flush(name, win, call)))
}

/// The staged operations to `target` (all for `None`) complete once `call` returns.
fn completed(target: Option<c_int>, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    if !any() {
        return call();
    }
    let rc = call();
    if rc != 0 {
        return rc;
    }
    outcome(rc, &[complete(win, target)])
}

pub fn win_sync(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let call = || served::sync(name, win, || mapped::sync(name, win, call));
    if !any() {
        return call();
    }
    let published = publish(name, win);
    let rc = call();
    if rc != 0 {
        return rc;
    }
    let fresh = published.is_ok();
    outcome(rc, &[published, absorb(name, win, fresh)])
}

/// `MPI_Win_get_attr`: a window over device memory reports the device base and the separate
/// model; a dynamic window reports the separate model while device memory is attached.
pub fn win_get_attr(name: &'static str, win: Handle, keyval: c_int, value: *mut c_void, flag: *mut c_int, call: impl FnOnce() -> c_int) -> c_int {
    let rc = call();
    let _ = name;
    // SAFETY (the flag): the caller's, which MPI has just set.
    if rc != 0 || value.is_null() || flag.is_null() || unsafe { *flag } == 0 {
        return rc;
    }
    mapped::attribute(win, keyval, value);
    served::attribute(win, keyval, value);
    if !any() {
        return rc;
    }
    let (created, attached) = match windows().get(&abi::get().key(win)) {
        Some(w) => (w.shadow.clone(), !w.attached.is_empty()),
        None => return rc,
    };
    let abi = abi::get();
    if keyval == abi.win_base {
        if let Some(s) = created {
            // SAFETY: for MPI_WIN_BASE, MPI stores the base address at `value`.
            unsafe { value.cast::<*mut c_void>().write_unaligned(lock(&s).device()) };
        }
    } else if keyval == abi.win_model && (created.is_some() || attached) {
        // The attribute's value is a pointer to the model, which must outlive the call.
        static SEPARATE: AtomicI32 = AtomicI32::new(0);
        SEPARATE.store(abi.win_separate, Relaxed);
        // SAFETY: for MPI_WIN_MODEL, MPI stores a pointer to an int at `value`.
        unsafe { value.cast::<*mut c_int>().write_unaligned(SEPARATE.as_ptr()) };
    }
    rc
}

/// Forgets every window and releases the public copies and staging buffers (after the real
/// `MPI_Finalize`).
pub fn clear() {
    let all = std::mem::take(&mut *windows());
    TRACKED.store(0, Relaxed);
    drop(all);
    let all = std::mem::take(&mut *attached());
    N_ATTACHED.store(0, Relaxed);
    drop(all);
}
