//! Which MPI family is loaded, and the handful of its constants the shim needs.
//!
//! One binary serves Open MPI (handles are pointers to exported globals), the MPICH family
//! (handles are `int`) and the MPI-5 standard ABI (`libmpi_abi.so`: pointer-sized handles whose
//! predefined values are small constants). Handles travel through the shim as opaque machine
//! words ([`Handle`]); they are only compared here, masked to the family's width.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

/// An MPI handle as it sits in a register or stack slot: an `int` (MPICH) or a pointer.
pub type Handle = usize;

/// An `MPI_Offset` argument (a file position): 64 bits in every family. A type of its own so
/// that serving a large-count file call by its int-count twin (`compat/narrow.rs`) narrows the
/// count and leaves the offset whole.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offset(pub i64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    OpenMpi,
    Mpich,
    StandardAbi,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::OpenMpi => "Open MPI",
            Family::Mpich => "MPICH family",
            Family::StandardAbi => "MPI-5 standard ABI",
        }
    }
}

/// The constants of one family. Error classes are the values `MPI_Error_class` returns.
#[derive(Debug)]
pub struct Abi {
    pub family: Family,
    handle_mask: usize,
    pub status_ignore: usize,
    pub status_size: usize,
    /// Byte offset of `MPI_ERROR` in `MPI_Status`.
    pub status_error_offset: usize,
    pub proc_null: c_int,
    pub any_source: c_int,
    pub any_tag: c_int,
    pub combiner_named: c_int,
    pub byte: Handle,
    pub packed: Handle,
    pub datatype_null: Handle,
    pub comm_self: Handle,
    pub comm_world: Handle,
    pub err_buffer: c_int,
    pub err_type: c_int,
    pub errors_return: Handle,
    pub info_env: Handle,
    pub info_null: Handle,
    pub err_count: c_int,
    pub err_other: c_int,
    pub err_intern: c_int,
    pub err_no_mem: c_int,
    pub err_in_status: c_int,
    pub err_truncate: c_int,
    pub err_request: c_int,
    pub err_arg: c_int,
    pub err_pending: c_int,
    pub request_null: Handle,
    pub message_null: Handle,
    /// What a matched probe of `MPI_PROC_NULL` returns: receiving it transfers nothing.
    pub message_no_proc: Handle,
    /// Bytes of one handle in an array: 4 for MPICH's `int` handles.
    pub request_size: usize,
    pub statuses_ignore: usize,
    pub in_place: usize,
    pub root: c_int,
    /// `MPI_Topo_test` answers.
    pub topo_cart: c_int,
    pub topo_graph: c_int,
    pub topo_dist_graph: c_int,
    /// `MPI_THREAD_MULTIPLE`.
    pub thread_multiple: c_int,
    /// One-sided communication: the `MPI_WIN_BASE` and `MPI_WIN_MODEL` attribute keys, the
    /// `MPI_WIN_SEPARATE` model, the `MPI_MODE_NOSTORE` assertion, `MPI_ERR_RMA_ATTACH`.
    pub win_base: c_int,
    pub win_model: c_int,
    pub win_separate: c_int,
    pub mode_nostore: c_int,
    pub err_rma_attach: c_int,
    /// Windows whose device memory peers map (`handlers::mapped`): the `MPI_WIN_SIZE` key, the
    /// `MPI_WIN_UNIFIED` model, the `MPI_MODE_NOCHECK`, `MPI_MODE_NOPRECEDE` and
    /// `MPI_MODE_NOSUCCEED` assertions, `MPI_LOCK_EXCLUSIVE`, `MPI_ERR_RMA_RANGE`, and the
    /// `MPI_REPLACE` and `MPI_NO_OP` operations.
    pub win_size: c_int,
    pub win_unified: c_int,
    pub mode_nocheck: c_int,
    pub mode_noprecede: c_int,
    pub mode_nosucceed: c_int,
    pub lock_exclusive: c_int,
    pub err_rma_range: c_int,
    pub op_replace: Handle,
    pub op_no_op: Handle,
}

/// `MPI_UNDEFINED`, the same in every family.
pub const UNDEFINED: c_int = -32766;

