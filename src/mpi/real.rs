//! The real MPI functions: the table's entries resolved with `dlsym(RTLD_NEXT, ...)`, so a
//! PMPI tool or the MPI library after cudampi in the search order receives the call, and the
//! shim's own helper calls, which go straight to the library's `PMPI_` layer.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use crate::mpi::abi::{Handle, Offset};
use crate::mpi::loader::{self, make_mpi_global, next};

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

        /// The addresses of cudampi's own definitions of the table's functions, which a lookup
        /// must never return: the entry point would call itself.
        #[allow(non_snake_case)]
        pub struct Own {
            $(
                pub $name: usize,
                pub $pname: usize,
            )*
        }

        fn resolve() -> Real {
            make_mpi_global();
            let own = OWN.get();
            let mut real = Real {
                $(
                    // SAFETY: a non-null result is the library's function of this C signature.
                    $name: unsafe { std::mem::transmute::<usize, Option<unsafe extern "C" fn($($ty),*) -> c_int>>(
                        next(concat!(stringify!($name), "\0"), own.map_or(0, |o| o.$name))) },
                    // SAFETY: as above.
                    $pname: unsafe { std::mem::transmute::<usize, Option<unsafe extern "C" fn($($ty),*) -> c_int>>(
                        next(concat!(stringify!($pname), "\0"), own.map_or(0, |o| o.$pname))) },
                )*
            };
            if let Some(c) = COMPLETE.get() {
                (c.0)(&mut real);
            }
            real
        }
    };
}

crate::mpi_functions!(define_real);

/// What the layers above hand down at start-up, before the first lookup: cudampi's own entry
/// points, which a lookup must never return, and what completes the tables where the library
/// lacks functions (`compat`, which builds them from these very tables).
pub struct Start {
    pub own: Own,
    pub complete: fn(&mut Real),
    pub complete_pmpi: fn(&mut Pmpi),
}

/// Takes what the layers above hand down; the first call counts.
pub fn start(s: Start) {
    loader::start(s.own.PMPI_Init);
    let _ = OWN.set(s.own);
    let _ = COMPLETE.set((s.complete, s.complete_pmpi));
}

static OWN: OnceLock<Own> = OnceLock::new();

/// cudampi's own entry points, for a layer that serves a call by making another through them
/// (`streams`, on a shared GPU).
pub fn own() -> Option<&'static Own> {
    OWN.get()
}

static COMPLETE: OnceLock<(fn(&mut Real), fn(&mut Pmpi))> = OnceLock::new();

static REAL: OnceLock<Real> = OnceLock::new();

/// The table once resolved, without resolving it: for checks that make no call.
#[inline(always)]
pub fn ready() -> Option<&'static Real> {
    REAL.get()
}

#[inline]
pub fn get() -> &'static Real {
    REAL.get_or_init(resolve)
}

/// The library's function `name` (ending in NUL), for a call cudampi makes for itself to a
/// function some builds lack; 0 where the library has none.
pub fn lookup(name: &str) -> usize {
    make_mpi_global();
    next(name, 0)
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
            if let Some(c) = COMPLETE.get() {
                (c.1)(&mut p);
            }
            Some(p)
        }
    };
}

