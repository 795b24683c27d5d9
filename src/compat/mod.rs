//! The MPI functions the loaded library lacks, built from the ones it has.
//!
//! cudampi exports every function of its table, and programs that look for functions by symbol
//! (mpi4py's binary wheels, Julia's MPI.jl, bindings built with `dlsym`) call whatever resolves:
//! an MPI-4 function exported over an MPI-3 library is a promise. So the table of real
//! functions (`real::Real`) is completed here, once, where the library has no entry:
//!
//! - large-count `_c` functions call their int-count twin when every count fits, and fail with
//!   `MPI_ERR_COUNT` when one does not (`narrow`);
//! - nonblocking send-receives, the nonblocking large-count v and w collectives and
//!   partitioned communication become requests of cudampi's own (`requests`): a generalized
//!   request over the library's requests, or a persistent "carrier" request the program holds
//!   while cudampi runs the operation;
//! - persistent collectives post their nonblocking twin at every start (`persistent`);
//! - `MPI_Request_get_status_any/all/some` ask `MPI_Request_get_status` of each request
//!   (`status`);
//! - `MPI_Info_get_string` asks `MPI_Info_get_valuelen` and `MPI_Info_get` (`info`).
//!
//! When any of these makes requests of its own, the completion calls (`MPI_Wait` and the rest,
//! `MPI_Start`, `MPI_Request_free`) are wrapped too, so that they progress those requests and
//! never report one complete before its operation is. Everything here works on whatever
//! buffers the layer above hands it (host memory: device buffers are staged before), and calls
//! only the library.
//!
//! It may use `mpi` and `base`. `real` calls [`install`] and [`install_pmpi`] through the
//! function values that `entry` hands it at start-up, so the two do not import each other.

mod fill;
mod info;
pub mod narrow;
mod persistent;
mod requests;
mod sendrecv;
mod status;

use crate::mpi::real::{Pmpi, Real};

/// Completes `real` where the library lacks functions. Called once, when it is resolved.
pub fn install(real: &mut Real) {
    let own = fill::fill(real) | fill::by_hand(real);
    if own {
        requests::wrap(real);
    }
}

/// The helper functions cudampi calls for itself complete, start and free requests through the
/// same wrappers as the program's calls.
pub fn install_pmpi(p: &mut Pmpi) {
    requests::wrap_pmpi(crate::mpi::real::get(), p);
}

/// Operations still in flight that the program freed are completed (`MPI_Finalize`, before the
/// real one); then every request of cudampi's own is forgotten.
pub fn finalize() {
    requests::finalize();
}
