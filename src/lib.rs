//! cudampi makes an MPI library that was built without CUDA support accept device buffers.
//!
//! Loaded with `LD_PRELOAD` or linked before `-lmpi`, it exports the MPI functions that carry
//! buffers. For each call it asks the CUDA driver where the buffers live: host buffers go
//! straight to the real function, device buffers are staged through pinned host memory, and the
//! real function (the next definition in the search order, found with `dlsym(RTLD_NEXT)`) does
//! the communication.
//!
//! Module map:
//! - `table`: the one table of interposed functions; `export` and `real` expand it.
//! - `handlers`: what each table entry calls: `p2p` (blocking), `nonblocking` (posting
//!   nonblocking, persistent and partitioned operations), `completion` (Wait/Test and the
//!   other request calls), `collectives`, `lifecycle`.
//! - `stage`: one buffer argument, passed through or staged; `requests`: the requests that own
//!   staged buffers until completion.
//! - `abi`: which MPI family is loaded and its constants; `datatype`: spans of typed buffers.
//! - `real`: the library's functions; `compat`: the ones it lacks, built from those it has.
//! - `cuda`: the driver the process loaded, pointer classification, copies in context.
//! - `staging`: the pinned host buffer pool.
//! - `ipc`: device messages inside a node, GPU to GPU over CUDA IPC.
//! - `config`, `log`, `stats`, `errors`, `ffi`: environment, diagnostics, the C boundary.
//! - `fortran`: the Fortran entry points, from the same table.
//! - `api`: the library's own C API (`include/cudampi.h`).

#![deny(unsafe_op_in_unsafe_fn)]
#![allow(non_snake_case)]
// MPI signatures are long; the handlers mirror them.
#![allow(clippy::too_many_arguments)]

mod base;
mod compat;
mod cuda;
pub mod entry;
mod fastpath;
mod handlers;
mod mpi;
mod requests;
mod staging;
