//! The real MPI functions: the table's entries resolved with `dlsym(RTLD_NEXT, ...)`, so a
//! PMPI tool or the MPI library after cudampi in the search order receives the call, and the
//! shim's own helper calls, which go straight to the library's `PMPI_` layer.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use crate::mpi::abi::Handle;

/// Makes the MPI library visible to `RTLD_NEXT` and `RTLD_DEFAULT` lookups when it was loaded
/// without `RTLD_GLOBAL`, as a Python extension module loads its libmpi: the loaded objects are
/// searched once for the one defining `PMPI_Init`, which is then opened again with
/// `RTLD_GLOBAL`. Called before any real function or family symbol is looked up.
pub fn make_mpi_global() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: dlsym with a NUL-terminated name.
        if !unsafe { libc::dlsym(libc::RTLD_NEXT, c"PMPI_Init".as_ptr()) }.is_null() {
            return;
        }
        let ours = crate::entry::export::PMPI_Init as *const () as usize;
        for name in loaded_objects() {
            // SAFETY: RTLD_NOLOAD only returns objects already loaded; dladdr reads loader data.
            unsafe {
                let h = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
                if h.is_null() {
                    continue;
                }
                let f = libc::dlsym(h, c"PMPI_Init".as_ptr());
                let mut info: libc::Dl_info = std::mem::zeroed();
                let found = !f.is_null() && f as usize != ours && libc::dladdr(f, &mut info) != 0 && !info.dli_fname.is_null();
                if found {
                    // Kept open: the library was loaded anyway, and now stays in the global scope.
                    libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL);
                }
                if found && crate::base::config::get().debug {
                    crate::base::log::debug(format_args!(
                        "the MPI library {} was loaded locally; made it global",
                        std::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy()
                    ));
                }
                libc::dlclose(h);
                if found {
                    return;
                }
            }
        }
    });
}

/// The file names of the loaded shared objects, collected first: dlopen must not run inside
/// `dl_iterate_phdr`, which holds the loader's lock.
fn loaded_objects() -> Vec<std::ffi::CString> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: libc::size_t, out: *mut c_void) -> c_int {
        // SAFETY: glibc passes a valid info; out is the Vec below.
        let name = unsafe { (*info).dlpi_name };
        if !name.is_null() && unsafe { *name } != 0 {
            let out = unsafe { &mut *out.cast::<Vec<std::ffi::CString>>() };
            out.push(unsafe { std::ffi::CStr::from_ptr(name) }.to_owned());
        }
        0
    }
    let mut out: Vec<std::ffi::CString> = Vec::new();
    // SAFETY: the callback only reads the headers and appends to `out`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut out as *mut Vec<std::ffi::CString>).cast()) };
    out
}

/// `name` ends in NUL.
fn next(name: &str, ours: usize) -> usize {
    debug_assert!(name.ends_with('\0'));
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT searches the objects after this one.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    // Never hand back our own entry point: that would recurse forever.
    if f == ours { 0 } else { f }
}

macro_rules! define_real {
    ($( $name:ident, $pname:ident $(or $base:ident, $pbase:ident $(via $family:ident)?)? $(starts $start:ident)? $(fortran $fortran:tt)? ( $($arg:ident : $ty:ty),* ) => $handler:ident [$($cp:ident),*] ($($harg:expr),*); )*) => {
        /// Real entry points named in the table; `None` where the loaded MPI lacks the function and
        /// `compat` cannot build it.
        #[allow(non_snake_case)]
        pub struct Real {
            $(
                pub $name: Option<unsafe extern "C" fn($($ty),*) -> c_int>,
                pub $pname: Option<unsafe extern "C" fn($($ty),*) -> c_int>,
            )*
        }

        fn resolve() -> Real {
            make_mpi_global();
            let mut real = Real {
                $(
                    // SAFETY: a non-null result is the library's function of this C signature.
                    $name: unsafe { std::mem::transmute::<usize, Option<unsafe extern "C" fn($($ty),*) -> c_int>>(
                        next(concat!(stringify!($name), "\0"), crate::entry::export::$name as *const () as usize)) },
                    // SAFETY: as above.
                    $pname: unsafe { std::mem::transmute::<usize, Option<unsafe extern "C" fn($($ty),*) -> c_int>>(
                        next(concat!(stringify!($pname), "\0"), crate::entry::export::$pname as *const () as usize)) },
                )*
            };
            crate::compat::install(&mut real);
            real
        }
    };
}

crate::mpi_functions!(define_real);

static REAL: OnceLock<Real> = OnceLock::new();

#[inline]
pub fn get() -> &'static Real {
    REAL.get_or_init(resolve)
}

/// What an entry point returns when the MPI below lacks the function (an MPI-4 call on an
/// MPI-3 library, say).
#[cold]
pub fn missing(name: &str) -> c_int {
    crate::base::log::error(format_args!("{name} is not provided by the loaded MPI library"));
    crate::mpi::abi::get().err_other
}

