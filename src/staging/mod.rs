//! Device buffers staged through host memory: the pool of pinned host buffers (`pool`),
//! one buffer argument on its way to the real function, passed through when it is host memory
//! and staged when it is device memory (`stage`), and the host public copy of a window over
//! device memory (`shadow`). It may use `mpi`, `cuda` and `base`. A
//! receive may complete with an envelope of the fast paths in place of its data; `fastpath`,
//! a layer above, hands `stage` what brings the data then (`stage::Envelopes`).

pub mod pool;
pub mod shadow;
pub mod stage;
