//! What a receive matches: a source and tag on a communicator, or a message that a matched
//! probe returned. Receives, probes and the envelopes of the fast paths all speak of it.

use std::ffi::{c_int, c_void};

use crate::mpi::abi::{self, Handle};

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
    /// The source a receive names; `MPI_PROC_NULL` for the message a probe of it returned,
    /// whose receive transfers nothing.
    pub fn source(self) -> c_int {
        let abi = abi::get();
        match self {
            Matching::Tag(source, _, _) => source,
            // SAFETY: a message argument points to the caller's `MPI_Message`.
            Matching::Message(m) if !m.is_null() && abi.same(unsafe { abi.request_at(m, 0) }, abi.message_no_proc) => abi.proc_null,
            Matching::Message(_) => SOURCE_IN_MESSAGE,
        }
    }

    /// The tag a receive names; `MPI_ANY_TAG` for a matched message.
    pub fn tag(self) -> c_int {
        match self {
            Matching::Tag(_, tag, _) => tag,
            Matching::Message(_) => abi::get().any_tag,
        }
    }

    pub fn comm(self) -> Option<Handle> {
        match self {
            Matching::Tag(_, _, comm) => Some(comm),
            Matching::Message(_) => None,
        }
    }
}
