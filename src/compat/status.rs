//! MPI-4.1's `MPI_Request_get_status_any/all/some` on a library without them: each request is
//! asked with `MPI_Request_get_status`, which neither frees nor deactivates it.

use std::ffi::{c_int, c_void};

use crate::mpi::abi::{self, Status, UNDEFINED};
use crate::mpi::real;

/// Each request's (index, complete, status); null requests are left out.
fn each(count: c_int, requests: *mut c_void) -> Result<Vec<(usize, bool, Status)>, c_int> {
    let abi = abi::get();
    let Some(get_status) = real::get().PMPI_Request_get_status else { return Err(real::missing("MPI_Request_get_status")) };
    let mut out = Vec::new();
    if requests.is_null() || count <= 0 {
        return Ok(out);
    }
    for i in 0..count as usize {
        // SAFETY: the caller passes count requests.
        let h = unsafe { abi.request_at(requests, i) };
        if abi.same(h, abi.request_null) {
            continue;
        }
        let (mut flag, mut st) = (0, Status::zeroed());
        // SAFETY: a request of the caller's; valid out-pointers.
        let rc = unsafe { get_status(h, &mut flag, st.as_mut_ptr()) };
        if rc != 0 {
            return Err(rc);
        }
        out.push((i, flag != 0, st));
    }
    Ok(out)
}

/// Copies a status to element `k` of the caller's status array (or its single status).
fn store(statuses: *mut c_void, k: usize, st: &Status, ignore: bool) {
    if statuses.is_null() || ignore {
        return;
    }
    let size = abi::get().status_size;
    // SAFETY: the caller's array has room for element k.
    unsafe { std::ptr::copy_nonoverlapping(st.0.as_ptr(), statuses.cast::<u8>().add(k * size), size) };
}

/// The status of a null or inactive request: source `MPI_ANY_SOURCE`, tag `MPI_ANY_TAG`,
/// error `MPI_SUCCESS`, nothing received.
fn empty() -> Status {
    let abi = abi::get();
    let mut st = Status::zeroed();
    // SAFETY: our own full status.
    unsafe { abi.set_status_source_tag(st.as_mut_ptr(), abi.any_source, abi.any_tag) };
    st
}

fn put(p: *mut c_int, v: c_int) {
    if !p.is_null() {
        // SAFETY: a caller's output argument.
        unsafe { p.write(v) };
    }
}

pub unsafe extern "C" fn any(count: c_int, requests: *mut c_void, index: *mut c_int, flag: *mut c_int, status: *mut c_void) -> c_int {
    crate::mpi::ffi::guard("MPI_Request_get_status_any", || {
        let ignore = abi::get().is_status_ignore(status);
        let found = match each(count, requests) {
            Ok(f) => f,
            Err(rc) => return rc,
        };
        if found.is_empty() {
            put(flag, 1);
            put(index, UNDEFINED);
            store(status, 0, &empty(), ignore);
            return 0;
        }
        match found.iter().find(|f| f.1) {
            Some((i, _, st)) => {
                put(flag, 1);
                put(index, *i as c_int);
                store(status, 0, st, ignore);
            }
            None => {
                put(flag, 0);
                put(index, UNDEFINED);
            }
        }
        0
    })
}

pub unsafe extern "C" fn all(count: c_int, requests: *mut c_void, flag: *mut c_int, statuses: *mut c_void) -> c_int {
    crate::mpi::ffi::guard("MPI_Request_get_status_all", || {
        let ignore = abi::get().is_statuses_ignore(statuses);
        let found = match each(count, requests) {
            Ok(f) => f,
            Err(rc) => return rc,
        };
        if !found.iter().all(|f| f.1) {
            put(flag, 0);
            return 0;
        }
        put(flag, 1);
        let empty = empty();
        let mut next = found.iter().peekable();
        for k in 0..count.max(0) as usize {
            match next.peek() {
                Some((i, _, st)) if *i == k => {
                    store(statuses, k, st, ignore);
                    next.next();
                }
                _ => store(statuses, k, &empty, ignore),
            }
        }
        0
    })
}

pub unsafe extern "C" fn some(incount: c_int, requests: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void) -> c_int {
    crate::mpi::ffi::guard("MPI_Request_get_status_some", || {
        let ignore = abi::get().is_statuses_ignore(statuses);
        let found = match each(incount, requests) {
            Ok(f) => f,
            Err(rc) => return rc,
        };
        if found.is_empty() {
            put(outcount, UNDEFINED);
            return 0;
        }
        let mut n = 0;
        for (i, _, st) in found.iter().filter(|f| f.1) {
            if !indices.is_null() {
                // SAFETY: the caller's indices hold incount entries.
                unsafe { indices.add(n).write(*i as c_int) };
            }
            store(statuses, n, st, ignore);
            n += 1;
        }
        put(outcount, n as c_int);
        0
    })
}
