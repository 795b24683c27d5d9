//! Persistent collectives and partitioned communication on a library without them.
//!
//! A persistent collective is a carrier request (a persistent send to `MPI_PROC_NULL` on
//! `MPI_COMM_SELF`) and, at each start, the nonblocking collective with the arguments of the
//! init call; MPI requires persistent collectives to be started in the same order everywhere,
//! which is what nonblocking ones need. A partitioned send is a persistent send of the whole
//! buffer, started once every partition is ready; a partitioned receive is a persistent
//! receive of the whole buffer, whose partitions have all arrived once it has. Both sides of a
//! partitioned exchange must then run on cudampi, which they do: every rank of a job preloads
//! the same library.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::requests::{self, Op, Starter};
use crate::mpi::abi::{self, Handle};
use crate::mpi::real;

/// An `MPI_<collective>_init`: `start` posts the nonblocking collective into the request it
/// is given.
pub fn collective(name: &'static str, request: *mut c_void, start: impl Fn(*mut c_void) -> c_int + 'static) -> c_int {
    crate::mpi::ffi::guard(name, || {
        let abi = abi::get();
        let Some(send_init) = real::get().PMPI_Send_init else { return real::missing(name) };
        let mut carrier: Handle = abi.request_null;
        // SAFETY: a send of nothing to MPI_PROC_NULL; the handle is written in the family's width.
        let rc = unsafe {
            send_init(std::ptr::null(), 0, abi.byte, abi.proc_null, 0, abi.comm_self, (&mut carrier as *mut Handle).cast())
        };
        if rc != 0 {
            return rc;
        }
        let starter = Arc::new(Starter(Box::new(start)));
        requests::insert(carrier, Op::Collective { carrier, starter, inner: None, active: false, done: false });
        // SAFETY: the caller's request argument.
        unsafe { abi.set_handle(request, carrier) };
        0
    })
}

/// The whole buffer's count, as the int the persistent call takes.
fn whole(partitions: c_int, count: i64) -> Option<c_int> {
    if partitions < 0 || count < 0 {
        return None;
    }
    c_int::try_from(count.checked_mul(partitions as i64)?).ok()
}

#[allow(clippy::too_many_arguments)]
fn partitioned(
    name: &'static str,
    buf: *mut c_void,
    partitions: c_int,
    count: i64,
    datatype: Handle,
    peer: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut c_void,
    send: bool,
) -> c_int {
    crate::mpi::ffi::guard(name, || {
        let abi = abi::get();
        let Some(total) = whole(partitions, count) else {
            crate::base::log::error(format_args!("{name}: {partitions} partitions of {count} elements are not a count the loaded MPI library takes"));
            return crate::mpi::errors::raise(Some(comm), abi.err_count);
        };
        let r = real::get();
        let rc = match (send, r.PMPI_Send_init, r.PMPI_Recv_init) {
            // SAFETY: the caller's arguments, with the whole buffer's count.
            (true, Some(f), _) => unsafe { f(buf, total, datatype, peer, tag, comm, request) },
            // SAFETY: as above.
            (false, _, Some(f)) => unsafe { f(buf, total, datatype, peer, tag, comm, request) },
            _ => return real::missing(name),
        };
        if rc != 0 {
            return rc;
        }
        // SAFETY: MPI has just written the new request there.
        let carrier = unsafe { abi.request_at(request, 0) };
        let n = partitions as usize;
        let op = match send {
            true => Op::PartSend { ready: vec![false; n], active: false, starting: false, started: false },
            false => Op::PartRecv { partitions: n },
        };
        requests::insert(carrier, op);
        0
    })
}

pub unsafe extern "C" fn psend_init(
    buf: *const c_void,
    partitions: c_int,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    _info: Handle,
    request: *mut c_void,
) -> c_int {
    partitioned("MPI_Psend_init", buf as *mut c_void, partitions, count, datatype, dest, tag, comm, request, true)
}

pub unsafe extern "C" fn precv_init(
    buf: *mut c_void,
    partitions: c_int,
    count: i64,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    _info: Handle,
    request: *mut c_void,
) -> c_int {
    partitioned("MPI_Precv_init", buf, partitions, count, datatype, source, tag, comm, request, false)
}

/// Marks partitions ready; the send starts with the last one.
fn ready(name: &'static str, request: Handle, partitions: impl Iterator<Item = c_int>) -> c_int {
    crate::mpi::ffi::guard(name, || {
        let abi = abi::get();
        let start = requests::with(request, |op| match op {
            Op::PartSend { ready, active: true, starting, started: false, .. } => {
                for i in partitions {
                    match usize::try_from(i).ok().and_then(|i| ready.get_mut(i)) {
                        Some(r) => *r = true,
                        None => return Err(i),
                    }
                }
                let all = ready.iter().all(|&r| r) && !*starting;
                *starting |= all;
                Ok(all)
            }
            _ => Ok(false),
        });
        match start {
            None => {
                crate::base::log::error(format_args!("{name}: the request is not a partitioned send"));
                crate::mpi::errors::raise(None, abi.err_other)
            }
            Some(Err(i)) => {
                crate::base::log::error(format_args!("{name}: partition {i} is out of range"));
                crate::mpi::errors::raise(None, abi.err_other)
            }
            Some(Ok(true)) => all_ready(request),
            Some(Ok(false)) => 0,
        }
    })
}

/// Starts a partitioned send whose partitions are all ready.
pub fn all_ready(request: Handle) -> c_int {
    let rc = requests::start_carrier(request);
    requests::with(request, |op| {
        if let Op::PartSend { starting, started, .. } = op {
            (*starting, *started) = (false, rc == 0);
        }
    });
    rc
}

pub unsafe extern "C" fn pready(partition: c_int, request: Handle) -> c_int {
    ready("MPI_Pready", request, std::iter::once(partition))
}

pub unsafe extern "C" fn pready_range(low: c_int, high: c_int, request: Handle) -> c_int {
    ready("MPI_Pready_range", request, low..=high)
}

pub unsafe extern "C" fn pready_list(length: c_int, partitions: *const c_int, request: Handle) -> c_int {
    let list: &[c_int] = if partitions.is_null() || length <= 0 {
        &[]
    } else {
        // SAFETY: the caller passes `length` partition numbers.
        unsafe { std::slice::from_raw_parts(partitions, length as usize) }
    };
    ready("MPI_Pready_list", request, list.iter().copied())
}

/// A partition has arrived once the whole receive has.
pub unsafe extern "C" fn parrived(request: Handle, partition: c_int, flag: *mut c_int) -> c_int {
    crate::mpi::ffi::guard("MPI_Parrived", || {
        let abi = abi::get();
        let in_range = requests::with(request, |op| match op {
            Op::PartRecv { partitions } => usize::try_from(partition).is_ok_and(|p| p < *partitions),
            _ => false,
        });
        if in_range != Some(true) {
            crate::base::log::error(format_args!("MPI_Parrived: partition {partition} of a request that is not a partitioned receive with that many"));
            return crate::mpi::errors::raise(None, abi.err_other);
        }
        let Some(get_status) = real::get().PMPI_Request_get_status else { return real::missing("MPI_Parrived") };
        let mut status = abi::Status::zeroed();
        // SAFETY: the caller's request and flag; our own status.
        unsafe { get_status(request, flag, status.as_mut_ptr()) }
    })
}
