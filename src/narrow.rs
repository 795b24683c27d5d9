//! MPI-4's large-count (`_c`) functions on a library that lacks them.
//!
//! cudampi exports every `_c` name it interposes, so a program that looks for them by symbol
//! (mpi4py binds them weakly and uses them when present) calls them on an MPI-3 library too.
//! Such a call goes to the library's int-count function (`or BASE` in the table) when every
//! count fits in an int, and fails with `MPI_ERR_COUNT` when one does not.

use std::ffi::{c_int, c_void};

use crate::{abi, errors, log};

/// An argument of a `_c` function, as its int-count twin takes it.
pub trait Narrow: Sized {
    type Out;
    fn narrow(self) -> Option<Self::Out>;
}

impl Narrow for i64 {
    type Out = c_int;
    #[inline]
    fn narrow(self) -> Option<c_int> {
        c_int::try_from(self).ok()
    }
}

macro_rules! unchanged {
    ($($t:ty),*) => {
        $(impl Narrow for $t {
            type Out = $t;
            #[inline]
            fn narrow(self) -> Option<$t> {
                Some(self)
            }
        })*
    };
}

// Handles are `usize`. Count arrays (`*const i64`) have no impl on purpose: their functions
// have no `or BASE` in the table.
unchanged!(c_int, usize, *const c_void, *mut c_void, *const c_int, *mut c_int);

#[cold]
pub fn too_large(name: &str) -> c_int {
    log::error(format_args!(
        "{name}: a count does not fit in an int, and the loaded MPI library has no large-count {name}"
    ));
    errors::raise(None, abi::get().err_count)
}
