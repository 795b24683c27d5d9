//! The message that stands for a device buffer sent over CUDA IPC or in chunks.
//!
//! It travels on the program's own communicator, source and tag, so it is matched exactly where
//! the data would have been: by the receive the program posted, in MPI's order. Its size is
//! fixed, so a receive looks at the content only when that many bytes arrived, or, where the
//! program asks for no status, when the content begins with the job's mark.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bytes of every envelope on the wire: small enough to go eagerly in every MPI, and a whole
/// number of elements of every predefined datatype (1056 = 33 x 32 = 11 x 96), since a receive
/// posted with the program's datatype gets it. MPICH 5.0 asserts (`typerep_yaksa_pack.c`,
/// "amount we unpack is multiple of element_size") when a contiguous receive gets a partial
/// element, where Open MPI and MPICH 4.0 report one; a prime size (1021) aborted it on every
/// typed receive. Element sizes of predefined types are 1, 2, 4, 8, 16 and 32 bytes; pair
/// types (`MPI_DOUBLE_INT`, 12 bytes) are not contiguous and are unpacked without the check.
pub const BYTES: usize = 1056;

const MAGIC: [u8; 16] = *b"cudampi-ipc-v4\0\0";

/// This job's mark, rank 0's random number from the handshake: every envelope carries it, so
/// that bytes of the program's own data, or of another job's, never read as one. A receive
/// whose status the program does not ask for is told apart by its first bytes alone (`marked`).
static JOB: AtomicU64 = AtomicU64::new(0);

pub fn set_job(mark: u64) {
    JOB.store(mark, Relaxed);
}

/// Longest device name a peer can use (`CUDA_VISIBLE_DEVICES` entries are up to 40 bytes).
pub const TOKEN_BYTES: usize = 48;

/// The data waits in the sender's exported device memory.
pub const IPC: u32 = 0;
/// The data follows in chunks on the private communicator.
pub const CHUNKS: u32 = 1;
/// The data waits in the sender's own buffer, exported as it is; the sender's shared slot
/// (`claims`) says who copies it.
pub const DIRECT: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Envelope {
    magic: [u8; 16],
    job: u64,
    /// World rank of the sender, which the release goes back to.
    pub sender: u32,
    /// [`IPC`] or [`CHUNKS`].
    pub kind: u32,
    /// The true size of the message.
    pub bytes: u64,
    /// [`IPC`]: the sender's exported buffer (an arena, mapped once per receiver) and where in
    /// it the data lies. [`CHUNKS`]: the tag of the chunks on the private communicator, and
    /// their size. [`DIRECT`]: the driver's id of the program's allocation, and where in it
    /// the data lies.
    pub arena: u64,
    pub offset: u64,
    pub handle: [u8; 64],
    /// The sender's GPU, as the node names it (see `peers::device_token`).
    pub token: [u8; TOKEN_BYTES],
    /// [`DIRECT`]: the sender's process id, its slot and the slot's use.
    pub pid: u32,
    pub slot: u32,
    pub seq: u32,
}

const _: () = assert!(std::mem::size_of::<Envelope>() <= BYTES);

impl Envelope {
    pub fn new(sender: u32, kind: u32, bytes: u64, arena: u64, offset: u64, handle: [u8; 64], token: [u8; TOKEN_BYTES]) -> Envelope {
        Envelope { magic: MAGIC, job: JOB.load(Relaxed), sender, kind, bytes, arena, offset, handle, token, pid: 0, slot: 0, seq: 0 }
    }

    /// Writes the envelope at the start of `out`, the rest zero.
    pub fn write(&self, out: &mut [u8; BYTES]) {
        out.fill(0);
        // SAFETY: Envelope is plain bytes and fits in BYTES (asserted above).
        unsafe { std::ptr::write_unaligned(out.as_mut_ptr().cast::<Envelope>(), *self) };
    }

    /// Reads an envelope from `BYTES` bytes at `head`, if they are one.
    ///
    /// # Safety
    /// `head` points to `BYTES` readable bytes.
    pub unsafe fn read(head: *const c_void) -> Option<Envelope> {
        // SAFETY: per the caller.
        unsafe { marked(head).then(|| std::ptr::read_unaligned(head.cast::<Envelope>())) }
    }
}

/// Whether the bytes at `head` begin as an envelope of this job does. The rest of an envelope
/// is read only where this holds.
///
/// # Safety
/// `head` points to at least `BYTES` readable bytes.
#[inline]
pub unsafe fn marked(head: *const c_void) -> bool {
    // SAFETY: per the caller, and the mark lies in the first bytes.
    let (magic, job) = unsafe { (std::ptr::read_unaligned(head.cast::<[u8; 16]>()), std::ptr::read_unaligned(head.cast::<u8>().add(std::mem::offset_of!(Envelope, job)).cast::<u64>())) };
    magic == MAGIC && job == JOB.load(Relaxed)
}

/// Clears the mark of an envelope left in a buffer whose landing failed, so that no later
/// receive there takes it for a new one.
///
/// # Safety
/// `head` points to at least `BYTES` writable bytes.
pub unsafe fn unmark(head: *mut c_void) {
    // SAFETY: per the caller.
    unsafe { std::ptr::write_bytes(head.cast::<u8>(), 0, MAGIC.len()) };
}
