//! MPI-4's `MPI_Info_get_string` on a library without it, from `MPI_Info_get_valuelen` and
//! `MPI_Info_get` (MPI-2), which every library has.

use std::ffi::{c_int, c_void};

use crate::mpi::abi::Handle;
use crate::mpi::real;

/// `*buflen` in: the room in `value` (0 asks only for the length); out: the value's length
/// plus one for the NUL. A value longer than the room is cut to `*buflen - 1` characters.
pub unsafe extern "C" fn get_string(info: Handle, key: *const c_void, buflen: *mut c_int, value: *mut c_void, flag: *mut c_int) -> c_int {
    crate::mpi::ffi::guard("MPI_Info_get_string", || {
        let r = real::get();
        let (Some(valuelen), Some(get)) = (r.PMPI_Info_get_valuelen, r.PMPI_Info_get) else {
            return real::missing("MPI_Info_get_string");
        };
        let mut len: c_int = 0;
        // SAFETY: the caller's info, key and flag; a valid out-pointer for the length.
        let rc = unsafe { valuelen(info, key, &mut len, flag) };
        if rc != 0 || flag.is_null() || buflen.is_null() {
            return rc;
        }
        // SAFETY: the caller's out-arguments, checked non-null above.
        unsafe {
            if *flag == 0 {
                return rc;
            }
            let room = *buflen;
            *buflen = len + 1;
            if room <= 0 || value.is_null() {
                return rc;
            }
            // MPI_Info_get writes at most `room - 1` characters and the NUL.
            get(info, key, room - 1, value, flag)
        }
    })
}
