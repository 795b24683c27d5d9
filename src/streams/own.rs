//! cudampi's own entry points, through which the enqueue calls make their operations, so that a
//! message meets the peer's cudampi whatever path either side takes (a device message sent over
//! CUDA IPC arrives as an envelope only cudampi's receive understands).

use std::ffi::{c_int, c_void};

use crate::mpi::abi::{self, Handle};
use crate::mpi::real::{self, Own};

pub type Send = unsafe extern "C" fn(*const c_void, c_int, Handle, c_int, c_int, Handle) -> c_int;
pub type Recv = unsafe extern "C" fn(*mut c_void, c_int, Handle, c_int, c_int, Handle, *mut c_void) -> c_int;
pub type Isend = unsafe extern "C" fn(*const c_void, c_int, Handle, c_int, c_int, Handle, *mut c_void) -> c_int;
pub type Irecv = unsafe extern "C" fn(*mut c_void, c_int, Handle, c_int, c_int, Handle, *mut c_void) -> c_int;
pub type Test = unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_void) -> c_int;
pub type Waitall = unsafe extern "C" fn(c_int, *mut c_void, *mut c_void) -> c_int;
pub type Allreduce = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Handle, Handle, Handle) -> c_int;
pub type Iallreduce = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Handle, Handle, Handle, *mut c_void) -> c_int;

/// The entry point `pick` chooses, as a function of type `F`; `Err` is `MPI_ERR_INTERN` before
/// the entry points were handed down.
///
/// # Safety
/// `F` is the C signature of the entry point `pick` names (the table's).
pub unsafe fn entry<F: Copy>(pick: fn(&Own) -> usize) -> Result<F, c_int> {
    let addr = real::own().map(pick).ok_or(abi::get().err_intern)?;
    // SAFETY: as the caller promises; F is a function pointer type of a word's size.
    Ok(unsafe { std::mem::transmute_copy::<usize, F>(&addr) })
}