macro_rules! define_pmpi {
    ($( $field:ident = $sym:literal : fn($($ty:ty),*); )*) => {
        /// The library's `PMPI_` functions the shim calls for itself (never seen by tools).
        pub struct Pmpi {
            $( pub $field: unsafe extern "C" fn($($ty),*) -> c_int, )*
        }

        fn resolve_pmpi() -> Option<Pmpi> {
            make_mpi_global();
            let mut p = Pmpi {
                $(
                    // SAFETY: a non-null result is the library's function of this C signature.
                    $field: unsafe {
                        let f = libc::dlsym(libc::RTLD_NEXT, concat!($sym, "\0").as_ptr().cast());
                        if f.is_null() { return None; }
                        std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> c_int>(f)
                    },
                )*
            };
            crate::compat::install_pmpi(&mut p);
            Some(p)
        }
    };
}

define_pmpi! {
    type_size_x = "PMPI_Type_size_x": fn(Handle, *mut i64);
    type_get_extent_x = "PMPI_Type_get_extent_x": fn(Handle, *mut i64, *mut i64);
    type_get_true_extent_x = "PMPI_Type_get_true_extent_x": fn(Handle, *mut i64, *mut i64);
    type_get_envelope = "PMPI_Type_get_envelope": fn(Handle, *mut c_int, *mut c_int, *mut c_int, *mut c_int);
    get_elements_x = "PMPI_Get_elements_x": fn(*const c_void, Handle, *mut i64);
    comm_call_errhandler = "PMPI_Comm_call_errhandler": fn(Handle, c_int);
    comm_rank = "PMPI_Comm_rank": fn(Handle, *mut c_int);
    test = "PMPI_Test": fn(*mut c_void, *mut c_int, *mut c_void);
    wait = "PMPI_Wait": fn(*mut c_void, *mut c_void);
    request_free = "PMPI_Request_free": fn(*mut c_void);
    startall = "PMPI_Startall": fn(c_int, *mut c_void);
    request_get_status = "PMPI_Request_get_status": fn(Handle, *mut c_int, *mut c_void);
    test_cancelled = "PMPI_Test_cancelled": fn(*const c_void, *mut c_int);
    error_class = "PMPI_Error_class": fn(c_int, *mut c_int);
    comm_size = "PMPI_Comm_size": fn(Handle, *mut c_int);
    unpack = "PMPI_Unpack": fn(*const c_void, c_int, *mut c_int, *mut c_void, c_int, Handle, Handle);
    comm_test_inter = "PMPI_Comm_test_inter": fn(Handle, *mut c_int);
    comm_remote_size = "PMPI_Comm_remote_size": fn(Handle, *mut c_int);
    topo_test = "PMPI_Topo_test": fn(Handle, *mut c_int);
    cartdim_get = "PMPI_Cartdim_get": fn(Handle, *mut c_int);
    graph_neighbors_count = "PMPI_Graph_neighbors_count": fn(Handle, c_int, *mut c_int);
    dist_graph_neighbors_count = "PMPI_Dist_graph_neighbors_count": fn(Handle, *mut c_int, *mut c_int, *mut c_int);
    allgather = "PMPI_Allgather": fn(*const c_void, c_int, Handle, *mut c_void, c_int, Handle, Handle);
    comm_dup = "PMPI_Comm_dup": fn(Handle, *mut Handle);
    comm_group = "PMPI_Comm_group": fn(Handle, *mut Handle);
    comm_remote_group = "PMPI_Comm_remote_group": fn(Handle, *mut Handle);
    group_translate_ranks = "PMPI_Group_translate_ranks": fn(Handle, c_int, *const c_int, Handle, *mut c_int);
    group_free = "PMPI_Group_free": fn(*mut Handle);
    isend = "PMPI_Isend": fn(*const c_void, c_int, Handle, c_int, c_int, Handle, *mut Handle);
    irecv = "PMPI_Irecv": fn(*mut c_void, c_int, Handle, c_int, c_int, Handle, *mut Handle);
    cancel = "PMPI_Cancel": fn(*mut c_void);
    barrier = "PMPI_Barrier": fn(Handle);
    status_set_elements_x = "PMPI_Status_set_elements_x": fn(*mut c_void, Handle, i64);
    status_set_cancelled = "PMPI_Status_set_cancelled": fn(*mut c_void, c_int);
    send = "PMPI_Send": fn(*const c_void, c_int, Handle, c_int, c_int, Handle);
    mprobe = "PMPI_Mprobe": fn(c_int, c_int, Handle, *mut c_void, *mut c_void);
    mrecv = "PMPI_Mrecv": fn(*mut c_void, c_int, Handle, *mut c_void, *mut c_void);
    grequest_start = "PMPI_Grequest_start": fn(GrequestQuery, GrequestFree, GrequestCancel, *mut c_void, *mut c_void);
    grequest_complete = "PMPI_Grequest_complete": fn(Handle);
    query_thread = "PMPI_Query_thread": fn(*mut c_int);
    pack_size = "PMPI_Pack_size": fn(c_int, Handle, Handle, *mut c_int);
    pack = "PMPI_Pack": fn(*const c_void, c_int, Handle, *mut c_void, c_int, *mut c_int, Handle);
}

/// `MPI_Grequest_query_function`, `MPI_Grequest_free_function`, `MPI_Grequest_cancel_function`.
pub type GrequestQuery = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
pub type GrequestFree = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type GrequestCancel = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

static PMPI: OnceLock<Option<Pmpi>> = OnceLock::new();

/// The helper functions; `None` only if the process has no MPI library at all.
pub fn pmpi() -> Option<&'static Pmpi> {
    PMPI.get_or_init(resolve_pmpi).as_ref()
}
