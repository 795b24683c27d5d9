//! The C entry points, expanded from the table in `table.rs`.
//!
//! Every entry point runs its handler inside [`crate::ffi::guard`], so nothing unwinds into C.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_int, c_void};

use crate::abi::Handle;
use crate::collectives::{plan, Blocks, Ints, Mode};

macro_rules! export_one {
    // A large-count function with an int-count BASE: on a library without it, BASE serves the
    // call when the counts fit in an int.
    ($name:ident [$base:ident] ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*)) => {
        export_one!(@entry $name ( $($arg : $ty),* ) => $handler [$($cp),*] ($($harg),*) missing {
            $(
                let Some($arg) = crate::narrow::Narrow::narrow($arg) else {
                    return crate::narrow::too_large(stringify!($name));
                };
            )*
            match crate::real::get().$base {
                // SAFETY: the library's int-count twin, with the same arguments narrowed to its types.
                Some(f) => unsafe { f($($arg),*) },
                None => crate::real::missing(stringify!($name)),
            }
        });
    };
    // A v or w collective: `narrow::FAMILY` narrows its arrays too.
    ($name:ident [$base:ident via $family:ident] ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*)) => {
        export_one!(@entry $name ( $($arg : $ty),* ) => $handler [$($cp),*] ($($harg),*) missing {
            crate::narrow::$family(stringify!($name), crate::real::get().$base, $($arg),*)
        });
    };
    ($name:ident [] ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*)) => {
        export_one!(@entry $name ( $($arg : $ty),* ) => $handler [$($cp),*] ($($harg),*) missing {
            crate::real::missing(stringify!($name))
        });
    };
    (@entry $name:ident ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*) missing $missing:block) => {
        #[no_mangle]
        #[allow(unused_variables, unused_unsafe)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            crate::ffi::guard(stringify!($name), || {
                let real = crate::real::get().$name;
                crate::handlers::$handler(stringify!($name), $($harg,)* |$($cp),*| match real {
                    // SAFETY: the real function, called with the caller's arguments except those the
                    // handler substituted (closure parameters of the same names).
                    Some(f) => unsafe { f($($arg),*) },
                    None => $missing,
                })
            })
        }
    };
}

macro_rules! define_exports {
    ($( $name:ident, $pname:ident $(or $base:ident, $pbase:ident $(via $family:ident)?)? $(fortran $fortran:tt)? ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*); )*) => {
        $(
            export_one!($name [$($base $(via $family)?)?] ($($arg : $ty),*) => $handler [$($cp),*] ($($harg),*));
            export_one!($pname [$($pbase $(via $family)?)?] ($($arg : $ty),*) => $handler [$($cp),*] ($($harg),*));
        )*
    };
}

crate::mpi_functions!(define_exports);
