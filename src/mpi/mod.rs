//! What cudampi knows of the MPI library below it: which family is loaded and its constants
//! (`abi`), the one table of the functions cudampi exports (`table`), the library's own
//! functions (`real`), the spans of typed buffers (`datatype`), the errors cudampi raises as the
//! library would (`errors`), and the C boundary no panic crosses (`ffi`).

pub mod abi;
pub mod datatype;
pub mod errors;
pub mod ffi;
pub mod real;
pub mod table;
