//! The one table of what NCCL carries: which MPI datatypes it reduces, as which NCCL type, and
//! which MPI operations it has. Anything not here (user operations, `MPI_MINLOC`, logical and
//! bitwise operations, `MPI_SHORT`, `MPI_LONG_DOUBLE`, pair types) stays on the staged path.
//! Data movement needs no entry: any datatype without gaps moves as bytes.
//!
//! Datatypes are recognised by the name MPI gives every predefined one (`MPI_Type_get_name`,
//! the same in every family) and their size, operations by their handles, which differ per
//! family. Answers are remembered per handle: a predefined handle never names another type.

use std::ffi::{c_char, c_int};
use std::sync::{Mutex, OnceLock};

use crate::cuda::nccl::{DataType, RedOp};
use crate::mpi::abi::{self, Family, Handle};
use crate::mpi::real;

/// The kind of number an MPI name stands for; the NCCL type follows from it and the size.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Number {
    Signed,
    Unsigned,
    Float,
}

/// Predefined MPI datatypes NCCL can reduce, by the name MPI gives them.
const NUMBERS: &[(&str, Number)] = &[
    ("MPI_SIGNED_CHAR", Number::Signed),
    ("MPI_INT8_T", Number::Signed),
    ("MPI_INT", Number::Signed),
    ("MPI_INT32_T", Number::Signed),
    ("MPI_LONG", Number::Signed),
    ("MPI_LONG_LONG", Number::Signed),
    ("MPI_LONG_LONG_INT", Number::Signed),
    ("MPI_INT64_T", Number::Signed),
    ("MPI_AINT", Number::Signed),
    ("MPI_OFFSET", Number::Signed),
    ("MPI_COUNT", Number::Signed),
    ("MPI_INTEGER", Number::Signed),
    ("MPI_INTEGER1", Number::Signed),
    ("MPI_INTEGER4", Number::Signed),
    ("MPI_INTEGER8", Number::Signed),
    ("MPI_UNSIGNED_CHAR", Number::Unsigned),
    ("MPI_UINT8_T", Number::Unsigned),
    ("MPI_UNSIGNED", Number::Unsigned),
    ("MPI_UINT32_T", Number::Unsigned),
    ("MPI_UNSIGNED_LONG", Number::Unsigned),
    ("MPI_UNSIGNED_LONG_LONG", Number::Unsigned),
    ("MPI_UINT64_T", Number::Unsigned),
    ("MPI_FLOAT", Number::Float),
    ("MPI_DOUBLE", Number::Float),
    ("MPI_REAL", Number::Float),
    ("MPI_REAL4", Number::Float),
    ("MPI_REAL8", Number::Float),
    ("MPI_DOUBLE_PRECISION", Number::Float),
];

fn nccl_type(number: Number, size: i64) -> Option<DataType> {
    Some(match (number, size) {
        (Number::Signed, 1) => DataType::ncclInt8,
        (Number::Signed, 4) => DataType::ncclInt32,
        (Number::Signed, 8) => DataType::ncclInt64,
        (Number::Unsigned, 1) => DataType::ncclUint8,
        (Number::Unsigned, 4) => DataType::ncclUint32,
        (Number::Unsigned, 8) => DataType::ncclUint64,
        (Number::Float, 4) => DataType::ncclFloat32,
        (Number::Float, 8) => DataType::ncclFloat64,
        _ => return None,
    })
}

/// Answers remembered per predefined handle (few programs reduce more than a handful of types).
static SEEN: Mutex<Vec<(Handle, Option<DataType>)>> = Mutex::new(Vec::new());

thread_local! {
    /// The last answer this thread got, so that a loop over one datatype takes no lock.
    static LAST: std::cell::Cell<(Handle, Option<DataType>)> = const { std::cell::Cell::new((0, None)) };
}

