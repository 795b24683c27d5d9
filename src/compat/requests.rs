//! Requests of cudampi's own, for the operations the library cannot run as one request.
//!
//! Two shapes:
//! - a one-shot operation (a nonblocking send-receive, a nonblocking collective whose count
//!   arrays cudampi narrowed) runs as the library's requests ("inner") under a generalized
//!   request the program holds; cudampi completes the generalized request once the inner ones
//!   are, and its query function reports the inner receive's status;
//! - a persistent operation (a persistent collective, a partitioned send) hands the program a
//!   real persistent "carrier" request that cudampi starts only once the operation is done: a
//!   send to `MPI_PROC_NULL`, which then completes at once, or the partitioned send's own.
//!
//! Nobody else drives these, so the completion calls are wrapped: they first test the inner
//! requests ([`progress`]), and until an operation is done its request is kept out of what the
//! library is asked (a blocking call polls instead). Without such an operation alive, each
//! wrapper costs one atomic load.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::mpi::abi::{self, Handle, Status, UNDEFINED};
use crate::mpi::real::{self, Pmpi, Real};

type Test = unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_void) -> c_int;
type Wait = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type Testany = unsafe extern "C" fn(c_int, *mut c_void, *mut c_int, *mut c_int, *mut c_void) -> c_int;
type Waitany = unsafe extern "C" fn(c_int, *mut c_void, *mut c_int, *mut c_void) -> c_int;
type Testall = unsafe extern "C" fn(c_int, *mut c_void, *mut c_int, *mut c_void) -> c_int;
type Waitall = unsafe extern "C" fn(c_int, *mut c_void, *mut c_void) -> c_int;
type Some_ = unsafe extern "C" fn(c_int, *mut c_void, *mut c_int, *mut c_int, *mut c_void) -> c_int;
type GetStatus = unsafe extern "C" fn(Handle, *mut c_int, *mut c_void) -> c_int;
type Start = unsafe extern "C" fn(*mut c_void) -> c_int;
type Startall = unsafe extern "C" fn(c_int, *mut c_void) -> c_int;
type Free = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The library's own functions, as they were before wrapping: what cudampi polls with.
struct Lib {
    test: Test,
    testany: Testany,
    testsome: Some_,
    start: Start,
}

static LIB: OnceLock<Lib> = OnceLock::new();

/// Operations alive: in the table or freed and still in flight.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static TABLE: Mutex<BTreeMap<Handle, Slot>> = Mutex::new(BTreeMap::new());
/// Persistent operations the program freed while they ran.
static FREED: Mutex<Vec<Slot>> = Mutex::new(Vec::new());

fn table() -> MutexGuard<'static, BTreeMap<Handle, Slot>> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

fn freed() -> MutexGuard<'static, Vec<Slot>> {
    FREED.lock().unwrap_or_else(|e| e.into_inner())
}

#[inline(always)]
fn live() -> bool {
    LIVE.load(Relaxed) != 0
}

/// Memory an operation's inner requests read until they complete: kept, never read.
#[derive(Default)]
#[allow(dead_code)]
pub struct Owned {
    pub ints: Vec<Vec<c_int>>,
    pub bytes: Vec<u8>,
}

/// Posts one persistent collective's nonblocking twin into the request it is given.
pub struct Starter(pub Box<dyn Fn(*mut c_void) -> c_int>);
// SAFETY: it captures the program's arguments of the init call (addresses and handles), which
// MPI binds to the persistent request; any thread may start it.
unsafe impl Send for Starter {}
unsafe impl Sync for Starter {}

pub enum Op {
    /// A generalized request `greq`, complete when every inner request is (each becomes
    /// `MPI_REQUEST_NULL` when done); the first inner request's status is what it reports.
    Once { greq: Handle, inner: Vec<Handle>, state: *mut GreqState, _owned: Owned },
    /// A persistent collective: `inner` is the nonblocking collective of the current start.
    Collective { carrier: Handle, starter: Arc<Starter>, inner: Option<Handle>, active: bool, done: bool },
    /// A partitioned send: its carrier is started when every partition is ready.
    PartSend { ready: Vec<bool>, active: bool, starting: bool, started: bool },
    /// A partitioned receive: its carrier is a plain persistent receive.
    PartRecv { partitions: usize },
}

