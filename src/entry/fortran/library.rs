//! What a Fortran call means in the loaded library: its handle conversions, its sentinel
//! objects, its `LOGICAL` true, and the array descriptors of MPICH's `mpi_f08`.
//!
//! Everything is looked up, never defined here: a sentinel that cudampi defined would become the
//! one the program binds to, and the library's own comparisons would fail.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

use crate::mpi::abi::{self, Family, Handle};

fn symbol(name: &CStr) -> usize {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT finds the definition the program
    // binds to (the executable's copy of a common block or COPY-relocated object).
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

type F2c = unsafe extern "C" fn(c_int) -> Handle;
type C2f = unsafe extern "C" fn(Handle) -> c_int;

/// The library's `MPI_X_f2c`/`MPI_X_c2f` functions. MPICH 4 has none but for files (the others
/// are macros: its C handles are the Fortran integers; ROMIO's `MPI_File` is a pointer, turned
/// into an integer by `MPI_File_f2c`), so a missing one is the identity.
struct Conversions {
    f2c: [Option<F2c>; 9],
    c2f: [Option<C2f>; 9],
}

/// The handle kinds, in the order of their `HandleKind::SLOT`.
const KINDS: [&str; 9] = ["Comm", "Type", "Op", "Info", "Request", "Message", "Win", "File", "Group"];

/// `PMPI_Kind_way` or else `MPI_Kind_way` (`way`: f2c or c2f).
fn conversion<F>(kind: &str, way: &str) -> Option<F> {
    let f = ["PMPI_", "MPI_"].into_iter().find_map(|prefix| {
        let name = std::ffi::CString::new(format!("{prefix}{kind}_{way}")).ok()?;
        Some(symbol(&name)).filter(|&f| f != 0)
    })?;
    // SAFETY: the library's conversion function, of the standard signature.
    Some(unsafe { std::mem::transmute_copy::<usize, F>(&f) })
}

fn conversions() -> &'static Conversions {
    static C: OnceLock<Conversions> = OnceLock::new();
    C.get_or_init(|| Conversions { f2c: KINDS.map(|k| conversion(k, "f2c")), c2f: KINDS.map(|k| conversion(k, "c2f")) })
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

macro_rules! handle_kinds {
    ($($kind:ident = $slot:literal),*) => {
        $(
            pub struct $kind;
            impl HandleKind for $kind {
                const SLOT: usize = $slot;
            }
        )*
    };
}

// The slots of `KINDS`.
handle_kinds!(Comm = 0, Datatype = 1, Op = 2, Info = 3, Request = 4, Message = 5, Win = 6, File = 7, Group = 8);

/// Whether an array of Fortran handles of kind `K` can be handed to C as it is.
pub fn handles_are_fints<K: HandleKind>() -> bool {
    abi::get().request_size == 4 && conversions().f2c[K::SLOT].is_none()
}

/// One Fortran sentinel: the objects each binding passes for it, and the library's C pointer
/// variables that hold its address once the binding has initialised them (MPICH sets them at
/// its first Fortran call).
pub struct Sentinel {
    objects: [usize; 6],
    pointers: [usize; 2],
}

impl Sentinel {
    /// `common`: Open MPI's common block, looked up as each compiler spells it; `f08`: MPICH's
    /// `mpi_f08` object; `mpich_common`: the MPICH block and offset of the `mpif.h` object;
    /// `pointers`: the variables MPICH's binding fills with the object's address.
    fn new(common: &str, f08: &CStr, mpich_common: (&CStr, usize), pointers: &[&CStr]) -> Sentinel {
        let spellings = [format!("{common}_"), common.to_string(), format!("{common}__"), common.to_uppercase()];
        let mut o = [0; 6];
        for (slot, name) in o.iter_mut().zip(spellings) {
            *slot = std::ffi::CString::new(name).map_or(0, |n| symbol(&n));
        }
        o[4] = symbol(f08);
        let block = symbol(mpich_common.0);
        o[5] = if block == 0 { 0 } else { block + mpich_common.1 };
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
        in_place: Sentinel::new("mpi_fortran_in_place", c"MPIR_F08_MPI_IN_PLACE", (c"mpipriv1_", 4), &[c"MPIR_F_MPI_IN_PLACE"]),
        bottom: Sentinel::new("mpi_fortran_bottom", c"MPIR_F08_MPI_BOTTOM", (c"mpipriv1_", 0), &[c"MPIR_F_MPI_BOTTOM"]),
        status_ignore: Sentinel::new(
            "mpi_fortran_status_ignore",
            c"MPIR_F08_MPI_STATUS_IGNORE_OBJ",
            (c"mpipriv1_", 8),
            &[c"MPI_F_STATUS_IGNORE", c"MPI_F08_STATUS_IGNORE"],
        ),
        statuses_ignore: Sentinel::new(
            "mpi_fortran_statuses_ignore",
            c"MPIR_F08_MPI_STATUSES_IGNORE_OBJ",
            (c"mpipriv2_", 0),
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
