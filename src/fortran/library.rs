//! What a Fortran call means in the loaded library: its handle conversions, its sentinel
//! objects, its `LOGICAL` true, and the array descriptors of MPICH's `mpi_f08`.
//!
//! Everything is looked up, never defined here: a sentinel that cudampi defined would become the
//! one the program binds to, and the library's own comparisons would fail.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

use crate::abi::{self, Family, Handle};

fn symbol(name: &CStr) -> usize {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT finds the definition the program
    // binds to (the executable's copy of a common block or COPY-relocated object).
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

type F2c = unsafe extern "C" fn(c_int) -> Handle;
type C2f = unsafe extern "C" fn(Handle) -> c_int;

/// The library's `MPI_X_f2c`/`MPI_X_c2f` functions. MPICH 4 has none (they are macros: its C
/// handles are the Fortran integers), so a missing one is the identity.
struct Conversions {
    f2c: [Option<F2c>; 6],
    c2f: [Option<C2f>; 6],
}

fn conversion<F>(names: [&CStr; 2]) -> Option<F> {
    let f = names.into_iter().map(symbol).find(|&f| f != 0)?;
    // SAFETY: the library's conversion function, of the standard signature.
    Some(unsafe { std::mem::transmute_copy::<usize, F>(&f) })
}

fn conversions() -> &'static Conversions {
    static C: OnceLock<Conversions> = OnceLock::new();
    C.get_or_init(|| Conversions {
        f2c: [
            conversion([c"PMPI_Comm_f2c", c"MPI_Comm_f2c"]),
            conversion([c"PMPI_Type_f2c", c"MPI_Type_f2c"]),
            conversion([c"PMPI_Op_f2c", c"MPI_Op_f2c"]),
            conversion([c"PMPI_Info_f2c", c"MPI_Info_f2c"]),
            conversion([c"PMPI_Request_f2c", c"MPI_Request_f2c"]),
            conversion([c"PMPI_Message_f2c", c"MPI_Message_f2c"]),
        ],
        c2f: [
            conversion([c"PMPI_Comm_c2f", c"MPI_Comm_c2f"]),
            conversion([c"PMPI_Type_c2f", c"MPI_Type_c2f"]),
            conversion([c"PMPI_Op_c2f", c"MPI_Op_c2f"]),
            conversion([c"PMPI_Info_c2f", c"MPI_Info_c2f"]),
            conversion([c"PMPI_Request_c2f", c"MPI_Request_c2f"]),
            conversion([c"PMPI_Message_c2f", c"MPI_Message_c2f"]),
        ],
    })
}

pub trait HandleKind {
    const SLOT: usize;
    fn f2c(f: c_int) -> Handle {
        match conversions().f2c[Self::SLOT] {
            // SAFETY: the library's function.
            Some(f2c) => unsafe { f2c(f) },
            None => f as u32 as Handle,
        }
    }
    fn c2f(h: Handle) -> c_int {
        match conversions().c2f[Self::SLOT] {
            // SAFETY: the library's function.
            Some(c2f) => unsafe { c2f(h) },
            None => h as u32 as c_int,
        }
    }
}

pub struct Comm;
pub struct Datatype;
pub struct Op;
pub struct Info;
pub struct Request;
pub struct Message;
impl HandleKind for Comm {
    const SLOT: usize = 0;
}
impl HandleKind for Datatype {
    const SLOT: usize = 1;
}
impl HandleKind for Op {
    const SLOT: usize = 2;
}
impl HandleKind for Info {
    const SLOT: usize = 3;
}
impl HandleKind for Request {
    const SLOT: usize = 4;
}
impl HandleKind for Message {
    const SLOT: usize = 5;
}

/// Whether an array of Fortran requests can be handed to C as it is.
pub fn requests_are_fints() -> bool {
    abi::get().request_size == 4 && conversions().f2c[Request::SLOT].is_none()
}

/// One Fortran sentinel: the objects each binding passes for it, and the library's C pointer
/// variables that hold its address once the binding has initialised them (MPICH sets them at
/// its first Fortran call).
pub struct Sentinel {
    objects: [usize; 6],
    pointers: [usize; 2],
}

impl Sentinel {
    fn new(objects: [&CStr; 5], mpich_common: Option<(&CStr, usize)>, pointers: &[&CStr]) -> Sentinel {
        let mut o = [0; 6];
        for (slot, name) in o.iter_mut().zip(objects) {
            *slot = symbol(name);
        }
        if let Some((block, offset)) = mpich_common {
            let b = symbol(block);
            o[5] = if b == 0 { 0 } else { b + offset };
        }
        let mut v = [0; 2];
        for (slot, name) in v.iter_mut().zip(pointers) {
            *slot = symbol(name);
        }
        Sentinel { objects: o, pointers: v }
    }

    pub fn is(&self, p: *const c_void) -> bool {
        let p = p as usize;
        p != 0
            && (self.objects.contains(&p)
                || self.pointers.iter().any(|&v| {
                    // SAFETY: the library's pointer variable, read as a word.
                    v != 0 && unsafe { (v as *const usize).read() } == p
                }))
    }
}

pub struct Sentinels {
    pub in_place: Sentinel,
    pub bottom: Sentinel,
    pub status_ignore: Sentinel,
    pub statuses_ignore: Sentinel,
}

