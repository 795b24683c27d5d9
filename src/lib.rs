//! cudampi makes an MPI library that was built without CUDA support accept device buffers.
//!
//! Loaded with `LD_PRELOAD` or linked before `-lmpi`, it exports the MPI functions that carry
//! buffers. For each call it asks the CUDA driver where the buffers live: host buffers go
//! straight to the real function, device buffers are staged through pinned host memory, and the
//! real function (the next definition in the search order, found with `dlsym(RTLD_NEXT)`) does
//! the communication.
//!
//! The modules are layers; each uses only those below it (`scripts/layers.py` checks this,
//! and `docs/design.md` draws it). From the bottom:
//! - `base`: settings from the environment, the `cudampi:` lines, the counters.
//! - `cuda`: the driver the process loaded, where a buffer lives, copies in context.
//! - `mpi`: the loaded MPI family and its constants, the one table of interposed functions,
//!   the library's real functions, datatypes, errors, the C boundary.
//! - `compat`: the MPI functions the library lacks, built from those it has.
//! - `staging`: the pinned host buffer pool, and one buffer argument passed through or staged.
//! - `fastpath`: device messages between ranks that both run cudampi, over CUDA IPC or in
//!   chunks, sent as envelopes that the receive side recognises.
//! - `engine`: which engine runs a blocking device collective (NCCL where every rank can,
//!   agreed by the ranks), and NCCL's communicators.
//! - `streams`: MPICH's stream-ordered calls (`MPIX_*_enqueue`), on NCCL or cudampi's progress
//!   thread.
//! - `requests`: the requests that own staged buffers until completion.
//! - `handlers`: what each table entry calls, named after what it serves.
//! - `entry`: the C and Fortran entry points expanded from the table, and cudampi's own C API.
//!
//! Where a lower layer needs something of a higher one, it is handed down as a function value
//! when the higher one starts, never imported.

#![deny(unsafe_op_in_unsafe_fn)]
#![allow(non_snake_case)]
// MPI signatures are long; the handlers mirror them.
#![allow(clippy::too_many_arguments)]

mod base;
mod compat;
mod cuda;
mod engine;
pub mod entry;
mod fastpath;
mod handlers;
mod mpi;
mod requests;
mod staging;
mod streams;
