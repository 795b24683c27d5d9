//! Named shared-memory segments that the ranks of a node map together (`shm_open` + `mmap`):
//! the IPC claim slots (`fastpath::claims`) and the agreement boards (`engine::board`).

use std::ffi::{c_int, c_void, CStr};

/// Makes the segment `name` of `bytes` (zero-filled) and maps it; `None` when it cannot. A
/// segment of that name left by an earlier process that died before unlinking it is replaced.
pub fn create(name: &CStr, bytes: usize) -> Option<*mut c_void> {
    for _ in 0..2 {
        // SAFETY: a NUL-terminated name.
        let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC, 0o600) };
        if fd < 0 {
            unlink(name);
            continue;
        }
        // SAFETY: a descriptor just opened; fresh pages read as zero.
        if unsafe { libc::ftruncate(fd, bytes as libc::off_t) } != 0 {
            // SAFETY: as above.
            unsafe { libc::close(fd) };
            unlink(name);
            return None;
        }
        return map(fd, bytes);
    }
    None
}

/// Maps the segment `name` of `bytes` that another process made.
pub fn open(name: &CStr, bytes: usize) -> Option<*mut c_void> {
    // SAFETY: a NUL-terminated name.
    let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
    (fd >= 0).then(|| map(fd, bytes)).flatten()
}

/// Removes the name; the mappings stay until unmapped.
pub fn unlink(name: &CStr) {
    // SAFETY: a NUL-terminated name.
    unsafe { libc::shm_unlink(name.as_ptr()) };
}

/// Unmaps a mapping `create` or `open` made of `bytes`.
pub fn unmap(at: *mut c_void, bytes: usize) {
    // SAFETY: the caller's mapping, no longer used.
    unsafe { libc::munmap(at, bytes) };
}

fn map(fd: c_int, bytes: usize) -> Option<*mut c_void> {
    // SAFETY: a shared-memory object of `bytes`; the descriptor is closed, the mapping stays.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    // SAFETY: fd is ours to close.
    unsafe { libc::close(fd) };
    (p != libc::MAP_FAILED).then_some(p)
}
