//! What cudampi knows of the MPI library below it: which family is loaded and its constants
//! (`abi`), the one table of the functions cudampi exports (`table`), how the library is found
//! (`loader`) and its functions (`real`), the spans of typed buffers (`datatype`) and
//! their typemaps as strided blocks (`typemap`), what a
//! receive matches (`matching`), what cudampi asks about a communicator (`comm`), the count and
//! displacement arrays of the `v` collectives (`counts`), the errors
//! cudampi raises as the library would (`errors`), and the C boundary no panic crosses (`ffi`).
//! It may use `base`, and `cuda` to name a failed CUDA call in an error. What it must know of
//! the layers above, the addresses of cudampi's own entry points and the functions `compat`
//! builds, is handed down at start-up (`real::start`).

pub mod abi;
pub mod comm;
pub mod counts;
pub mod datatype;
pub mod errors;
pub mod ffi;
pub mod loader;
pub mod matching;
pub mod real;
pub mod table;
pub mod typemap;
