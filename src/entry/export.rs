//! The C entry points, expanded from the table in `table.rs`.
//!
//! Every entry point runs its handler inside [`crate::mpi::ffi::guard`], so nothing unwinds into C.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_int, c_void};

use crate::handlers::collectives::{plan, Blocks, Ints, Mode};
use crate::handlers::packing::{Pos, Rep};
use crate::mpi::abi::{Handle, Offset};

macro_rules! export_one {
    ($name:ident ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*)) => {
        #[no_mangle]
        #[allow(unused_variables, unused_unsafe)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            crate::mpi::ffi::guard(stringify!($name), || {
                let real = crate::mpi::real::get().$name;
                crate::handlers::$handler(stringify!($name), $($harg,)* |$($cp),*| match real {
                    // SAFETY: the real function, called with the caller's arguments except those the
                    // handler substituted (closure parameters of the same names).
                    Some(f) => unsafe { f($($arg),*) },
                    None => crate::mpi::real::missing(stringify!($name)),
                })
            })
        }
    };
}

macro_rules! define_exports {
    ($( $name:ident, $pname:ident $(or $base:ident, $pbase:ident $(via $family:ident)?)? $(starts $start:ident)? $(fortran $fortran:tt)? ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*); )*) => {
        $(
            export_one!($name ($($arg : $ty),*) => $handler [$($cp),*] ($($harg),*));
            export_one!($pname ($($arg : $ty),*) => $handler [$($cp),*] ($($harg),*));
        )*

        /// The addresses of the entry points above, which the MPI layer's lookups must skip.
        pub fn own() -> crate::mpi::real::Own {
            crate::mpi::real::Own {
                $(
                    $name: $name as *const () as usize,
                    $pname: $pname as *const () as usize,
                )*
            }
        }
    };
}

crate::mpi_functions!(define_exports);