/// Open MPI: the common blocks of `mpif.h`, bound by its `mpi_f08` too, spelled as each
/// compiler mangles them. MPICH: the `mpif.h` common blocks `/MPIPRIV1/ MPI_BOTTOM,
/// MPI_IN_PLACE, MPI_STATUS_IGNORE(...)` and `/MPIPRIV2/ MPI_STATUSES_IGNORE(...)`, the
/// `mpi_f08` objects `MPIR_F08_*`, and the pointers its binding fills.
pub fn sentinels() -> &'static Sentinels {
    static S: OnceLock<Sentinels> = OnceLock::new();
    S.get_or_init(|| Sentinels {
        in_place: Sentinel::new(
            [c"mpi_fortran_in_place_", c"mpi_fortran_in_place", c"mpi_fortran_in_place__", c"MPI_FORTRAN_IN_PLACE", c"MPIR_F08_MPI_IN_PLACE"],
            Some((c"mpipriv1_", 4)),
            &[c"MPIR_F_MPI_IN_PLACE"],
        ),
        bottom: Sentinel::new(
            [c"mpi_fortran_bottom_", c"mpi_fortran_bottom", c"mpi_fortran_bottom__", c"MPI_FORTRAN_BOTTOM", c"MPIR_F08_MPI_BOTTOM"],
            Some((c"mpipriv1_", 0)),
            &[c"MPIR_F_MPI_BOTTOM"],
        ),
        status_ignore: Sentinel::new(
            [
                c"mpi_fortran_status_ignore_",
                c"mpi_fortran_status_ignore",
                c"mpi_fortran_status_ignore__",
                c"MPI_FORTRAN_STATUS_IGNORE",
                c"MPIR_F08_MPI_STATUS_IGNORE_OBJ",
            ],
            Some((c"mpipriv1_", 8)),
            &[c"MPI_F_STATUS_IGNORE", c"MPI_F08_STATUS_IGNORE"],
        ),
        statuses_ignore: Sentinel::new(
            [
                c"mpi_fortran_statuses_ignore_",
                c"mpi_fortran_statuses_ignore",
                c"mpi_fortran_statuses_ignore__",
                c"MPI_FORTRAN_STATUSES_IGNORE",
                c"MPIR_F08_MPI_STATUSES_IGNORE_OBJ",
            ],
            Some((c"mpipriv2_", 0)),
            &[c"MPI_F_STATUSES_IGNORE", c"MPI_F08_STATUSES_IGNORE"],
        ),
    })
}

/// The value of `.TRUE.`: MPICH records the compiler's in `MPIR_F_TRUE`; Open MPI's bindings
/// use 1 with gfortran.
pub fn logical_true() -> c_int {
    static VAR: OnceLock<usize> = OnceLock::new();
    let v = *VAR.get_or_init(|| if abi::get().family == Family::Mpich { symbol(c"MPIR_F_TRUE") } else { 0 });
    // SAFETY: MPICH's int variable.
    let t = if v == 0 { 0 } else { unsafe { (v as *const c_int).read() } };
    if t == 0 {
        1
    } else {
        t
    }
}

/// How a choice buffer arrives.
pub trait View {
    /// The buffer's address, or `None` when only the library can describe it.
    ///
    /// # Safety
    /// `raw` is the caller's buffer argument.
    unsafe fn base(raw: *mut c_void) -> Option<*mut c_void>;
}

/// `mpif.h`, `use mpi`, Open MPI's `mpi_f08`: the address of the first element.
pub struct Plain;

impl View for Plain {
    unsafe fn base(raw: *mut c_void) -> Option<*mut c_void> {
        Some(raw)
    }
}

/// MPICH's `mpi_f08` `_f08ts_` routines: their buffers are assumed-rank dummies of a
/// procedure without `BIND(C)`, so the caller passes gfortran's own array descriptor: base
/// address at 0, element length at 16, version at 24, rank at 28, span at 32, then per
/// dimension {stride in elements, lower bound, upper bound} from 40. Only a contiguous array is
/// used by its base address; anything else goes to the library, which builds a datatype for it.
pub struct Descriptor;

impl View for Descriptor {
    unsafe fn base(raw: *mut c_void) -> Option<*mut c_void> {
        if raw.is_null() {
            return None;
        }
        let d = raw.cast::<u8>();
        // SAFETY: the fields of the descriptor laid out above.
        unsafe {
            let base = d.cast::<*mut c_void>().read_unaligned();
            let elem_len = d.add(16).cast::<i64>().read_unaligned();
            let version = d.add(24).cast::<c_int>().read_unaligned();
            let rank = d.add(28).cast::<i8>().read_unaligned();
            let span = d.add(32).cast::<i64>().read_unaligned();
            if version != 0 || !(-1..=15).contains(&rank) {
                return None;
            }
            // Scalars and assumed-size arrays are contiguous.
            if rank <= 0 {
                return Some(base);
            }
            if span != elem_len {
                return None;
            }
            let mut expected = 1i64;
            for i in 0..rank as usize {
                let dim = d.add(40 + 24 * i).cast::<i64>();
                let (stride, lower, upper) = (dim.read_unaligned(), dim.add(1).read_unaligned(), dim.add(2).read_unaligned());
                let extent = upper - lower + 1;
                if extent <= 0 {
                    return Some(base);
                }
                if extent > 1 && stride != expected {
                    return None;
                }
                expected *= extent;
            }
            Some(base)
        }
    }
}