define_pmpi! {
    type_size_x = "PMPI_Type_size_x": fn(Handle, *mut i64);
    type_get_extent_x = "PMPI_Type_get_extent_x": fn(Handle, *mut i64, *mut i64);
    type_get_true_extent_x = "PMPI_Type_get_true_extent_x": fn(Handle, *mut i64, *mut i64);
    type_get_envelope = "PMPI_Type_get_envelope": fn(Handle, *mut c_int, *mut c_int, *mut c_int, *mut c_int);
    type_get_contents = "PMPI_Type_get_contents": fn(Handle, c_int, c_int, c_int, *mut c_int, *mut i64, *mut c_void);
    type_free = "PMPI_Type_free": fn(*mut Handle);
    get_elements_x = "PMPI_Get_elements_x": fn(*const c_void, Handle, *mut i64);
    comm_call_errhandler = "PMPI_Comm_call_errhandler": fn(Handle, c_int);
    win_call_errhandler = "PMPI_Win_call_errhandler": fn(Handle, c_int);
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
    allreduce = "PMPI_Allreduce": fn(*const c_void, *mut c_void, c_int, Handle, Handle, Handle);
    bcast = "PMPI_Bcast": fn(*mut c_void, c_int, Handle, c_int, Handle);
    comm_create_keyval = "PMPI_Comm_create_keyval": fn(CommCopyAttr, CommDeleteAttr, *mut c_int, *mut c_void);
    comm_set_attr = "PMPI_Comm_set_attr": fn(Handle, c_int, *mut c_void);
    comm_get_attr = "PMPI_Comm_get_attr": fn(Handle, c_int, *mut c_void, *mut c_int);
    type_get_name = "PMPI_Type_get_name": fn(Handle, *mut c_char, *mut c_int);
    comm_dup = "PMPI_Comm_dup": fn(Handle, *mut Handle);
    comm_free = "PMPI_Comm_free": fn(*mut Handle);
    comm_set_errhandler = "PMPI_Comm_set_errhandler": fn(Handle, Handle);
    comm_group = "PMPI_Comm_group": fn(Handle, *mut Handle);
    comm_remote_group = "PMPI_Comm_remote_group": fn(Handle, *mut Handle);
    group_translate_ranks = "PMPI_Group_translate_ranks": fn(Handle, c_int, *const c_int, Handle, *mut c_int);
    group_free = "PMPI_Group_free": fn(*mut Handle);
    group_size = "PMPI_Group_size": fn(Handle, *mut c_int);
    reduce_local = "PMPI_Reduce_local": fn(*const c_void, *mut c_void, c_int, Handle, Handle);
    isend = "PMPI_Isend": fn(*const c_void, c_int, Handle, c_int, c_int, Handle, *mut Handle);
    irecv = "PMPI_Irecv": fn(*mut c_void, c_int, Handle, c_int, c_int, Handle, *mut Handle);
    recv_init = "PMPI_Recv_init": fn(*mut c_void, c_int, Handle, c_int, c_int, Handle, *mut Handle);
    testany = "PMPI_Testany": fn(c_int, *mut c_void, *mut c_int, *mut c_int, *mut c_void);
    testsome = "PMPI_Testsome": fn(c_int, *mut c_void, *mut c_int, *mut c_int, *mut c_void);
    cancel = "PMPI_Cancel": fn(*mut c_void);
    barrier = "PMPI_Barrier": fn(Handle);
    abort = "PMPI_Abort": fn(Handle, c_int);
    status_set_elements_x = "PMPI_Status_set_elements_x": fn(*mut c_void, Handle, i64);
    status_set_cancelled = "PMPI_Status_set_cancelled": fn(*mut c_void, c_int);
    send = "PMPI_Send": fn(*const c_void, c_int, Handle, c_int, c_int, Handle);
    recv = "PMPI_Recv": fn(*mut c_void, c_int, Handle, c_int, c_int, Handle, *mut c_void);
    mprobe = "PMPI_Mprobe": fn(c_int, c_int, Handle, *mut c_void, *mut c_void);
    iprobe = "PMPI_Iprobe": fn(c_int, c_int, Handle, *mut c_int, *mut c_void);
    improbe = "PMPI_Improbe": fn(c_int, c_int, Handle, *mut c_int, *mut c_void, *mut c_void);
    mrecv = "PMPI_Mrecv": fn(*mut c_void, c_int, Handle, *mut c_void, *mut c_void);
    grequest_start = "PMPI_Grequest_start": fn(GrequestQuery, GrequestFree, GrequestCancel, *mut c_void, *mut c_void);
    grequest_complete = "PMPI_Grequest_complete": fn(Handle);
    query_thread = "PMPI_Query_thread": fn(*mut c_int);
    pack_size = "PMPI_Pack_size": fn(c_int, Handle, Handle, *mut c_int);
    pack = "PMPI_Pack": fn(*const c_void, c_int, Handle, *mut c_void, c_int, *mut c_int, Handle);
    info_get_valuelen = "PMPI_Info_get_valuelen": fn(Handle, *const c_char, *mut c_int, *mut c_int);
    info_get = "PMPI_Info_get": fn(Handle, *const c_char, c_int, *mut c_char, *mut c_int);
    info_set = "PMPI_Info_set": fn(Handle, *const c_char, *const c_char);
    info_dup = "PMPI_Info_dup": fn(Handle, *mut Handle);
    info_free = "PMPI_Info_free": fn(*mut Handle);
    win_create = "PMPI_Win_create": fn(*mut c_void, isize, c_int, Handle, Handle, *mut Handle);
    win_free = "PMPI_Win_free": fn(*mut Handle);
    win_lock_all = "PMPI_Win_lock_all": fn(c_int, Handle);
    win_unlock_all = "PMPI_Win_unlock_all": fn(Handle);
    win_flush = "PMPI_Win_flush": fn(c_int, Handle);
    win_set_errhandler = "PMPI_Win_set_errhandler": fn(Handle, Handle);
    put = "PMPI_Put": fn(*const c_void, c_int, Handle, c_int, isize, c_int, Handle, Handle);
    get = "PMPI_Get": fn(*mut c_void, c_int, Handle, c_int, isize, c_int, Handle, Handle);
    fetch_and_op = "PMPI_Fetch_and_op": fn(*const c_void, *mut c_void, Handle, c_int, isize, Handle, Handle);
}

/// `MPI_Comm_copy_attr_function` and `MPI_Comm_delete_attr_function`.
pub type CommCopyAttr = unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
pub type CommDeleteAttr = unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void) -> c_int;

/// `MPI_Grequest_query_function`, `MPI_Grequest_free_function`, `MPI_Grequest_cancel_function`.
pub type GrequestQuery = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
pub type GrequestFree = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type GrequestCancel = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

static PMPI: OnceLock<Option<Pmpi>> = OnceLock::new();

/// The thread level the library provides (`MPI_Query_thread`); `None` where it cannot say.
pub fn thread_level() -> Option<c_int> {
    let p = pmpi()?;
    let mut provided: c_int = 0;
    // SAFETY: a valid out-pointer.
    (unsafe { (p.query_thread)(&mut provided) } == 0).then_some(provided)
}

/// Whether the program's threads may call MPI at once (`MPI_THREAD_MULTIPLE` provided); `None`
/// where the library cannot say.
pub fn calls_overlap() -> Option<bool> {
    thread_level().map(|l| l >= crate::mpi::abi::get().thread_multiple)
}

/// The helper functions; `None` only if the process has no MPI library at all.
pub fn pmpi() -> Option<&'static Pmpi> {
    PMPI.get_or_init(resolve_pmpi).as_ref()
}
