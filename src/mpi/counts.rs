//! Array arguments of counts and displacements (`MPI_..._v` collectives), `int` or wide
//! (`MPI_Count`, `MPI_Aint`) as the large-count forms pass them.

use std::ffi::c_int;

/// An array argument of counts or displacements: `int` or wide (`MPI_Count`, `MPI_Aint`).
#[derive(Clone, Copy)]
pub enum Ints {
    Int(*const c_int),
    Wide(*const i64),
}

impl Ints {
    /// # Safety
    /// The array holds at least `i + 1` elements.
    pub unsafe fn at(self, i: usize) -> i64 {
        // SAFETY: per the caller.
        unsafe {
            match self {
                Ints::Int(p) => p.add(i).read_unaligned() as i64,
                Ints::Wide(p) => p.add(i).read_unaligned(),
            }
        }
    }

    pub fn is_null(self) -> bool {
        match self {
            Ints::Int(p) => p.is_null(),
            Ints::Wide(p) => p.is_null(),
        }
    }
}