/// Large enough for every family's `MPI_Status` (Open MPI 24 B, MPICH 20 B, standard ABI 32 B).
pub const STATUS_BYTES: usize = 32;

#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct Status(pub [u8; STATUS_BYTES]);

impl Status {
    pub const fn zeroed() -> Status {
        Status([0; STATUS_BYTES])
    }
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
}

static ABI: OnceLock<Abi> = OnceLock::new();

/// The loaded family's constants; detected on first use (always after the MPI library is loaded,
/// since only MPI entry points reach this).
pub fn get() -> &'static Abi {
    ABI.get_or_init(detect)
}

fn symbol(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

fn detect() -> Abi {
    crate::mpi::loader::make_mpi_global();
    let ompi_world = symbol(c"ompi_mpi_comm_world");
    if !ompi_world.is_null() {
        return Abi {
            family: Family::OpenMpi,
            handle_mask: usize::MAX,
            status_ignore: 0,
            status_size: 24,
            status_error_offset: 8,
            proc_null: -2,
            any_source: -1,
            any_tag: -1,
            combiner_named: 0,
            byte: symbol(c"ompi_mpi_byte") as Handle,
            packed: symbol(c"ompi_mpi_packed") as Handle,
            datatype_null: symbol(c"ompi_mpi_datatype_null") as Handle,
            comm_self: symbol(c"ompi_mpi_comm_self") as Handle,
            comm_world: ompi_world as Handle,
            err_buffer: 1,
            err_type: 3,
            errors_return: symbol(c"ompi_mpi_errors_return") as Handle,
            info_env: symbol(c"ompi_mpi_info_env") as Handle,
            info_null: symbol(c"ompi_mpi_info_null") as Handle,
            err_count: 2,
            err_other: 16,
            err_intern: 17,
            err_no_mem: 39,
            err_in_status: 18,
            err_truncate: 15,
            err_request: 7,
            err_arg: 13,
            err_pending: 19,
            request_null: symbol(c"ompi_request_null") as Handle,
            message_null: symbol(c"ompi_message_null") as Handle,
            message_no_proc: symbol(c"ompi_message_no_proc") as Handle,
            request_size: 8,
            statuses_ignore: 0,
            in_place: 1,
            root: -4,
            topo_cart: 1,
            topo_graph: 2,
            topo_dist_graph: 3,
            thread_multiple: 3,
            win_base: 7,
            win_model: 11,
            win_separate: 1,
            mode_nostore: 8,
            err_rma_attach: 69,
            win_size: 8,
            win_unified: 0,
            mode_nocheck: 1,
            mode_noprecede: 2,
            mode_nosucceed: 16,
            lock_exclusive: 1,
            err_rma_range: 68,
            op_replace: symbol(c"ompi_mpi_op_replace") as Handle,
            op_no_op: symbol(c"ompi_mpi_op_no_op") as Handle,
        };
    }
    if abi_version_major() >= 1 {
        return Abi {
            family: Family::StandardAbi,
            handle_mask: usize::MAX,
            status_ignore: 0,
            status_size: 32,
            status_error_offset: 8,
            proc_null: -3,
            any_source: -1,
            any_tag: -2,
            combiner_named: 101,
            byte: 0x247,
            packed: 0x207,
            datatype_null: 0x200,
            comm_self: 0x102,
            comm_world: 0x101,
            err_buffer: 1,
            err_type: 3,
            errors_return: 0x143,
            info_env: 0x131,
            info_null: 0x130,
            err_count: 2,
            err_other: 16,
            err_intern: 17,
            err_no_mem: 39,
            err_in_status: 19,
            err_truncate: 15,
            err_request: 7,
            err_arg: 13,
            err_pending: 18,
            request_null: 0x180,
            message_null: 0x128,
            message_no_proc: 0x129,
            request_size: 8,
            statuses_ignore: 0,
            in_place: 1,
            root: -4,
            topo_cart: 211,
            topo_graph: 212,
            topo_dist_graph: 213,
            thread_multiple: 4096,
            win_base: 601,
            win_model: 605,
            win_separate: 322,
            mode_nostore: 8192,
            err_rma_attach: 46,
            win_size: 603,
            win_unified: 321,
            mode_nocheck: 1024,
            mode_noprecede: 2048,
            mode_nosucceed: 16384,
            lock_exclusive: 301,
            err_rma_range: 48,
            op_replace: 0x3c,
            op_no_op: 0x3d,
        };
    }
    Abi {
        family: Family::Mpich,
        handle_mask: 0xffff_ffff,
        status_ignore: 1,
        status_size: 20,
        status_error_offset: 16,
        proc_null: -1,
        any_source: -2,
        any_tag: -1,
        combiner_named: 1,
        byte: 0x4c00_010d,
        packed: 0x4c00_010f,
        datatype_null: 0x0c00_0000,
        comm_self: 0x4400_0001,
        comm_world: 0x4400_0000,
        err_buffer: 1,
        err_type: 3,
        errors_return: 0x5400_0001,
        info_env: 0x5c00_0001,
        info_null: 0x1c00_0000,
        err_count: 2,
        err_other: 15,
        err_intern: 16,
        err_no_mem: 34,
        err_in_status: 17,
        err_truncate: 14,
        err_request: 19,
        err_arg: 12,
        err_pending: 18,
        request_null: 0x2c00_0000,
        message_null: 0x2c00_0000,
        message_no_proc: 0x6c00_0000,
        request_size: 4,
        statuses_ignore: 1,
        in_place: usize::MAX,
        root: -3,
        topo_cart: 2,
        topo_graph: 1,
        topo_dist_graph: 3,
        thread_multiple: 3,
        win_base: 0x6600_0001,
        win_model: 0x6600_0009,
        win_separate: 1,
        mode_nostore: 2048,
        err_rma_attach: 56,
        win_size: 0x6600_0003,
        win_unified: 2,
        mode_nocheck: 1024,
        mode_noprecede: 8192,
        mode_nosucceed: 16384,
        lock_exclusive: 234,
        err_rma_range: 55,
        op_replace: 0x5800_000d,
        op_no_op: 0x5800_000e,
    }
}

/// `MPI_Abi_get_version` exists in MPICH 5's libmpi.so too, where it answers -1; only the
/// standard-ABI library answers a real version.
fn abi_version_major() -> c_int {
    let f = symbol(c"PMPI_Abi_get_version");
    if f.is_null() {
        return -1;
    }
    // SAFETY: the MPI-5 signature `int MPI_Abi_get_version(int *major, int *minor)`; callable
    // before MPI_Init.
    let f: unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int = unsafe { std::mem::transmute(f) };
    let (mut major, mut minor) = (-1, -1);
    // SAFETY: both out-pointers are valid.
    if unsafe { f(&mut major, &mut minor) } != 0 {
        return -1;
    }
    major
}

impl Abi {
    pub fn same(&self, a: Handle, b: Handle) -> bool {
        (a & self.handle_mask) == (b & self.handle_mask)
    }
    pub fn is_status_ignore(&self, s: *mut c_void) -> bool {
        s as usize == self.status_ignore
    }
    pub fn is_statuses_ignore(&self, s: *mut c_void) -> bool {
        s as usize == self.statuses_ignore
    }
    /// A handle with the bits the family does not use cleared, for use as a key.
    pub fn key(&self, h: Handle) -> Handle {
        h & self.handle_mask
    }

    pub fn is_in_place(&self, p: *const c_void) -> bool {
        p as usize == self.in_place
    }

    /// Element `i` of an array of handles (`MPI_Request`, `MPI_Datatype`: all handles of a
    /// family have one width).
    ///
    /// # Safety
    /// `reqs` points to at least `i + 1` requests.
    pub unsafe fn request_at(&self, reqs: *const c_void, i: usize) -> Handle {
        // SAFETY: per the caller; arrays of `int` or of pointers.
        unsafe {
            if self.request_size == 4 {
                reqs.cast::<u32>().add(i).read_unaligned() as Handle
            } else {
                reqs.cast::<usize>().add(i).read_unaligned()
            }
        }
    }

    /// Stores `MPI_REQUEST_NULL` in element `i` of an `MPI_Request` array.
    ///
    /// # Safety
    /// `reqs` points to at least `i + 1` writable requests.
    pub unsafe fn set_request_null(&self, reqs: *mut c_void, i: usize) {
        // SAFETY: per the caller.
        unsafe {
            if self.request_size == 4 {
                reqs.cast::<u32>().add(i).write_unaligned(self.request_null as u32)
            } else {
                reqs.cast::<usize>().add(i).write_unaligned(self.request_null)
            }
        }
    }

    /// Sets the `MPI_SOURCE` and `MPI_TAG` fields of a status. With `MPI_ERROR` they are three
    /// consecutive `int`s in every family (at 0 in Open MPI and the standard ABI, after the
    /// count words in MPICH).
    ///
    /// # Safety
    /// `status` points to a full, writable status.
    pub unsafe fn set_status_source_tag(&self, status: *mut c_void, source: c_int, tag: c_int) {
        let at = self.status_error_offset - 8;
        // SAFETY: per the caller.
        unsafe {
            let p = status.cast::<u8>().add(at).cast::<c_int>();
            p.write_unaligned(source);
            p.add(1).write_unaligned(tag);
        }
    }

    /// The `MPI_SOURCE` and `MPI_TAG` fields of a status.
    ///
    /// # Safety
    /// `status` points to a full status.
    pub unsafe fn status_source_tag(&self, status: *const c_void) -> (c_int, c_int) {
        let at = self.status_error_offset - 8;
        // SAFETY: per the caller.
        unsafe {
            let p = status.cast::<u8>().add(at).cast::<c_int>();
            (p.read_unaligned(), p.add(1).read_unaligned())
        }
    }

    /// Reads a handle stored at `at` (an `MPI_Message` out-argument, say).
    ///
    /// # Safety
    /// `at` points to one handle of the family's width.
    pub unsafe fn handle_at(&self, at: *const c_void) -> Handle {
        // SAFETY: per the caller.
        unsafe { self.request_at(at, 0) }
    }

    /// Stores `h` at `at`, in the family's handle width.
    ///
    /// # Safety
    /// `at` points to one writable handle.
    pub unsafe fn set_handle(&self, at: *mut c_void, h: Handle) {
        // SAFETY: per the caller.
        unsafe {
            if self.request_size == 4 {
                at.cast::<u32>().write_unaligned(h as u32)
            } else {
                at.cast::<usize>().write_unaligned(h)
            }
        }
    }

    /// Sets the `MPI_ERROR` field of a status.
    ///
    /// # Safety
    /// `status` points to a full, writable status.
    pub unsafe fn set_status_error(&self, status: *mut c_void, error: c_int) {
        // SAFETY: per the caller.
        unsafe { status.cast::<u8>().add(self.status_error_offset).cast::<c_int>().write_unaligned(error) }
    }

    /// The bytes a status says arrived, read from the family's own fields: Open MPI's
    /// `_ucount` (a `size_t` after the four `int`s), MPICH's `count_lo` and
    /// `count_hi_and_cancelled` (the cancelled flag in its lowest bit), both counting bytes.
    /// `None` for the standard ABI, whose remaining fields belong to the library.
    ///
    /// # Safety
    /// `status` points to a full status.
    #[inline]
    pub unsafe fn status_bytes(&self, status: *const c_void) -> Option<usize> {
        let at = status.cast::<u8>();
        // SAFETY: per the caller; both layouts lie within the family's status size.
        unsafe {
            match self.family {
                Family::OpenMpi => Some(at.add(16).cast::<usize>().read_unaligned()),
                Family::Mpich => {
                    let lo = at.cast::<u32>().read_unaligned() as usize;
                    let hi = (at.add(4).cast::<u32>().read_unaligned() >> 1) as usize;
                    Some(lo | hi << 32)
                }
                Family::StandardAbi => None,
            }
        }
    }

    /// The `MPI_ERROR` field of a status.
    ///
    /// # Safety
    /// `status` points to a full status.
    pub unsafe fn status_error(&self, status: *const c_void) -> c_int {
        // SAFETY: per the caller.
        unsafe { status.cast::<u8>().add(self.status_error_offset).cast::<c_int>().read_unaligned() }
    }
}
