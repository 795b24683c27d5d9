//! MPI-4's large-count (`_c`) functions on a library that lacks them.
//!
//! Such a call goes to the library's int-count function (`or BASE` in the table) when every
//! count fits in an int, and fails with `MPI_ERR_COUNT` when one does not. The v and w
//! collectives (`or BASE via FAMILY`) narrow their count and displacement arrays into copies,
//! as long as the communicator says: a blocking call's copies live for the call, a nonblocking
//! call's with the request of cudampi's own that it becomes (`requests::once`).

use std::ffi::{c_int, c_void};

use super::requests::{self, Owned};
use crate::base::log;
use crate::mpi::comm::{group, neighbors};
use crate::mpi::abi::{self, Handle, Offset};
use crate::mpi::errors;

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

// Handles are `usize`, `MPI_Aint` displacements and sizes `isize`, file offsets `Offset`. Count
// arrays (`*const i64`) have no impl on purpose: their functions name a FAMILY that narrows them.
unchanged!(c_int, usize, isize, Offset, *const c_void, *mut c_void, *const c_int, *mut c_int);

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
        let Some(f) = $base else { return crate::mpi::real::missing($name) };
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

/// Narrows `$arr` arrays of `$n` entries into copies the new request owns, then posts `$base`
/// with them into the request's one inner request.
macro_rules! narrowed_nb {
    ($name:expr, $base:expr, $request:expr, [$($arr:ident : $n:expr),*], $call:expr) => {{
        let Some(f) = $base else { return crate::mpi::real::missing($name) };
        $( let Some($arr) = ints($arr, $n) else { return too_large($name) }; )*
        let ptrs = [$(at(&$arr)),*];
        let owned = Owned { ints: vec![$($arr),*], bytes: Vec::new() };
        requests::once($request, 1, owned, |inner| {
            // SAFETY: the library's int-count twin with the arrays narrowed into copies that
            // live as long as the request.
            unsafe { $call(f, &ptrs, (&mut inner[0] as *mut Handle).cast::<c_void>()) }
        })
    }};
}

type Igatherv = unsafe extern "C" fn(*const c_void, c_int, Handle, *mut c_void, *const c_int, *const c_int, Handle, c_int, Handle, *mut c_void) -> c_int;
type Iscatterv = unsafe extern "C" fn(*const c_void, *const c_int, *const c_int, Handle, *mut c_void, c_int, Handle, c_int, Handle, *mut c_void) -> c_int;
type Iallgatherv = unsafe extern "C" fn(*const c_void, c_int, Handle, *mut c_void, *const c_int, *const c_int, Handle, Handle, *mut c_void) -> c_int;
type Ialltoallv = unsafe extern "C" fn(*const c_void, *const c_int, *const c_int, Handle, *mut c_void, *const c_int, *const c_int, Handle, Handle, *mut c_void) -> c_int;
type Ialltoallw = unsafe extern "C" fn(*const c_void, *const c_int, *const c_int, *const c_void, *mut c_void, *const c_int, *const c_int, *const c_void, Handle, *mut c_void) -> c_int;
type IreduceScatter = unsafe extern "C" fn(*const c_void, *mut c_void, *const c_int, Handle, Handle, Handle, *mut c_void) -> c_int;
type IneighborAlltoallw = unsafe extern "C" fn(*const c_void, *const c_int, *const i64, *const c_void, *mut c_void, *const c_int, *const i64, *const c_void, Handle, *mut c_void) -> c_int;

#[allow(clippy::too_many_arguments)]
pub fn igatherv(name: &str, base: Option<Igatherv>, sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void,
                recvcounts: *const i64, displs: *const i64, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void) -> c_int {
    let Some(sendcount) = sendcount.narrow() else { return too_large(name) };
    let n = match at_root(comm, root) { Ok(n) => n, Err(rc) => return rc };
    narrowed_nb!(name, base, request, [recvcounts: n, displs: n],
                 |f: Igatherv, a: &[*const c_int; 2], r| f(sendbuf, sendcount, sendtype, recvbuf, a[0], a[1], recvtype, root, comm, r))
}

