//! The handlers the table names, gathered for `export.rs`: blocking point-to-point (`p2p`),
//! posting nonblocking, persistent and partitioned operations (`nonblocking`), `MPI_Wait`,
//! `MPI_Test` and the other request calls (`completion`), collectives (`collectives`),
//! `MPI_Pack` and `MPI_Unpack` (`packing`), MPI-IO reads and writes (`io`), one-sided
//! communication (`rma`) and windows with their synchronisation (`windows`; device windows
//! mapped inside a node, `mapped`, or served by their owners elsewhere, `served` and
//! `mailbox`; the buffers of both, `side`), and `MPI_Init`,
//! `MPI_Finalize`, `MPI_Type_free` and the CUDA-support queries (`lifecycle`), and MPICH's
//! stream-ordered calls (`enqueue`); the probes live
//! with the envelopes they look into
//! (`fastpath::held`). A handler may use every layer below; only `entry` uses the handlers.

pub mod collectives;
pub mod completion;
pub mod enqueue;
pub mod host;
pub mod io;
pub mod lifecycle;
pub mod mailbox;
pub mod mapped;
pub mod nonblocking;
pub mod p2p;
pub mod packing;
pub mod rma;
pub mod served;
pub mod side;
pub mod windows;

pub use crate::fastpath::held::{improbe, iprobe, mprobe, probe};
pub use crate::handlers::collectives::{coll, ncoll, ncoll1};
pub use crate::handlers::enqueue::{allreduce_enqueue, info_set_hex, recv_enqueue, send_enqueue, stream_comm_create, stream_create, stream_free, wait_enqueue};
pub use crate::handlers::io::{file_begin_read, file_begin_write, file_end_read, file_end_write, file_iread, file_iwrite, file_read, file_write};
pub use crate::handlers::lifecycle::{finalize, get_info, gpu_query_support, info_env, init, init_thread, query_cuda_support, type_free};
pub use crate::handlers::packing::{pack, unpack};
pub use crate::handlers::p2p::{recv, send, sendrecv, sendrecv_replace};
pub use crate::handlers::completion::{
    parrived, pready, pready_list, pready_range, request_free, request_get_status, request_get_status_all, request_get_status_any, request_get_status_some, some, start, startall, test, testall, testany, wait,
    waitall, waitany,
};
pub use crate::handlers::rma::{rma_compare_and_swap, rma_get, rma_get_accumulate, rma_put};
pub use crate::handlers::windows::{
    get_address, win_attach, win_complete, win_lock, win_start, win_wait, win_create, win_create_dynamic, win_detach, win_fence, win_flush, win_free, win_get_attr, win_post, win_sync, win_test, win_unlock,
};
pub use crate::handlers::nonblocking::{irecv, isend, isendrecv, isendrecv_replace, partitioned_init, persistent_init};