struct Slot {
    op: Op,
    /// A thread is testing or starting its inner requests outside the lock.
    busy: bool,
}

// SAFETY: `state` is owned by the generalized request and written only before it completes.
unsafe impl Send for Slot {}

impl Slot {
    /// Whether its request must not yet be reported complete.
    fn pending(&self) -> bool {
        match &self.op {
            Op::Once { .. } => true,
            Op::Collective { active, done, .. } => *active && !*done,
            Op::PartSend { active, started, .. } => *active && !*started,
            Op::PartRecv { .. } => false,
        }
    }

    /// The inner requests to test now, if any.
    fn in_flight(&self) -> Option<Vec<Handle>> {
        match &self.op {
            Op::Once { inner, .. } => Some(inner.clone()),
            Op::Collective { inner: Some(h), done: false, .. } => Some(vec![*h]),
            _ => None,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Relaxed);
    }
}

/// What a generalized request reports: written before it is completed, read by MPI through
/// [`query`], freed through [`free_state`].
pub struct GreqState {
    status: Status,
    rc: c_int,
    key: Handle,
}

fn key(h: Handle) -> Handle {
    abi::get().key(h)
}

/// Adds an operation under the request the program holds.
pub fn insert(h: Handle, op: Op) {
    LIVE.fetch_add(1, Relaxed);
    table().insert(key(h), Slot { op, busy: false });
}

/// Runs `f` on the operation of `h`, if it is one of cudampi's.
pub fn with<R>(h: Handle, f: impl FnOnce(&mut Op) -> R) -> Option<R> {
    if !live() {
        return None;
    }
    table().get_mut(&key(h)).map(|s| f(&mut s.op))
}

fn lib() -> &'static Lib {
    LIB.get().expect("compat requests used before the library was wrapped")
}

/// Runs the inner requests under a new generalized request, written to `*request`. `post`
/// posts them into the handles it is given (`n` of them); on failure nothing is left behind.
pub fn once(request: *mut c_void, n: usize, owned: Owned, post: impl FnOnce(&mut [Handle]) -> c_int) -> c_int {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return abi.err_intern };
    let mut inner = vec![abi.request_null; n];
    let rc = post(&mut inner);
    if rc != 0 {
        return rc;
    }
    let state = Box::into_raw(Box::new(GreqState { status: Status::zeroed(), rc: 0, key: 0 }));
    let mut greq: Handle = 0;
    // SAFETY: our callbacks and state; `greq` receives a handle of the family's width.
    let rc = unsafe { (p.grequest_start)(query, free_state, cancel, state.cast(), (&mut greq as *mut Handle).cast()) };
    if rc != 0 {
        // SAFETY: not handed to MPI.
        drop(unsafe { Box::from_raw(state) });
        abandon(&inner);
        return rc;
    }
    // SAFETY: ours until the request completes.
    unsafe { (*state).key = key(greq) };
    insert(greq, Op::Once { greq, inner, state, _owned: owned });
    // SAFETY: the caller's request argument.
    unsafe { abi.set_handle(request, greq) };
    0
}

/// Cancels and completes requests that were posted for an operation that could not start.
pub fn abandon(inner: &[Handle]) {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return };
    for &h in inner.iter().filter(|&&h| !abi.same(h, abi.request_null)) {
        let mut r = h;
        let mut st = Status::zeroed();
        // SAFETY: a live request of ours; handle widths as in `requests::progress_orphans`.
        unsafe {
            (p.cancel)((&mut r as *mut Handle).cast());
            (lib_wait())((&mut r as *mut Handle).cast(), st.as_mut_ptr());
        }
    }
}

static LIB_WAIT: OnceLock<Wait> = OnceLock::new();

fn lib_wait() -> Wait {
    *LIB_WAIT.get().expect("compat requests used before the library was wrapped")
}

unsafe extern "C" fn query(extra: *mut c_void, status: *mut c_void) -> c_int {
    // SAFETY: our state, written before the request completed; MPI's full status.
    unsafe {
        let s = &*extra.cast::<GreqState>();
        std::ptr::copy_nonoverlapping(s.status.0.as_ptr(), status.cast::<u8>(), abi::get().status_size);
        s.rc
    }
}