#[allow(clippy::too_many_arguments)]
pub fn iscatterv(name: &str, base: Option<Iscatterv>, sendbuf: *const c_void, sendcounts: *const i64, displs: *const i64, sendtype: Handle,
                 recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void) -> c_int {
    let Some(recvcount) = recvcount.narrow() else { return too_large(name) };
    let n = match at_root(comm, root) { Ok(n) => n, Err(rc) => return rc };
    narrowed_nb!(name, base, request, [sendcounts: n, displs: n],
                 |f: Iscatterv, a: &[*const c_int; 2], r| f(sendbuf, a[0], a[1], sendtype, recvbuf, recvcount, recvtype, root, comm, r))
}

#[allow(clippy::too_many_arguments)]
pub fn iallgatherv(name: &str, base: Option<Iallgatherv>, sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void,
                   recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle, request: *mut c_void) -> c_int {
    let Some(sendcount) = sendcount.narrow() else { return too_large(name) };
    let n = match group(comm) { Ok(g) => g.peers, Err(rc) => return rc };
    narrowed_nb!(name, base, request, [recvcounts: n, displs: n],
                 |f: Iallgatherv, a: &[*const c_int; 2], r| f(sendbuf, sendcount, sendtype, recvbuf, a[0], a[1], recvtype, comm, r))
}

#[allow(clippy::too_many_arguments)]
pub fn ialltoallv(name: &str, base: Option<Ialltoallv>, sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle,
                  recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle, request: *mut c_void) -> c_int {
    let n = match group(comm) { Ok(g) => g.peers, Err(rc) => return rc };
    narrowed_nb!(name, base, request, [sendcounts: n, sdispls: n, recvcounts: n, rdispls: n],
                 |f: Ialltoallv, a: &[*const c_int; 4], r| f(sendbuf, a[0], a[1], sendtype, recvbuf, a[2], a[3], recvtype, comm, r))
}

#[allow(clippy::too_many_arguments)]
pub fn ialltoallw(name: &str, base: Option<Ialltoallw>, sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtypes: *const c_void,
                  recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void, comm: Handle, request: *mut c_void) -> c_int {
    let n = match group(comm) { Ok(g) => g.peers, Err(rc) => return rc };
    narrowed_nb!(name, base, request, [sendcounts: n, sdispls: n, recvcounts: n, rdispls: n],
                 |f: Ialltoallw, a: &[*const c_int; 4], r| f(sendbuf, a[0], a[1], sendtypes, recvbuf, a[2], a[3], recvtypes, comm, r))
}

pub fn ireduce_scatter(name: &str, base: Option<IreduceScatter>, sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64,
                       datatype: Handle, op: Handle, comm: Handle, request: *mut c_void) -> c_int {
    let n = match group(comm) { Ok(g) => g.size, Err(rc) => return rc };
    narrowed_nb!(name, base, request, [recvcounts: n], |f: IreduceScatter, a: &[*const c_int; 1], r| f(sendbuf, recvbuf, a[0], datatype, op, comm, r))
}

#[allow(clippy::too_many_arguments)]
pub fn ineighbor_allgatherv(name: &str, base: Option<Iallgatherv>, sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void,
                            recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle, request: *mut c_void) -> c_int {
    let Some(sendcount) = sendcount.narrow() else { return too_large(name) };
    let n = match neighbors(comm) { Ok((sources, _)) => sources, Err(rc) => return rc };
    narrowed_nb!(name, base, request, [recvcounts: n, displs: n],
                 |f: Iallgatherv, a: &[*const c_int; 2], r| f(sendbuf, sendcount, sendtype, recvbuf, a[0], a[1], recvtype, comm, r))
}

#[allow(clippy::too_many_arguments)]
pub fn ineighbor_alltoallv(name: &str, base: Option<Ialltoallv>, sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle,
                           recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle, request: *mut c_void) -> c_int {
    let (sources, destinations) = match neighbors(comm) { Ok(n) => n, Err(rc) => return rc };
    narrowed_nb!(name, base, request, [sendcounts: destinations, sdispls: destinations, recvcounts: sources, rdispls: sources],
                 |f: Ialltoallv, a: &[*const c_int; 4], r| f(sendbuf, a[0], a[1], sendtype, recvbuf, a[2], a[3], recvtype, comm, r))
}

