//! One-sided communication calls on device origin, compare and result buffers.
//!
//! An origin buffer is copied to a staging buffer before the real call (MPI may read it until
//! the operation completes at the origin); a result buffer gets a staging buffer that MPI
//! fills, copied to device memory at the completion point MPI defines. A request form's
//! staging buffers go with its request (`requests`), completed as any request's are, and a
//! result is also copied at a completion call on the window before that (`windows.rs`); a
//! blocking call's go with its window until the synchronisation call that completes it.
//! Errors are raised on the window, as MPI raises an RMA call's. Host buffers go straight
//! through.

use std::ffi::{c_int, c_void};

use crate::base::stats;
use crate::cuda;
use crate::handlers::mapped::{self, Target, What};
use crate::handlers::served;
use crate::handlers::windows::{self, Pending};
use crate::mpi::abi::{self, Handle};
use crate::mpi::errors;
use crate::requests::{self, Entry, Kind};
use crate::staging::stage::{stage, Direction, Prepared, Staged};

/// One buffer argument: address, count, datatype.
pub type Buf = (*const c_void, i64, Handle);

/// Stages the buffers of one call. `Err` is the code to return (raised on the window).
fn stage_all(name: &'static str, bufs: &[(Buf, Direction)], target: c_int, win: Handle) -> Result<Vec<Prepared>, c_int> {
    let errh = errors::on_window(win);
    bufs.iter().map(|&((buf, count, datatype), dir)| stage(name, buf, count, datatype, target, errh, dir)).collect()
}

/// Runs the real call on the prepared buffers, then keeps the staged ones until the operation
/// completes: with the request (`request` not null) or with the window.
fn issue(name: &'static str, prepared: Vec<Prepared>, has_result: bool, target: c_int, win: Handle, request: *mut c_void, call: impl FnOnce(&[*mut c_void]) -> c_int) -> c_int {
    let ptrs: Vec<*mut c_void> = prepared.iter().map(Prepared::mpi_ptr).collect();
    let rc = call(&ptrs);
    if rc != 0 {
        return rc;
    }
    let mut staged: Vec<Option<Staged>> = prepared.into_iter().map(Prepared::staged).collect();
    let result = if has_result { staged.pop().flatten() } else { None };
    let origin: Vec<Staged> = staged.into_iter().flatten().collect();
    if origin.is_empty() && result.is_none() {
        return rc;
    }
    if !request.is_null() {
        // The request holds one buffer MPI reads and one it writes; a compare-and-swap has no
        // request form, so at most one origin buffer comes here.
        let has_result = result.is_some();
        let entry = Entry::collective(name, errors::on_window(win), origin.into_iter().next(), result, Kind::Once);
        let number = entry.number();
        if let Err(e) = requests::insert(request, entry) {
            return e;
        }
        if has_result {
            // SAFETY: MPI has just written the new request's handle there.
            windows::keep_request(win, target, unsafe { abi::get().request_at(request, 0) }, number);
        }
        return rc;
    }
    windows::keep(win, Pending { name, target, _origin: origin, result });
    rc
}

/// `MPI_Put`, `MPI_Accumulate` and their request and large-count forms: MPI reads `origin`.
/// On a target of a mapped window (`mapped.rs`) the origin copies itself, whatever its buffer.
pub fn rma_put(name: &'static str, origin: Buf, target: c_int, at: Target, op: Option<Handle>, win: Handle, request: *mut c_void, call: impl FnOnce(*const c_void) -> c_int) -> c_int {
    let what = match op {
        Some(op) => What::Accumulate(origin, op),
        None => What::Put(origin),
    };
    if let Some(rc) = served::operate(name, win, target, at, what, request) {
        return rc;
    }
    if let Some(rc) = mapped::operate(name, win, target, at, what, request) {
        return rc;
    }
    if cuda::surely_host(origin.0) {
        stats::host_call();
        return call(origin.0);
    }
    match stage_all(name, &[(origin, Direction::Send)], target, win) {
        Ok(p) => issue(name, p, false, target, win, request, |b| call(b[0])),
        Err(rc) => rc,
    }
}

/// `MPI_Get` and its request and large-count forms: MPI writes `result`.
pub fn rma_get(name: &'static str, result: Buf, target: c_int, at: Target, win: Handle, request: *mut c_void, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    if let Some(rc) = served::operate(name, win, target, at, What::Get(result), request) {
        return rc;
    }
    if let Some(rc) = mapped::operate(name, win, target, at, What::Get(result), request) {
        return rc;
    }
    if cuda::surely_host(result.0) {
        stats::host_call();
        return call(result.0 as *mut c_void);
    }
    match stage_all(name, &[(result, Direction::Write)], target, win) {
        Ok(p) => issue(name, p, true, target, win, request, |b| call(b[0])),
        Err(rc) => rc,
    }
}

/// `MPI_Get_accumulate`, `MPI_Fetch_and_op` and their forms: MPI reads `origin` and writes
/// `result`.
pub fn rma_get_accumulate(
    name: &'static str,
    origin: Buf,
    result: Buf,
    target: c_int,
    at: Target,
    op: Handle,
    win: Handle,
    request: *mut c_void,
    call: impl FnOnce(*const c_void, *mut c_void) -> c_int,
) -> c_int {
    if let Some(rc) = served::operate(name, win, target, at, What::GetAccumulate(origin, result, op), request) {
        return rc;
    }
    if let Some(rc) = mapped::operate(name, win, target, at, What::GetAccumulate(origin, result, op), request) {
        return rc;
    }
    if cuda::surely_host(origin.0) && cuda::surely_host(result.0) {
        stats::host_call();
        return call(origin.0, result.0 as *mut c_void);
    }
    match stage_all(name, &[(origin, Direction::Send), (result, Direction::Write)], target, win) {
        Ok(p) => issue(name, p, true, target, win, request, |b| call(b[0], b[1])),
        Err(rc) => rc,
    }
}

/// `MPI_Compare_and_swap`: MPI reads `origin` and `compare` and writes `result`, one element
/// of `datatype` each.
pub fn rma_compare_and_swap(
    name: &'static str,
    origin: *const c_void,
    compare: *const c_void,
    result: *mut c_void,
    datatype: Handle,
    target: c_int,
    disp: isize,
    win: Handle,
    call: impl FnOnce(*const c_void, *const c_void, *mut c_void) -> c_int,
) -> c_int {
    let one = |p: *const c_void| (p, 1, datatype);
    let what = What::CompareAndSwap(one(origin), one(compare), one(result));
    if let Some(rc) = served::operate(name, win, target, (disp, 1, datatype), what, std::ptr::null_mut()) {
        return rc;
    }
    if let Some(rc) = mapped::operate(name, win, target, (disp, 1, datatype), what, std::ptr::null_mut()) {
        return rc;
    }
    if cuda::surely_host(origin) && cuda::surely_host(compare) && cuda::surely_host(result) {
        stats::host_call();
        return call(origin, compare, result);
    }
    let bufs = [((origin, 1, datatype), Direction::Send), ((compare, 1, datatype), Direction::Send), ((result as *const c_void, 1, datatype), Direction::Write)];
    match stage_all(name, &bufs, target, win) {
        Ok(p) => issue(name, p, true, target, win, std::ptr::null_mut(), |b| call(b[0], b[1], b[2])),
        Err(rc) => rc,
    }
}