unsafe extern "C" fn free_state(extra: *mut c_void) -> c_int {
    // SAFETY: MPI calls this once, after the request completed and was freed.
    drop(unsafe { Box::from_raw(extra.cast::<GreqState>()) });
    0
}

/// `MPI_Cancel` of the generalized request cancels its inner requests, which then complete as
/// cancelled (or not, as the library decides) and complete it.
unsafe extern "C" fn cancel(extra: *mut c_void, complete: c_int) -> c_int {
    if complete != 0 {
        return 0;
    }
    // SAFETY: our state; MPI keeps it alive while the request is.
    let k = unsafe { (*extra.cast::<GreqState>()).key };
    let inner = {
        let mut t = table();
        match t.get_mut(&k) {
            Some(s) if !s.busy => {
                s.busy = true;
                s.in_flight()
            }
            _ => None,
        }
    };
    let Some(inner) = inner else { return 0 };
    let abi = abi::get();
    if let Some(p) = real::pmpi() {
        for &h in inner.iter().filter(|&&h| !abi.same(h, abi.request_null)) {
            let mut r = h;
            // SAFETY: a live inner request, marked busy so no other thread frees it meanwhile.
            unsafe { (p.cancel)((&mut r as *mut Handle).cast()) };
        }
    }
    if let Some(s) = table().get_mut(&k) {
        s.busy = false;
    }
    0
}

/// Tests every operation in flight once; done ones complete their request. One-shot operations
/// go first: a persistent collective's inner request may be one of them.
pub fn progress() {
    if !live() {
        return;
    }
    let mut work: Vec<(bool, Handle, Vec<Handle>)> = Vec::new();
    {
        let mut t = table();
        for (&k, s) in t.iter_mut().filter(|(_, s)| !s.busy) {
            if let Some(inner) = s.in_flight() {
                s.busy = true;
                work.push((!matches!(s.op, Op::Once { .. }), k, inner));
            }
        }
    }
    work.sort_by_key(|w| w.0);
    for (_, k, inner) in work {
        step(k, inner);
    }
    progress_freed();
}

/// Tests the inner requests of the operation under `k` (marked busy) and acts on the result.
fn step(k: Handle, mut inner: Vec<Handle>) {
    let abi = abi::get();
    let lib = lib();
    let mut first: Option<(Status, c_int)> = None;
    for (i, h) in inner.iter_mut().enumerate() {
        if abi.same(*h, abi.request_null) {
            continue;
        }
        let (mut flag, mut st) = (0, Status::zeroed());
        // SAFETY: a live inner request, ours alone while busy; MPI writes back NULL when done.
        let rc = unsafe { (lib.test)((h as *mut Handle).cast(), &mut flag, st.as_mut_ptr()) };
        if rc != 0 {
            // The request is freed with the error; the operation reports it.
            *h = abi.request_null;
            // SAFETY: our own status.
            unsafe { abi.set_status_error(st.as_mut_ptr(), rc) };
            flag = 1;
        }
        if flag != 0 && i == 0 {
            first = Some((st, rc));
        }
    }
    let done = inner.iter().all(|&h| abi.same(h, abi.request_null));
    let mut t = table();
    let Some(s) = t.get_mut(&k) else { return };
    match &mut s.op {
        Op::Once { greq, inner: mine, state, .. } => {
            *mine = inner;
            if let Some((st, rc)) = first {
                // SAFETY: ours until the request completes below.
                unsafe {
                    (**state).status = st;
                    (**state).rc = rc;
                }
            }
            if done {
                let greq = *greq;
                // Out of the table first: once complete, a freed request's handle may be reused.
                drop(t.remove(&k));
                drop(t);
                if let Some(p) = real::pmpi() {
                    // SAFETY: our generalized request, completed once.
                    unsafe { (p.grequest_complete)(greq) };
                }
                return;
            }
        }
        Op::Collective { carrier, .. } if done => {
            let mut c = *carrier;
            drop(t);
            // The carrier is started before the operation counts as done, so that no
            // completion call sees it inactive while its operation runs.
            // SAFETY: the carrier, an inactive persistent request of ours.
            unsafe { (lib.start)((&mut c as *mut Handle).cast()) };
            if let Some(Slot { op: Op::Collective { done, inner, .. }, busy }) = table().get_mut(&k) {
                (*done, *inner, *busy) = (true, None, false);
            }
            return;
        }
        _ => {}
    }
    s.busy = false;
}

