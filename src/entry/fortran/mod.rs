//! The Fortran entry points of `mpif.h`, `use mpi` and `use mpi_f08`, expanded from the table.
//!
//! Every table function marked `fortran(stem, STEM)` is exported under the names compilers and
//! libraries use: `mpi_stem_`, `mpi_stem__`, `mpi_stem` and `MPI_STEM` (`mpif.h` and `use mpi`,
//! whatever the compiler's underscore convention), `mpi_stem_f08_` (Open MPI's `mpi_f08`, and
//! MPICH's `mpi_f08` routines without a buffer), `mpi_stem_f08ts_` for `ts` functions (MPICH's
//! `mpi_f08` routines with buffers, which receive array descriptors), and the profiling twins
//! `pmpi_stem_`, `pmpi_stem__`, `pmpi_stem`, `PMPI_STEM`, `pmpi_stem_f08_`, `pmpir_stem_f08ts_`.
//!
//! A call whose buffers are all host memory, or one without buffers made while cudampi tracks
//! no request, goes untouched to the library's routine of the same name: the program sees the
//! library's own binding, at the cost of a few comparisons. Every other call, and every call
//! that returns request indices (`Waitany`, `Testsome`, ...), is served here: its arguments are
//! converted as the library's binding converts them (`args.rs`, `library.rs`), cudampi's C
//! entry point runs it, and `ierror` gets its result. So device buffers are staged
//! however the library's Fortran layer reaches C, even through calls no C interposer sees.

mod args;
mod library;

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

#[allow(unused_imports)] // named by the table's signatures
use crate::mpi::abi::{Handle, Offset};

pub use args::{Arg, Ctx, Gate, TypeArrays};
pub use library::{Descriptor, Plain, View};

/// What a body returns when the library's routine ran and set `ierror` itself.
pub const FORWARDED: c_int = c_int::MIN;

/// One exported name and the library's routine of the same name after cudampi.
pub struct Entry {
    /// NUL-terminated.
    name: &'static str,
    next: AtomicUsize,
}

const UNRESOLVED: usize = 0;
const ABSENT: usize = 1;

impl Entry {
    pub const fn new(name: &'static str) -> Entry {
        Entry { name, next: AtomicUsize::new(UNRESOLVED) }
    }

    pub fn name(&self) -> &'static str {
        &self.name[..self.name.len() - 1]
    }

    /// The library's routine; `ours` is this entry point, never handed back.
    ///
    /// # Safety
    /// `F` must be the routine's function pointer type.
    pub unsafe fn next<F: Copy>(&self, ours: usize) -> Option<F> {
        let mut f = self.next.load(Relaxed);
        if f == UNRESOLVED {
            crate::mpi::loader::make_mpi_global();
            // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT searches the objects after this one.
            let found = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr().cast()) } as usize;
            f = if found == 0 || found == ours { ABSENT } else { found };
            self.next.store(f, Relaxed);
        }
        // SAFETY: a function address, reinterpreted as the caller's pointer type of the same size.
        (f != ABSENT).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&f) })
    }
}

/// A call cudampi serves itself.
#[cold]
pub fn served(entry: &Entry) {
    crate::base::stats::FORTRAN_CALLS.fetch_add(1, Relaxed);
    if crate::base::config::get().debug {
        crate::base::log::debug(format_args!("{}: served by cudampi", entry.name()));
    }
}

/// A call cudampi cannot serve and the library has no routine for.
#[cold]
pub fn refuse(entry: &Entry) -> c_int {
    crate::base::log::error(format_args!(
        "{}: a non-contiguous array section of device memory, and the MPI library has no such routine to describe it",
        entry.name()
    ));
    crate::mpi::abi::get().err_buffer
}

