//! Device buffers staged through host memory: the pool of pinned host buffers (`pool`), and
//! one buffer argument on its way to the real function, passed through when it is host memory
//! and staged when it is device memory (`stage`).

pub mod pool;
pub mod stage;
