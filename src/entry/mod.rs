//! The entry points: the C functions expanded from the table (`export`), the Fortran ones from
//! the same table (`fortran`), and cudampi's own C API (`api`, `include/cudampi.h`). This is the
//! top layer: it may use every layer below, and it hands the MPI layer, at start-up, what that
//! layer must know of the ones above ([`start`]).

pub mod api;
mod export;
mod fortran;

use crate::mpi::real::{self, Start};

/// Runs when the dynamic loader maps the library, before any entry point can be called: the
/// lookups of the real functions must skip cudampi's own entry points, and the functions the
/// library lacks are built by `compat`, above the layer that looks them up.
#[used]
#[link_section = ".init_array"]
static START: extern "C" fn() = start;

extern "C" fn start() {
    real::start(Start { own: export::own(), complete: crate::compat::install, complete_pmpi: crate::compat::install_pmpi });
}
