//! The C boundary: no panic may unwind into the MPI program.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs an entry point's body; a panic (a bug in cudampi) becomes one error line and
/// `MPI_ERR_INTERN` instead of an abort.
#[inline(always)]
pub fn guard(name: &'static str, body: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(rc) => rc,
        Err(_) => internal(name),
    }
}

#[cold]
fn internal(name: &'static str) -> c_int {
    crate::base::log::error(format_args!("internal error in {name}; please report it"));
    crate::mpi::abi::get().err_intern
}
