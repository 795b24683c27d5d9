//! MPI-4's nonblocking send-receives on a library without them: a receive and a send under
//! one request of cudampi's own, which reports the receive's status.

use std::ffi::{c_int, c_void};

use super::requests::{self, Owned};
use crate::mpi::abi::{self, Handle};
use crate::mpi::real;

/// `MPI_Isendrecv`: the receive is posted first, as the library's own send-receives do.
pub unsafe extern "C" fn isendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    request: *mut c_void,
) -> c_int {
    crate::mpi::ffi::guard("MPI_Isendrecv", || {
        requests::once(request, 2, Owned::default(), |inner| {
            // SAFETY: the caller's arguments, and the two request handles to fill.
            unsafe { post(recvbuf, recvcount, recvtype, source, recvtag, sendbuf, sendcount, sendtype, dest, sendtag, comm, inner) }
        })
    })
}

/// `MPI_Isendrecv_replace`: the send reads a packed copy of the buffer, which the receive
/// then overwrites.
pub unsafe extern "C" fn isendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    request: *mut c_void,
) -> c_int {
    crate::mpi::ffi::guard("MPI_Isendrecv_replace", || {
        let abi = abi::get();
        let Some(p) = real::pmpi() else { return abi.err_intern };
        let mut size: c_int = 0;
        // SAFETY: the caller's datatype and communicator; a valid out-pointer.
        let rc = unsafe { (p.pack_size)(count, datatype, comm, &mut size) };
        if rc != 0 {
            return rc;
        }
        let mut bytes = vec![0u8; size.max(1) as usize];
        let mut position: c_int = 0;
        // SAFETY: `bytes` holds what MPI_Pack_size asked for.
        let rc = unsafe { (p.pack)(buf, count, datatype, bytes.as_mut_ptr().cast(), size, &mut position, comm) };
        if rc != 0 {
            return rc;
        }
        let packed = bytes.as_ptr().cast::<c_void>();
        let owned = Owned { ints: Vec::new(), bytes };
        requests::once(request, 2, owned, |inner| {
            // SAFETY: the caller's buffer for the receive; our packed copy, which the operation
            // owns, for the send.
            unsafe { post(buf, count, datatype, source, recvtag, packed, position, abi.packed, dest, sendtag, comm, inner) }
        })
    })
}

/// Posts the receive into `inner[0]` and the send into `inner[1]`.
#[allow(clippy::too_many_arguments)]
unsafe fn post(
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    dest: c_int,
    sendtag: c_int,
    comm: Handle,
    inner: &mut [Handle],
) -> c_int {
    let Some(p) = real::pmpi() else { return abi::get().err_intern };
    // SAFETY: the caller's arguments; handles of the family's width, zero-extended.
    let rc = unsafe { (p.irecv)(recvbuf, recvcount, recvtype, source, recvtag, comm, &mut inner[0]) };
    if rc != 0 {
        return rc;
    }
    // SAFETY: as above.
    let rc = unsafe { (p.isend)(sendbuf, sendcount, sendtype, dest, sendtag, comm, &mut inner[1]) };
    if rc != 0 {
        requests::abandon(&inner[..1]);
    }
    rc
}