/// Freed persistent operations whose collective still runs: tested until it is done.
fn progress_freed() {
    let list = {
        let mut f = freed();
        if f.is_empty() {
            return;
        }
        std::mem::take(&mut *f)
    };
    let abi = abi::get();
    let mut left = Vec::new();
    for mut s in list {
        if let Op::Collective { inner: Some(h), .. } = &mut s.op {
            let (mut flag, mut st) = (0, Status::zeroed());
            // SAFETY: the inner request of a freed operation, ours alone.
            let rc = unsafe { (lib().test)((h as *mut Handle).cast(), &mut flag, st.as_mut_ptr()) };
            if rc == 0 && flag == 0 && !abi.same(*h, abi.request_null) {
                left.push(s);
            }
        }
    }
    freed().extend(left);
}

/// Whether any of `n` requests is an operation of cudampi's own that is not done.
fn pending(reqs: *const c_void, n: c_int) -> bool {
    if reqs.is_null() || n <= 0 {
        return false;
    }
    let abi = abi::get();
    let t = table();
    // SAFETY: the caller passes n requests.
    (0..n as usize).any(|i| t.get(&abi.key(unsafe { abi.request_at(reqs, i) })).is_some_and(Slot::pending))
}

/// A copy of the request array in which the operations that are not done are
/// `MPI_REQUEST_NULL`, so that the library skips them; `None` when there are none.
struct Masked {
    copy: Vec<u8>,
    masked: Vec<bool>,
}

impl Masked {
    fn new(reqs: *const c_void, n: c_int) -> Option<Masked> {
        if reqs.is_null() || n <= 0 {
            return None;
        }
        let abi = abi::get();
        let n = n as usize;
        let masked: Vec<bool> = {
            let t = table();
            // SAFETY: the caller passes n requests.
            (0..n).map(|i| t.get(&abi.key(unsafe { abi.request_at(reqs, i) })).is_some_and(Slot::pending)).collect()
        };
        if !masked.contains(&true) {
            return None;
        }
        // SAFETY: n requests of the family's width.
        let mut copy = unsafe { std::slice::from_raw_parts(reqs.cast::<u8>(), n * abi.request_size) }.to_vec();
        for i in (0..n).filter(|&i| masked[i]) {
            // SAFETY: element i of our copy.
            unsafe { abi.set_request_null(copy.as_mut_ptr().cast(), i) };
        }
        Some(Masked { copy, masked })
    }

    fn ptr(&mut self) -> *mut c_void {
        self.copy.as_mut_ptr().cast()
    }

    /// Writes back what the library changed (completed requests become null) to the caller's
    /// array.
    fn write_back(&self, reqs: *mut c_void) {
        let w = abi::get().request_size;
        for i in (0..self.masked.len()).filter(|&i| !self.masked[i]) {
            // SAFETY: element i of the caller's array and of our copy, both of width w.
            unsafe { std::ptr::copy_nonoverlapping(self.copy.as_ptr().add(i * w), reqs.cast::<u8>().add(i * w), w) };
        }
    }
}

fn put(p: *mut c_int, v: c_int) {
    if !p.is_null() {
        // SAFETY: a caller's output argument.
        unsafe { p.write(v) };
    }
}

fn get(p: *const c_int) -> c_int {
    if p.is_null() {
        0
    } else {
        // SAFETY: an output argument the library just wrote.
        unsafe { p.read() }
    }
}

fn idle() {
    std::thread::yield_now();
}

/// Drives the operations among the `n` requests at `reqs` until none is still running: what
/// a blocking completion call waits for before the library's own call.
#[cold]
fn await_operations(reqs: *mut c_void, n: c_int) {
    while live() && pending(reqs, n) {
        progress();
        idle();
    }
}

