//! The CUDA side: the loaded driver, where buffers live, and copies in the right context. It
//! may use `base` and nothing else, and knows nothing of MPI; every layer above reaches the GPU
//! through it.

pub mod copy;
pub mod driver;
mod hostmem;
mod mapwatch;
mod modules;
pub mod nccl;
pub mod ordered;
pub mod pack;
pub mod pointer;
pub mod reduce;
pub mod signal;
pub mod strided;

pub use copy::{CudaError, Deferred, InContext};
pub use pointer::{locate, plainly_host, surely_host, Device, Location};
pub use strided::Strided;
