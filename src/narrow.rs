//! MPI-4's large-count (`_c`) functions on a library that lacks them.
//!
//! cudampi exports every `_c` name it interposes, so a program that looks for them by symbol
//! (mpi4py binds them weakly and uses them when present) calls them on an MPI-3 library too.
//! Such a call goes to the library's int-count function (`or BASE` in the table) when every
//! count fits in an int, and fails with `MPI_ERR_COUNT` when one does not. The blocking v and w
//! collectives (`or BASE via FAMILY`) narrow their count and displacement arrays into
//! temporary copies, as long as the communicator says; their nonblocking and persistent forms
//! would need the copies until completion and are not served this way.

use std::ffi::{c_int, c_void};

use crate::abi::{self, Handle};
use crate::collectives::{group, neighbors};
use crate::{errors, log};

/// An argument of a `_c` function, as its int-count twin takes it.
pub trait Narrow: Sized {
    type Out;
    fn narrow(self) -> Option<Self::Out>;
}

impl Narrow for i64 {
    type Out = c_int;
    #[inline]
    fn narrow(self) -> Option<c_int> {
        c_int::try_from(self).ok()
    }
}

macro_rules! unchanged {
    ($($t:ty),*) => {
        $(impl Narrow for $t {
            type Out = $t;
            #[inline]
            fn narrow(self) -> Option<$t> {
                Some(self)
            }
        })*
    };
}

// Handles are `usize`. Count arrays (`*const i64`) have no impl on purpose: their functions
// have no `or BASE` in the table.
unchanged!(c_int, usize, *const c_void, *mut c_void, *const c_int, *mut c_int);

#[cold]
pub fn too_large(name: &str) -> c_int {
    log::error(format_args!(
        "{name}: a count does not fit in an int, and the loaded MPI library has no large-count {name}"
    ));
    errors::raise(None, abi::get().err_count)
}

/// `n` entries of a `MPI_Count`/`MPI_Aint` array as ints; an empty vector for no entries.
fn ints(p: *const i64, n: c_int) -> Option<Vec<c_int>> {
    if p.is_null() || n <= 0 {
        return Some(Vec::new());
    }
    // SAFETY: the caller's array holds an entry per process of the group, as MPI requires.
    unsafe { std::slice::from_raw_parts(p, n as usize) }.iter().map(|&v| c_int::try_from(v).ok()).collect()
}

fn at(v: &[c_int]) -> *const c_int {
    if v.is_empty() { std::ptr::null() } else { v.as_ptr() }
}

/// Narrows `$arr` arrays of `$n` entries, then calls `$base` with them in place of the originals.
macro_rules! narrowed {
    ($name:expr, $base:expr, [$($arr:ident : $n:expr),*], $call:expr) => {{
        let Some(f) = $base else { return crate::real::missing($name) };
        $( let Some($arr) = ints($arr, $n) else { return too_large($name) }; let $arr = at(&$arr); )*
        // SAFETY: the library's int-count twin with the arrays narrowed.
        unsafe { $call(f) }
    }};
}

type Gatherv = unsafe extern "C" fn(*const c_void, c_int, Handle, *mut c_void, *const c_int, *const c_int, Handle, c_int, Handle) -> c_int;
type Scatterv = unsafe extern "C" fn(*const c_void, *const c_int, *const c_int, Handle, *mut c_void, c_int, Handle, c_int, Handle) -> c_int;
type Allgatherv = unsafe extern "C" fn(*const c_void, c_int, Handle, *mut c_void, *const c_int, *const c_int, Handle, Handle) -> c_int;
type Alltoallv = unsafe extern "C" fn(*const c_void, *const c_int, *const c_int, Handle, *mut c_void, *const c_int, *const c_int, Handle, Handle) -> c_int;
type Alltoallw = unsafe extern "C" fn(*const c_void, *const c_int, *const c_int, *const c_void, *mut c_void, *const c_int, *const c_int, *const c_void, Handle) -> c_int;
type ReduceScatter = unsafe extern "C" fn(*const c_void, *mut c_void, *const c_int, Handle, Handle, Handle) -> c_int;
type NeighborAlltoallw = unsafe extern "C" fn(*const c_void, *const c_int, *const i64, *const c_void, *mut c_void, *const c_int, *const i64, *const c_void, Handle) -> c_int;