/// The converter of one argument, chosen by its name in the table.
macro_rules! kind {
    (buf, $t:ty, $v:ident) => { args::Buf<$v> };
    (sendbuf, $t:ty, $v:ident) => { args::Buf<$v> };
    (recvbuf, $t:ty, $v:ident) => { args::Buf<$v> };
    (buffer, $t:ty, $v:ident) => { args::Buf<$v> };
    (inbuf, $t:ty, $v:ident) => { args::Buf<$v> };
    (inoutbuf, $t:ty, $v:ident) => { args::Buf<$v> };
    (outbuf, $t:ty, $v:ident) => { args::Buf<$v> };
    (origin_addr, $t:ty, $v:ident) => { args::Buf<$v> };
    (result_addr, $t:ty, $v:ident) => { args::Buf<$v> };
    (compare_addr, $t:ty, $v:ident) => { args::Buf<$v> };
    (base, $t:ty, $v:ident) => { args::Buf<$v> };
    (location, $t:ty, $v:ident) => { args::Buf<$v> };
    (comm, $t:ty, $v:ident) => { args::In<library::Comm> };
    (datatype, $t:ty, $v:ident) => { args::In<library::Datatype> };
    (sendtype, $t:ty, $v:ident) => { args::In<library::Datatype> };
    (recvtype, $t:ty, $v:ident) => { args::In<library::Datatype> };
    (origin_datatype, $t:ty, $v:ident) => { args::In<library::Datatype> };
    (result_datatype, $t:ty, $v:ident) => { args::In<library::Datatype> };
    (target_datatype, $t:ty, $v:ident) => { args::In<library::Datatype> };
    (fh, $t:ty, $v:ident) => { args::In<library::File> };
    (group, $t:ty, $v:ident) => { args::In<library::Group> };
    // MPI_Win_create writes a window and MPI_Win_free updates one; the others read it.
    (win, $t:ty, $v:ident) => { <$t as args::Passed<library::Win>>::Arg };
    (win_keyval, $t:ty, $v:ident) => { args::Keyval };
    (disp_unit, $t:ty, $v:ident) => { args::DispUnit<$t> };
    (attribute_val, $t:ty, $v:ident) => { args::Attribute };
    (op, $t:ty, $v:ident) => { args::In<library::Op> };
    (info, $t:ty, $v:ident) => { args::In<library::Info> };
    (req, $t:ty, $v:ident) => { args::In<library::Request> };
    (request, $t:ty, $v:ident) => { args::InOut<library::Request> };
    (message, $t:ty, $v:ident) => { args::InOut<library::Message> };
    (requests, $t:ty, $v:ident) => { args::Requests };
    (sendtypes, $t:ty, $v:ident) => { args::Types<true> };
    (recvtypes, $t:ty, $v:ident) => { args::Types<false> };
    (status, $t:ty, $v:ident) => { args::Status };
    (statuses, $t:ty, $v:ident) => { args::Statuses };
    (flag, $t:ty, $v:ident) => { args::Flag };
    (index, $t:ty, $v:ident) => { args::Index };
    (indices, $t:ty, $v:ident) => { args::Indices };
    (outcount, $t:ty, $v:ident) => { args::Outcount };
    (count, $t:ty, $v:ident) => { args::Count<$t> };
    (incount, $t:ty, $v:ident) => { args::Count<$t> };
    (sendcounts, $t:ty, $v:ident) => { args::Array };
    (recvcounts, $t:ty, $v:ident) => { args::Array };
    (displs, $t:ty, $v:ident) => { args::Array };
    (sdispls, $t:ty, $v:ident) => { args::Array };
    (rdispls, $t:ty, $v:ident) => { args::Array };
    (array_of_partitions, $t:ty, $v:ident) => { args::Array };
    // An INTEGER the call reads and updates is the C `int*` itself.
    (position, $t:ty, $v:ident) => { args::Array };
    // And the INTEGER(KIND=MPI_ADDRESS_KIND) the call writes is the C `MPI_Aint*`.
    (address, $t:ty, $v:ident) => { args::Array };
    // Also the INTEGER(KIND=MPI_ADDRESS_KIND) displacements and sizes and the
    // INTEGER(KIND=MPI_OFFSET_KIND) offsets, by reference as every INTEGER.
    ($other:ident, $t:ty, $v:ident) => { args::Val<$t> };
}

/// The table's `all` and `neighbor`.
macro_rules! type_arrays {
    (all) => { TypeArrays::All };
    (neighbor) => { TypeArrays::Neighbor };
}

/// `*mut c_void`, once per argument.
macro_rules! raw {
    ($arg:ident) => { *mut c_void };
}

/// One exported name: `$c` is the C entry point that serves converted calls.
macro_rules! fortran_export {
    ($f:ident, $view:ident, $c:ident, $pre:literal, $stem:ident, $suf:literal, ($($arg:ident),*)) => {
        #[export_name = concat!($pre, stringify!($stem), $suf)]
        #[allow(unused_unsafe)]
        pub unsafe extern "C" fn $f($($arg: *mut c_void,)* ierr: *mut c_int) {
            static ENTRY: Entry = Entry::new(concat!($pre, stringify!($stem), $suf, "\0"));
            let ours = $f as *const () as usize;
            let rc = crate::mpi::ffi::guard(concat!($pre, stringify!($stem), $suf), || {
                // SAFETY: the caller's Fortran arguments, all passed by reference.
                unsafe { body::<$view>(&ENTRY, ours, crate::entry::export::$c, $($arg,)* ierr) }
            });
            if rc != FORWARDED && !ierr.is_null() {
                // SAFETY: a non-null ierror argument.
                unsafe { *ierr = rc };
            }
        }
    };
}

