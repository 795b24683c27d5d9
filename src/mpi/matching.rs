//! What a receive matches: a source and tag on a communicator, or a message that a matched
//! probe returned. Receives, probes and the envelopes of the fast paths all speak of it.

use std::ffi::{c_int, c_void};

use crate::mpi::abi::Handle;

/// `MPI_Mrecv` has no source argument: the matched message carries it.
pub const SOURCE_IN_MESSAGE: c_int = c_int::MIN;

/// What a receive matches: a source and tag on a communicator, or a message a matched probe
/// returned (`MPI_Mrecv`, `MPI_Imrecv`).
#[derive(Clone, Copy)]
pub enum Matching {
    Tag(c_int, c_int, Handle),
    Message(*mut c_void),
}

impl Matching {
    pub fn source(self) -> c_int {
        match self {
            Matching::Tag(source, _, _) => source,
            Matching::Message(_) => SOURCE_IN_MESSAGE,
        }
    }

    pub fn comm(self) -> Option<Handle> {
        match self {
            Matching::Tag(_, _, comm) => Some(comm),
            Matching::Message(_) => None,
        }
    }
}