/// Entries of a rooted collective's arrays: one per peer at the root, none elsewhere (the
/// arrays are not significant there and may be anything).
fn at_root(comm: Handle, root: c_int) -> Result<c_int, c_int> {
    let g = group(comm)?;
    let is_root = if g.inter { root == abi::get().root } else { root == g.rank };
    Ok(if is_root { g.peers } else { 0 })
}

#[allow(clippy::too_many_arguments)]
pub fn gatherv(name: &str, base: Option<Gatherv>, sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void,
               recvcounts: *const i64, displs: *const i64, recvtype: Handle, root: c_int, comm: Handle) -> c_int {
    let Some(sendcount) = sendcount.narrow() else { return too_large(name) };
    let n = match at_root(comm, root) { Ok(n) => n, Err(rc) => return rc };
    narrowed!(name, base, [recvcounts: n, displs: n], |f: Gatherv| f(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm))
}

#[allow(clippy::too_many_arguments)]
pub fn scatterv(name: &str, base: Option<Scatterv>, sendbuf: *const c_void, sendcounts: *const i64, displs: *const i64, sendtype: Handle,
                recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle) -> c_int {
    let Some(recvcount) = recvcount.narrow() else { return too_large(name) };
    let n = match at_root(comm, root) { Ok(n) => n, Err(rc) => return rc };
    narrowed!(name, base, [sendcounts: n, displs: n], |f: Scatterv| f(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm))
}

#[allow(clippy::too_many_arguments)]
pub fn allgatherv(name: &str, base: Option<Allgatherv>, sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void,
                  recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle) -> c_int {
    let Some(sendcount) = sendcount.narrow() else { return too_large(name) };
    let n = match group(comm) { Ok(g) => g.peers, Err(rc) => return rc };
    narrowed!(name, base, [recvcounts: n, displs: n], |f: Allgatherv| f(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm))
}

#[allow(clippy::too_many_arguments)]
pub fn alltoallv(name: &str, base: Option<Alltoallv>, sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle,
                 recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle) -> c_int {
    let n = match group(comm) { Ok(g) => g.peers, Err(rc) => return rc };
    narrowed!(name, base, [sendcounts: n, sdispls: n, recvcounts: n, rdispls: n],
              |f: Alltoallv| f(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm))
}

#[allow(clippy::too_many_arguments)]
pub fn alltoallw(name: &str, base: Option<Alltoallw>, sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtypes: *const c_void,
                 recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void, comm: Handle) -> c_int {
    let n = match group(comm) { Ok(g) => g.peers, Err(rc) => return rc };
    narrowed!(name, base, [sendcounts: n, sdispls: n, recvcounts: n, rdispls: n],
              |f: Alltoallw| f(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm))
}

pub fn reduce_scatter(name: &str, base: Option<ReduceScatter>, sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64,
                      datatype: Handle, op: Handle, comm: Handle) -> c_int {
    let n = match group(comm) { Ok(g) => g.size, Err(rc) => return rc };
    narrowed!(name, base, [recvcounts: n], |f: ReduceScatter| f(sendbuf, recvbuf, recvcounts, datatype, op, comm))
}

#[allow(clippy::too_many_arguments)]
pub fn neighbor_allgatherv(name: &str, base: Option<Allgatherv>, sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void,
                           recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle) -> c_int {
    let Some(sendcount) = sendcount.narrow() else { return too_large(name) };
    let n = match neighbors(comm) { Ok((sources, _)) => sources, Err(rc) => return rc };
    narrowed!(name, base, [recvcounts: n, displs: n], |f: Allgatherv| f(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm))
}

#[allow(clippy::too_many_arguments)]
pub fn neighbor_alltoallv(name: &str, base: Option<Alltoallv>, sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle,
                          recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle) -> c_int {
    let (sources, destinations) = match neighbors(comm) { Ok(n) => n, Err(rc) => return rc };
    narrowed!(name, base, [sendcounts: destinations, sdispls: destinations, recvcounts: sources, rdispls: sources],
              |f: Alltoallv| f(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm))
}

/// Its displacements are `MPI_Aint` in both forms: only the counts narrow.
#[allow(clippy::too_many_arguments)]
pub fn neighbor_alltoallw(name: &str, base: Option<NeighborAlltoallw>, sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64,
                          sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void,
                          comm: Handle) -> c_int {
    let (sources, destinations) = match neighbors(comm) { Ok(n) => n, Err(rc) => return rc };
    narrowed!(name, base, [sendcounts: destinations, recvcounts: sources],
              |f: NeighborAlltoallw| f(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm))
}