unsafe fn wait(orig: Wait, request: *mut c_void, status: *mut c_void) -> c_int {
    if live() {
        await_operations(request, 1);
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(request, status) }
}

unsafe fn test(orig: Test, request: *mut c_void, flag: *mut c_int, status: *mut c_void) -> c_int {
    if live() {
        progress();
        if pending(request, 1) {
            put(flag, 0);
            return 0;
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(request, flag, status) }
}

unsafe fn waitall(orig: Waitall, count: c_int, reqs: *mut c_void, statuses: *mut c_void) -> c_int {
    if live() {
        await_operations(reqs, count);
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(count, reqs, statuses) }
}

unsafe fn testall(orig: Testall, count: c_int, reqs: *mut c_void, flag: *mut c_int, statuses: *mut c_void) -> c_int {
    if live() {
        progress();
        if pending(reqs, count) {
            put(flag, 0);
            return 0;
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(count, reqs, flag, statuses) }
}

/// One `MPI_Testany` over the requests that may be reported, when some may not: `Some` when it
/// reported one (or failed), `None` when only operations of cudampi's own are left to wait
/// for. `Err` when no request is held back: the caller asks the library itself.
unsafe fn any_masked(count: c_int, reqs: *mut c_void, index: *mut c_int, flag: *mut c_int, status: *mut c_void) -> Result<Option<c_int>, ()> {
    progress();
    let mut m = Masked::new(reqs, count).ok_or(())?;
    // SAFETY: our copy of the caller's array, and the caller's other arguments.
    let rc = unsafe { (lib().testany)(count, m.ptr(), index, flag, status) };
    m.write_back(reqs);
    Ok((rc != 0 || (get(flag) != 0 && get(index) != UNDEFINED)).then_some(rc))
}

unsafe fn waitany(orig: Waitany, count: c_int, reqs: *mut c_void, index: *mut c_int, status: *mut c_void) -> c_int {
    let mut flag = 0;
    while live() {
        // SAFETY: the caller's arguments.
        match unsafe { any_masked(count, reqs, index, &mut flag, status) } {
            Ok(Some(rc)) => return rc,
            Ok(None) => idle(),
            Err(()) => break,
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(count, reqs, index, status) }
}

unsafe fn testany(orig: Testany, count: c_int, reqs: *mut c_void, index: *mut c_int, flag: *mut c_int, status: *mut c_void) -> c_int {
    if live() {
        // SAFETY: the caller's arguments.
        match unsafe { any_masked(count, reqs, index, flag, status) } {
            Ok(Some(rc)) => return rc,
            Ok(None) => {
                put(flag, 0);
                put(index, UNDEFINED);
                return 0;
            }
            Err(()) => {}
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(count, reqs, index, flag, status) }
}

/// One `MPI_Testsome` over the requests that may be reported; results as for [`any_masked`].
unsafe fn some_masked(count: c_int, reqs: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void) -> Result<Option<c_int>, ()> {
    progress();
    let mut m = Masked::new(reqs, count).ok_or(())?;
    // SAFETY: our copy of the caller's array, and the caller's other arguments.
    let rc = unsafe { (lib().testsome)(count, m.ptr(), outcount, indices, statuses) };
    m.write_back(reqs);
    let n = get(outcount);
    Ok((rc != 0 || (n != UNDEFINED && n > 0)).then_some(rc))
}

unsafe fn waitsome(orig: Some_, count: c_int, reqs: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void) -> c_int {
    while live() {
        // SAFETY: the caller's arguments.
        match unsafe { some_masked(count, reqs, outcount, indices, statuses) } {
            Ok(Some(rc)) => return rc,
            Ok(None) => idle(),
            Err(()) => break,
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(count, reqs, outcount, indices, statuses) }
}

unsafe fn testsome(orig: Some_, count: c_int, reqs: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void) -> c_int {
    if live() {
        // SAFETY: the caller's arguments.
        match unsafe { some_masked(count, reqs, outcount, indices, statuses) } {
            Ok(Some(rc)) => return rc,
            Ok(None) => {
                put(outcount, 0);
                return 0;
            }
            Err(()) => {}
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(count, reqs, outcount, indices, statuses) }
}

unsafe fn get_status(orig: GetStatus, request: Handle, flag: *mut c_int, status: *mut c_void) -> c_int {
    if live() {
        progress();
        if pending([request].as_ptr().cast(), 1) {
            put(flag, 0);
            return 0;
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(request, flag, status) }
}

/// Starts an operation of cudampi's own; `None` when `h` is not one.
fn start_own(h: Handle) -> Option<c_int> {
    let k = key(h);
    let starter = {
        let mut t = table();
        let s = t.get_mut(&k)?;
        match &mut s.op {
            Op::Collective { starter, .. } => {
                s.busy = true;
                starter.clone()
            }
            Op::PartSend { ready, active, starting, started, .. } => {
                ready.iter_mut().for_each(|r| *r = false);
                (*active, *starting, *started) = (true, false, false);
                if ready.is_empty() {
                    drop(t);
                    return Some(super::persistent::all_ready(h));
                }
                return Some(0);
            }
            _ => return None,
        }
    };
    let mut inner = abi::get().request_null;
    let rc = (starter.0)((&mut inner as *mut Handle).cast());
    let mut t = table();
    if let Some(Slot { op: Op::Collective { inner: mine, active, done, .. }, busy }) = t.get_mut(&k) {
        *busy = false;
        if rc == 0 {
            (*mine, *active, *done) = (Some(inner), true, false);
        }
    }
    Some(rc)
}

unsafe fn start(orig: Start, request: *mut c_void) -> c_int {
    if live() && !request.is_null() {
        // SAFETY: the caller passes one request.
        if let Some(rc) = start_own(unsafe { abi::get().request_at(request, 0) }) {
            return rc;
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(request) }
}

unsafe fn startall(orig: Startall, count: c_int, reqs: *mut c_void) -> c_int {
    if !live() || reqs.is_null() || count <= 0 {
        // SAFETY: the caller's arguments.
        return unsafe { orig(count, reqs) };
    }
    let abi = abi::get();
    let w = abi.request_size;
    let mut rest: Vec<u8> = Vec::with_capacity(count as usize * w);
    let mut rc = 0;
    for i in 0..count as usize {
        // SAFETY: the caller passes count requests.
        match start_own(unsafe { abi.request_at(reqs, i) }) {
            Some(r) => {
                if rc == 0 {
                    rc = r;
                }
            }
            // SAFETY: element i of the caller's array.
            None => rest.extend_from_slice(unsafe { std::slice::from_raw_parts(reqs.cast::<u8>().add(i * w), w) }),
        }
    }
    if rest.len() == count as usize * w {
        // SAFETY: the caller's arguments.
        return unsafe { orig(count, reqs) };
    }
    if !rest.is_empty() {
        // SAFETY: the caller's other requests, in the family's width.
        let r = unsafe { orig((rest.len() / w) as c_int, rest.as_mut_ptr().cast()) };
        if rc == 0 {
            rc = r;
        }
    }
    rc
}

unsafe fn request_free(orig: Free, request: *mut c_void) -> c_int {
    if live() && !request.is_null() {
        // SAFETY: the caller passes one request.
        let k = key(unsafe { abi::get().request_at(request, 0) });
        let mut t = table();
        // A generalized request stays until its operation completes it; MPI frees it then.
        if t.get(&k).is_some_and(|s| !matches!(s.op, Op::Once { .. })) {
            if let Some(s) = t.remove(&k) {
                drop(t);
                if matches!(s.op, Op::Collective { inner: Some(_), done: false, .. }) {
                    freed().push(s);
                }
            }
        }
    }
    // SAFETY: the caller's arguments.
    unsafe { orig(request) }
}

/// Starts a carrier request (a partitioned send whose partitions are all ready).
pub fn start_carrier(carrier: Handle) -> c_int {
    let mut c = carrier;
    // SAFETY: an inactive persistent request of the program's, started once per start.
    unsafe { (lib().start)((&mut c as *mut Handle).cast()) }
}

/// A wrapper that calls `$imp` with `$orig`, the function it replaces.
macro_rules! wrap {
    ($orig:expr, $imp:ident, fn($($a:ident : $t:ty),*)) => {{
        type F = unsafe extern "C" fn($($t),*) -> c_int;
        static ORIG: OnceLock<F> = OnceLock::new();
        unsafe extern "C" fn w($($a: $t),*) -> c_int {
            crate::mpi::ffi::guard(stringify!($imp), || match ORIG.get() {
                // SAFETY: the library's function the wrapper replaced, with the caller's arguments.
                Some(&o) => unsafe { $imp(o, $($a),*) },
                None => abi::get().err_intern,
            })
        }
        let _ = ORIG.set($orig);
        w as F
    }};
}

macro_rules! wrap_opt {
    ($real:ident . $field:ident, $imp:ident, fn($($a:ident : $t:ty),*)) => {
        if let Some(o) = $real.$field {
            $real.$field = Some(wrap!(o, $imp, fn($($a : $t),*)));
        }
    };
}

/// Wraps the completion calls of the real table (both names of each).
pub fn wrap(real: &mut Real) {
    macro_rules! both {
        ($name:ident, $pname:ident, $imp:ident, fn($($a:ident : $t:ty),*)) => {
            wrap_opt!(real.$name, $imp, fn($($a : $t),*));
            wrap_opt!(real.$pname, $imp, fn($($a : $t),*));
        };
    }
    let (Some(t), Some(ta), Some(ts), Some(s), Some(w)) =
        (real.PMPI_Test, real.PMPI_Testany, real.PMPI_Testsome, real.PMPI_Start, real.PMPI_Wait)
    else {
        return;
    };
    let _ = LIB.set(Lib { test: t, testany: ta, testsome: ts, start: s });
    let _ = LIB_WAIT.set(w);
    both!(MPI_Wait, PMPI_Wait, wait, fn(request: *mut c_void, status: *mut c_void));
    both!(MPI_Test, PMPI_Test, test, fn(request: *mut c_void, flag: *mut c_int, status: *mut c_void));
    both!(MPI_Waitall, PMPI_Waitall, waitall, fn(count: c_int, reqs: *mut c_void, statuses: *mut c_void));
    both!(MPI_Testall, PMPI_Testall, testall, fn(count: c_int, reqs: *mut c_void, flag: *mut c_int, statuses: *mut c_void));
    both!(MPI_Waitany, PMPI_Waitany, waitany, fn(count: c_int, reqs: *mut c_void, index: *mut c_int, status: *mut c_void));
    both!(MPI_Testany, PMPI_Testany, testany, fn(count: c_int, reqs: *mut c_void, index: *mut c_int, flag: *mut c_int, status: *mut c_void));
    both!(MPI_Waitsome, PMPI_Waitsome, waitsome, fn(count: c_int, reqs: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void));
    both!(MPI_Testsome, PMPI_Testsome, testsome, fn(count: c_int, reqs: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void));
    both!(MPI_Request_get_status, PMPI_Request_get_status, get_status, fn(request: Handle, flag: *mut c_int, status: *mut c_void));
    both!(MPI_Start, PMPI_Start, start, fn(request: *mut c_void));
    both!(MPI_Startall, PMPI_Startall, startall, fn(count: c_int, reqs: *mut c_void));
    both!(MPI_Request_free, PMPI_Request_free, request_free, fn(request: *mut c_void));
}

/// Wraps cudampi's own helper functions alike, when the real table was wrapped.
pub fn wrap_pmpi(real: &Real, p: &mut Pmpi) {
    if LIB.get().is_none() {
        return;
    }
    // The wrapped entries of the real table serve the helpers too.
    if let (Some(w), Some(t), Some(s), Some(g), Some(f)) =
        (real.PMPI_Wait, real.PMPI_Test, real.PMPI_Startall, real.PMPI_Request_get_status, real.PMPI_Request_free)
    {
        (p.wait, p.test, p.startall, p.request_get_status, p.request_free) = (w, t, s, g, f);
    }
}

/// Completes the freed operations still in flight (their peers take part in them), then
/// forgets every operation.
pub fn finalize() {
    if !live() {
        return;
    }
    progress();
    while !freed().is_empty() {
        idle();
        progress();
    }
    drop(std::mem::take(&mut *table()));
}