/// The NCCL type that reduces `datatype`, if it is a predefined type NCCL has.
pub fn reducible(datatype: Handle) -> Option<DataType> {
    let (h, t) = LAST.get();
    if h == datatype && h != 0 {
        return t;
    }
    let (t, named) = asked(datatype);
    if named {
        LAST.set((datatype, t));
    }
    t
}

/// [`reducible`]'s answer, and whether the datatype is predefined (only those are remembered:
/// a derived handle may be freed and reused for another type).
fn asked(datatype: Handle) -> (Option<DataType>, bool) {
    let seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, t)) = seen.iter().find(|(h, _)| *h == datatype) {
        return (t, true);
    }
    drop(seen);
    let Some(info) = crate::mpi::datatype::query(datatype).ok().filter(|i| i.named) else { return (None, false) };
    let t = name_of(datatype).and_then(|name| NUMBERS.iter().find(|(n, _)| *n == name)).and_then(|&(_, number)| nccl_type(number, info.size));
    SEEN.lock().unwrap_or_else(|e| e.into_inner()).push((datatype, t));
    (t, true)
}

fn name_of(datatype: Handle) -> Option<String> {
    let p = real::pmpi()?;
    // MPI_MAX_OBJECT_NAME is 64 in MPICH and Open MPI alike, 128 in the standard ABI.
    let mut buf = [0 as c_char; 256];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds more than MPI_MAX_OBJECT_NAME characters; valid out-pointers.
    if unsafe { (p.type_get_name)(datatype, buf.as_mut_ptr(), &mut len) } != 0 {
        return None;
    }
    // SAFETY: MPI wrote a NUL-terminated name into the buffer.
    Some(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

/// The handles of `MPI_SUM`, `MPI_PROD`, `MPI_MAX`, `MPI_MIN` in the loaded family, and of the
/// pair the agreement reduces with (`MPI_LONG_LONG`, `MPI_MAX`).
struct Handles {
    ops: [(Handle, RedOp); 4],
    long_long: Handle,
    max: Handle,
}

fn handles() -> &'static Handles {
    static H: OnceLock<Handles> = OnceLock::new();
    H.get_or_init(|| {
        let (sum, prod, max, min, long_long) = match abi::get().family {
            Family::OpenMpi => {
                let sym = |name: &std::ffi::CStr| {
                    // SAFETY: dlsym with a NUL-terminated name; Open MPI's predefined handles are
                    // the addresses of its exported objects.
                    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as Handle }
                };
                (sym(c"ompi_mpi_op_sum"), sym(c"ompi_mpi_op_prod"), sym(c"ompi_mpi_op_max"), sym(c"ompi_mpi_op_min"), sym(c"ompi_mpi_long_long_int"))
            }
            // mpi.h of MPICH 4 and 5.
            Family::Mpich => (0x5800_0003, 0x5800_0004, 0x5800_0001, 0x5800_0002, 0x4c00_0809),
            // mpi_abi.h of the MPI-5 standard ABI.
            Family::StandardAbi => (0x21, 0x24, 0x23, 0x22, 0x20b),
        };
        Handles { ops: [(sum, RedOp::ncclSum), (prod, RedOp::ncclProd), (max, RedOp::ncclMax), (min, RedOp::ncclMin)], long_long, max }
    })
}

/// The NCCL operation for an MPI one, if NCCL has it.
pub fn operation(op: Handle) -> Option<RedOp> {
    let abi = abi::get();
    handles().ops.iter().find(|(h, _)| *h != 0 && abi.same(*h, op)).map(|&(_, r)| r)
}

/// `MPI_LONG_LONG` and `MPI_SUM`, which origins reserve space in a served window's mailbox
/// with.
pub fn long_long_and_sum() -> (Handle, Handle) {
    let h = handles();
    (h.long_long, h.ops[0].0)
}

/// `MPI_LONG_LONG` and `MPI_MAX`, which the agreement reduces its flags with.
pub fn agreement_type_and_op() -> (Handle, Handle) {
    let h = handles();
    (h.long_long, h.max)
}
