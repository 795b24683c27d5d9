//! The entry points: the C functions expanded from the table (`export`), the Fortran ones from
//! the same table (`fortran`), and cudampi's own C API (`api`, `include/cudampi.h`).

pub mod api;
pub mod export;
mod fortran;
