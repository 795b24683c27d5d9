//! Fills the table of real functions from the table's `or`, `via` and `starts` (see
//! `table.rs`), and with the hand-written functions of this module's siblings.

use std::ffi::{c_int, c_void};

use super::narrow::{self, Narrow};
use crate::mpi::abi::{Handle, Offset};
use crate::mpi::real::Real;

/// Builds the persistent collective's start: its nonblocking twin called with the arguments
/// of the `_init` function but `info` (always the last but one), `request` replaced by the
/// request the start posts.
macro_rules! persistent {
    ($name:ident $start:ident [$($done:ident),*] $info:ident : $ti:ty, $request:ident : $tr:ty) => {{
        let _ = $info;
        super::persistent::collective(stringify!($name), $request, move |inner: *mut c_void| match crate::mpi::real::get().$start {
            // SAFETY: the nonblocking twin, with the arguments the program gave at init.
            Some(g) => unsafe { g($($done,)* inner) },
            None => crate::mpi::real::missing(stringify!($name)),
        })
    }};
    ($name:ident $start:ident [$($done:ident),*] $a:ident : $ta:ty, $($rest:tt)*) => {
        persistent!($name $start [$($done,)* $a] $($rest)*)
    };
}

macro_rules! fill_one {
    ($real:ident, $own:ident, $name:ident [] [] ($($arg:ident : $ty:ty),*)) => {};
    ($real:ident, $own:ident, $name:ident [$base:ident] [] ($($arg:ident : $ty:ty),*)) => {
        if $real.$name.is_none() {
            unsafe extern "C" fn f($($arg: $ty),*) -> c_int {
                crate::mpi::ffi::guard(stringify!($name), || {
                    $(
                        let Some($arg) = Narrow::narrow($arg) else {
                            return narrow::too_large(stringify!($name));
                        };
                    )*
                    match crate::mpi::real::get().$base {
                        // SAFETY: the int-count twin, with the same arguments narrowed to its types.
                        Some(g) => unsafe { g($($arg),*) },
                        None => crate::mpi::real::missing(stringify!($name)),
                    }
                })
            }
            $real.$name = Some(f);
        }
    };
    ($real:ident, $own:ident, $name:ident [$base:ident via $family:ident] [] ($($arg:ident : $ty:ty),*)) => {
        if $real.$name.is_none() {
            unsafe extern "C" fn f($($arg: $ty),*) -> c_int {
                crate::mpi::ffi::guard(stringify!($name), || narrow::$family(stringify!($name), crate::mpi::real::get().$base, $($arg),*))
            }
            $real.$name = Some(f);
            $own = true;
        }
    };
    ($real:ident, $own:ident, $name:ident [] [$start:ident] ($($arg:ident : $ty:ty),*)) => {
        if $real.$name.is_none() {
            unsafe extern "C" fn f($($arg: $ty),*) -> c_int {
                persistent!($name $start [] $($arg : $ty),*)
            }
            $real.$name = Some(f);
            $own = true;
        }
    };
}

macro_rules! define_fill {
    ($( $name:ident, $pname:ident $(or $base:ident, $pbase:ident $(via $family:ident)?)? $(starts $start:ident)? $(fortran $fortran:tt)? ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*); )*) => {
        /// Fills what the table says how to build; true when a filled function makes requests
        /// of cudampi's own.
        #[allow(unused_variables, unused_mut)]
        pub fn fill(real: &mut Real) -> bool {
            let mut own = false;
            $(
                fill_one!(real, own, $name [$($base $(via $family)?)?] [$($start)?] ($($arg : $ty),*));
                fill_one!(real, own, $pname [$($pbase $(via $family)?)?] [$($start)?] ($($arg : $ty),*));
            )*
            own
        }
    };
}

crate::mpi_functions!(define_fill);

/// Sets both names of a function the library lacks to `f`.
macro_rules! by_hand {
    ($real:ident, $own:ident, $name:ident, $pname:ident => $f:path) => {
        if $real.$name.is_none() {
            $real.$name = Some($f);
            $own = true;
        }
        if $real.$pname.is_none() {
            $real.$pname = Some($f);
            $own = true;
        }
    };
}

/// Fills the functions that have no twin to build on; true when one makes requests of its own.
pub fn by_hand(real: &mut Real) -> bool {
    let mut own = false;
    by_hand!(real, own, MPI_Isendrecv, PMPI_Isendrecv => super::sendrecv::isendrecv);
    by_hand!(real, own, MPI_Isendrecv_replace, PMPI_Isendrecv_replace => super::sendrecv::isendrecv_replace);
    by_hand!(real, own, MPI_Psend_init, PMPI_Psend_init => super::persistent::psend_init);
    by_hand!(real, own, MPI_Precv_init, PMPI_Precv_init => super::persistent::precv_init);
    by_hand!(real, own, MPI_Pready, PMPI_Pready => super::persistent::pready);
    by_hand!(real, own, MPI_Pready_range, PMPI_Pready_range => super::persistent::pready_range);
    by_hand!(real, own, MPI_Pready_list, PMPI_Pready_list => super::persistent::pready_list);
    by_hand!(real, own, MPI_Parrived, PMPI_Parrived => super::persistent::parrived);
    // These make no requests: they only look at the program's.
    let mut looks = false;
    by_hand!(real, looks, MPI_Request_get_status_any, PMPI_Request_get_status_any => super::status::any);
    by_hand!(real, looks, MPI_Request_get_status_all, PMPI_Request_get_status_all => super::status::all);
    by_hand!(real, looks, MPI_Request_get_status_some, PMPI_Request_get_status_some => super::status::some);
    by_hand!(real, looks, MPI_Info_get_string, PMPI_Info_get_string => super::info::get_string);
    let _ = looks;
    own
}
