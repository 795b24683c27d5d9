//! The handlers the table names, gathered for `export.rs`.

pub use crate::lifecycle::{finalize, gpu_query_support, init, query_cuda_support};
pub use crate::p2p::{recv, send, sendrecv, sendrecv_replace};