/// Its displacements are `MPI_Aint` in both forms: only the counts narrow.
#[allow(clippy::too_many_arguments)]
pub fn ineighbor_alltoallw(name: &str, base: Option<IneighborAlltoallw>, sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64,
                           sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void,
                           comm: Handle, request: *mut c_void) -> c_int {
    let (sources, destinations) = match neighbors(comm) { Ok(n) => n, Err(rc) => return rc };
    narrowed_nb!(name, base, request, [sendcounts: destinations, recvcounts: sources],
                 |f: IneighborAlltoallw, a: &[*const c_int; 2], r| f(sendbuf, a[0], sdispls, sendtypes, recvbuf, a[1], rdispls, recvtypes, comm, r))
}

/// The `position` of a large-count pack or unpack, as the int-count twin's `int`; what the
/// library leaves in it is handed back.
fn with_position(name: &str, position: *mut i64, call: impl FnOnce(*mut c_int) -> c_int) -> c_int {
    if position.is_null() {
        // The library refuses the missing position itself.
        return call(std::ptr::null_mut());
    }
    // SAFETY: the caller's MPI_Count, which the call reads and writes anyway.
    let Some(mut at) = unsafe { position.read_unaligned() }.narrow() else { return too_large(name) };
    let rc = call(&mut at);
    // SAFETY: as above.
    unsafe { position.write_unaligned(at.into()) };
    rc
}

type Pack = unsafe extern "C" fn(*const c_void, c_int, Handle, *mut c_void, c_int, *mut c_int, Handle) -> c_int;
type Unpack = unsafe extern "C" fn(*const c_void, c_int, *mut c_int, *mut c_void, c_int, Handle, Handle) -> c_int;
type PackExternal = unsafe extern "C" fn(*const c_void, *const c_void, c_int, Handle, *mut c_void, i64, *mut i64) -> c_int;
type UnpackExternal = unsafe extern "C" fn(*const c_void, *const c_void, i64, *mut i64, *mut c_void, c_int, Handle) -> c_int;

#[allow(clippy::too_many_arguments)]
pub fn pack(name: &str, base: Option<Pack>, inbuf: *const c_void, incount: i64, datatype: Handle, outbuf: *mut c_void,
            outsize: i64, position: *mut i64, comm: Handle) -> c_int {
    let Some(f) = base else { return crate::mpi::real::missing(name) };
    let (Some(incount), Some(outsize)) = (incount.narrow(), outsize.narrow()) else { return too_large(name) };
    // SAFETY: the library's int-count twin with the counts and the position narrowed.
    with_position(name, position, |at| unsafe { f(inbuf, incount, datatype, outbuf, outsize, at, comm) })
}

#[allow(clippy::too_many_arguments)]
pub fn unpack(name: &str, base: Option<Unpack>, inbuf: *const c_void, insize: i64, position: *mut i64, outbuf: *mut c_void,
              outcount: i64, datatype: Handle, comm: Handle) -> c_int {
    let Some(f) = base else { return crate::mpi::real::missing(name) };
    let (Some(insize), Some(outcount)) = (insize.narrow(), outcount.narrow()) else { return too_large(name) };
    // SAFETY: as for pack.
    with_position(name, position, |at| unsafe { f(inbuf, insize, at, outbuf, outcount, datatype, comm) })
}

/// Its size and position are `MPI_Aint` in both forms: only the count narrows.
#[allow(clippy::too_many_arguments)]
pub fn pack_external(name: &str, base: Option<PackExternal>, datarep: *const c_void, inbuf: *const c_void, incount: i64, datatype: Handle,
                     outbuf: *mut c_void, outsize: i64, position: *mut i64) -> c_int {
    let Some(f) = base else { return crate::mpi::real::missing(name) };
    let Some(incount) = incount.narrow() else { return too_large(name) };
    // SAFETY: the library's int-count twin with the count narrowed.
    unsafe { f(datarep, inbuf, incount, datatype, outbuf, outsize, position) }
}

/// As [`pack_external`].
#[allow(clippy::too_many_arguments)]
pub fn unpack_external(name: &str, base: Option<UnpackExternal>, datarep: *const c_void, inbuf: *const c_void, insize: i64, position: *mut i64,
                       outbuf: *mut c_void, outcount: i64, datatype: Handle) -> c_int {
    let Some(f) = base else { return crate::mpi::real::missing(name) };
    let Some(outcount) = outcount.narrow() else { return too_large(name) };
    // SAFETY: as for pack_external.
    unsafe { f(datarep, inbuf, insize, position, outbuf, outcount, datatype) }
}