macro_rules! fortran_entry {
    ([] $($rest:tt)*) => {};
    ([($stem:ident, $STEM:ident $(, $ts:ident $(, $types:ident)?)?)] $name:ident $pname:ident ($($arg:ident : $ty:ty),*)) => {
        const _: () = {
            use std::ffi::{c_int, c_void};
            use $crate::entry::fortran::{args, Arg, Ctx, Entry, Gate, View, FORWARDED};
            #[allow(unused_imports)]
            use $crate::entry::fortran::TypeArrays;
            #[allow(unused_imports)]
            use $crate::entry::fortran::{Descriptor, Plain};

            #[inline(always)]
            #[allow(unused_mut, unused_variables)]
            unsafe fn body<V: View>(
                entry: &'static Entry,
                ours: usize,
                c: unsafe extern "C" fn($($ty),*) -> c_int,
                $($arg: *mut c_void,)*
                ierr: *mut c_int,
            ) -> c_int {
                let mut gate = Gate::default();
                // SAFETY (this block): the arguments are the caller's, by reference, as the
                // binding declares them.
                unsafe {
                    $( <kind!($arg, $ty, V) as Arg<V>>::gate($arg, &mut gate); )*
                    if !gate.serve() {
                        if let Some(f) = entry.next::<unsafe extern "C" fn($(raw!($arg),)* *mut c_int)>(ours) {
                            f($($arg,)* ierr);
                            return FORWARDED;
                        }
                        if gate.veto {
                            return $crate::entry::fortran::refuse(entry);
                        }
                    }
                    $crate::entry::fortran::served(entry);
                    let mut ctx = Ctx::default();
                    $($( ctx.type_arrays = type_arrays!($types); )?)?
                    $( <kind!($arg, $ty, V) as Arg<V>>::prepare($arg, &mut ctx); )*
                    $( let mut $arg = <kind!($arg, $ty, V) as Arg<V>>::take($arg, &mut ctx); )*
                    if let Some(rc) = ctx.failed {
                        return rc;
                    }
                    // A collective NCCL may run reaches the agreement (`engine`) on every rank:
                    // served, through the C entry point here; forwarded (host buffers, an array
                    // section only the library can describe), through the library's routine,
                    // which calls the C function (`MPI_` or `PMPI_`) that cudampi exports, with a
                    // datatype of its own for a section.
                    let rc = c($( Arg::<V>::c(&mut $arg) as $ty ),*);
                    $( Arg::<V>::after($arg, rc, &mut ctx); )*
                    rc
                }
            }

            fortran_export!(f1, Plain, $name, "mpi_", $stem, "_", ($($arg),*));
            fortran_export!(f2, Plain, $name, "mpi_", $stem, "__", ($($arg),*));
            fortran_export!(f3, Plain, $name, "mpi_", $stem, "", ($($arg),*));
            fortran_export!(f4, Plain, $name, "MPI_", $STEM, "", ($($arg),*));
            fortran_export!(f5, Plain, $name, "mpi_", $stem, "_f08_", ($($arg),*));
            fortran_export!(p1, Plain, $pname, "pmpi_", $stem, "_", ($($arg),*));
            fortran_export!(p2, Plain, $pname, "pmpi_", $stem, "__", ($($arg),*));
            fortran_export!(p3, Plain, $pname, "pmpi_", $stem, "", ($($arg),*));
            fortran_export!(p4, Plain, $pname, "PMPI_", $STEM, "", ($($arg),*));
            fortran_export!(p5, Plain, $pname, "pmpi_", $stem, "_f08_", ($($arg),*));
            fortran_ts!([$($ts)?] $name $pname $stem ($($arg),*));
        };
    };
}

/// MPICH's `mpi_f08` names of a function with buffers.
macro_rules! fortran_ts {
    ([] $($rest:tt)*) => {};
    ([ts] $name:ident $pname:ident $stem:ident ($($arg:ident),*)) => {
        fortran_export!(t1, Descriptor, $name, "mpi_", $stem, "_f08ts_", ($($arg),*));
        fortran_export!(t2, Descriptor, $pname, "pmpir_", $stem, "_f08ts_", ($($arg),*));
    };
}

macro_rules! define_fortran {
    ($( $name:ident, $pname:ident $(or $base:ident, $pbase:ident $(via $family:ident)?)? $(starts $start:ident)? $(fortran $fortran:tt)? ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*); )*) => {
        $( fortran_entry!([$($fortran)?] $name $pname ($($arg : $ty),*)); )*
    };
}

crate::mpi_functions!(define_fortran);
