//! What cudampi asks the library about a communicator: its rank and size and the processes
//! that exchange data with this one (the plan of a collective counts its buffers from them),
//! and the neighbors of a topology (neighborhood collectives). Each answer is the library's,
//! through the `PMPI_` functions; an error is the library's code.

use std::ffi::c_int;

use crate::mpi::abi::{self, Handle};
use crate::mpi::real;

/// A communicator as the plan of a collective needs it.
pub struct Group {
    pub rank: c_int,
    pub size: c_int,
    /// Processes that send to or receive from this one: the remote group's size on an
    /// intercommunicator.
    pub peers: c_int,
    pub inter: bool,
}

pub fn group(comm: Handle) -> Result<Group, c_int> {
    let (rank, size) = rank_size(comm)?;
    let p = real::pmpi().ok_or(abi::get().err_intern)?;
    let mut inter = 0;
    // SAFETY: a valid out-pointer; the communicator is the caller's.
    check(unsafe { (p.comm_test_inter)(comm, &mut inter) })?;
    let mut peers = size;
    if inter != 0 {
        // SAFETY: as above.
        check(unsafe { (p.comm_remote_size)(comm, &mut peers) })?;
    }
    Ok(Group { rank, size, peers, inter: inter != 0 })
}

/// This rank and the size of a communicator (of its local group, for an intercommunicator).
pub fn rank_size(comm: Handle) -> Result<(c_int, c_int), c_int> {
    let p = real::pmpi().ok_or(abi::get().err_intern)?;
    let (mut rank, mut size) = (0, 0);
    // SAFETY: valid out-pointers; the communicator is the caller's.
    unsafe {
        check((p.comm_rank)(comm, &mut rank))?;
        check((p.comm_size)(comm, &mut size))?;
    }
    Ok((rank, size))
}

/// (sources, destinations) of a communicator with a topology.
pub fn neighbors(comm: Handle) -> Result<(c_int, c_int), c_int> {
    let p = real::pmpi().ok_or(abi::get().err_intern)?;
    let abi = abi::get();
    let mut topo = 0;
    // SAFETY: valid out-pointers throughout; each query matches the topology it asks about.
    unsafe {
        check((p.topo_test)(comm, &mut topo))?;
        if topo == abi.topo_cart {
            let mut ndims = 0;
            check((p.cartdim_get)(comm, &mut ndims))?;
            Ok((2 * ndims, 2 * ndims))
        } else if topo == abi.topo_graph {
            let (mut rank, mut n) = (0, 0);
            check((p.comm_rank)(comm, &mut rank))?;
            check((p.graph_neighbors_count)(comm, rank, &mut n))?;
            Ok((n, n))
        } else if topo == abi.topo_dist_graph {
            let (mut sources, mut destinations, mut weighted) = (0, 0, 0);
            check((p.dist_graph_neighbors_count)(comm, &mut sources, &mut destinations, &mut weighted))?;
            Ok((sources, destinations))
        } else {
            // No topology: MPI rejects the call before it touches a buffer.
            Ok((0, 0))
        }
    }
}

fn check(rc: c_int) -> Result<(), c_int> {
    if rc == 0 {
        Ok(())
    } else {
        Err(rc)
    }
}
