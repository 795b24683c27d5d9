//! The C entry points, expanded from the table in `table.rs`.
//!
//! Every entry point runs its handler inside [`crate::mpi::ffi::guard`], so nothing unwinds into C.
//! Only `handlers/host.rs` `route` runs outside it: loads and comparisons, which cannot panic.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_int, c_void};

use crate::handlers::collectives::{plan, Blocks, Ints, Job, Mode, PerRank};
use crate::handlers::packing::{Pos, Rep};
use crate::mpi::abi::{Handle, Offset};

macro_rules! export_one {
    // The calls with a host path (`handlers/host.rs`): `route` decides inline, from loads alone,
    // and a call that passes ends in a jump to the library's function; the host path that
    // serves a call and the full handler are out of line, each compact in its own function.
    ($name:ident $sig:tt => send $($rest:tt)*) => { export_one!(@pass $name $sig => send $($rest)*); };
    ($name:ident $sig:tt => isend $($rest:tt)*) => { export_one!(@pass $name $sig => isend $($rest)*); };
    ($name:ident $sig:tt => recv $($rest:tt)*) => { export_one!(@route $name $sig => recv $($rest)*); };
    ($name:ident $sig:tt => irecv $($rest:tt)*) => { export_one!(@route $name $sig => irecv $($rest)*); };
    ($name:ident $sig:tt => wait $($rest:tt)*) => { export_one!(@route $name $sig => wait $($rest)*); };
    ($name:ident $sig:tt => test $($rest:tt)*) => { export_one!(@route $name $sig => test $($rest)*); };
    ($name:ident $sig:tt => waitall $($rest:tt)*) => { export_one!(@route $name $sig => waitall $($rest)*); };
    ($name:ident $sig:tt => ncoll $($rest:tt)*) => { export_one!(@pass $name $sig => ncoll $($rest)*); };
    ($name:ident $sig:tt => ncoll1 $($rest:tt)*) => { export_one!(@pass $name $sig => ncoll1 $($rest)*); };
    (@pass $name:ident ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*)) => {
        #[no_mangle]
        #[allow(unused_variables, unused_unsafe)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            export_one!(@handled $name ($($arg : $ty),*) => $handler [$($cp),*] ($($harg),*));
            if let Some(f) = crate::mpi::real::ready().and_then(|r| r.$name) {
                if let crate::handlers::host::Route::Pass = crate::handlers::host::route::$handler(stringify!($name), $($harg),*) {
                    // SAFETY: the library's function with the caller's arguments.
                    return unsafe { f($($arg),*) };
                }
            }
            // SAFETY: the caller's arguments.
            unsafe { handled($($arg),*) }
        }
    };
    (@route $name:ident ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*)) => {
        #[no_mangle]
        #[allow(unused_variables, unused_unsafe)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            export_one!(@handled $name ($($arg : $ty),*) => $handler [$($cp),*] ($($harg),*));
            #[inline(never)]
            unsafe fn served($($arg: $ty),*) -> c_int {
                crate::mpi::ffi::guard(stringify!($name), || {
                    if let Some(f) = crate::mpi::real::get().$name {
                        // SAFETY: as in the handler's closure.
                        if let Ok(rc) = crate::handlers::host::serve::$handler(stringify!($name), $($harg,)* move |$($cp),*| unsafe { f($($arg),*) }) {
                            return rc;
                        }
                    }
                    // SAFETY: the caller's arguments.
                    unsafe { handled($($arg),*) }
                })
            }
            if let Some(f) = crate::mpi::real::ready().and_then(|r| r.$name) {
                match crate::handlers::host::route::$handler(stringify!($name), $($harg),*) {
                    // SAFETY: the library's function with the caller's arguments.
                    crate::handlers::host::Route::Pass => return unsafe { f($($arg),*) },
                    // SAFETY: the caller's arguments.
                    crate::handlers::host::Route::Serve => return unsafe { served($($arg),*) },
                    crate::handlers::host::Route::Full => (),
                }
            }
            // SAFETY: the caller's arguments.
            unsafe { handled($($arg),*) }
        }
    };
    ($name:ident ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*)) => {
        #[no_mangle]
        #[allow(unused_variables, unused_unsafe)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            export_one!(@body $name ($($arg),*) => $handler [$($cp),*] ($($harg),*))
        }
    };
    // The full handler, out of line, for an entry point whose `route` did not serve the call.
    (@handled $name:ident ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*)) => {
        #[inline(never)]
        unsafe fn handled($($arg: $ty),*) -> c_int {
            export_one!(@body $name ($($arg),*) => $handler [$($cp),*] ($($harg),*))
        }
    };
    (@body $name:ident ( $($arg:ident),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*)) => {
        crate::mpi::ffi::guard(stringify!($name), || {
            let real = crate::mpi::real::get().$name;
            crate::handlers::$handler(stringify!($name), $($harg,)* |$($cp),*| match real {
                // SAFETY: the real function, called with the caller's arguments except those the
                // handler substituted (closure parameters of the same names).
                Some(f) => unsafe { f($($arg),*) },
                None => crate::mpi::real::missing(stringify!($name)),
            })
        })
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
