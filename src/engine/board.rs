//! The agreement through shared memory, for a communicator whose ranks are all on one node:
//! each rank writes what it says into its own line of a segment every rank has mapped, then
//! reads the others' lines. It answers what `agreement::agree`'s host `MPI_Allreduce` answers,
//! in a fraction of its time (1.4-2.4 µs at 4 ranks on one node, the largest step of a
//! collective on NCCL there: `bench/nccl_steps.c`).
//!
//! Each agreement has a number, the same on every rank (agreements come at the same points of
//! every rank's sequence of collectives on the communicator). A rank writes its integers into
//! the half of its line that the number's parity selects, then publishes the number (a release
//! store); a reader waits for the number (an acquire load), then reads that half. A rank can
//! be at most one agreement ahead of a reader, since it finishes one only after seeing every
//! rank's number: two halves suffice.
//!
//! While it waits, the rank keeps the MPI library progressing (`MPI_Iprobe`), as the host
//! collective it replaces would, so that a message another rank needs from it before that rank
//! can reach the collective still moves. It gives up after `CUDAMPI_HANDSHAKE_WAIT`.

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::agreement::FLAGS;
use crate::base::{config, log, shm};
use crate::mpi::abi::{self, Handle};
use crate::mpi::real;

/// One rank's line: its last agreement's number and two halves of integers.
#[repr(C, align(128))]
struct Line {
    number: AtomicU64,
    said: [[AtomicI64; FLAGS]; 2],
}

/// A communicator's segment, mapped by every rank of it.
pub struct Board {
    lines: *mut Line,
    ranks: usize,
    rank: usize,
    number: u64,
}

// SAFETY: the mapping is shared memory the board owns; the slot's lock serialises its use.
unsafe impl Send for Board {}

impl Board {
    fn bytes(ranks: usize) -> usize {
        ranks * std::mem::size_of::<Line>()
    }

    /// Makes and maps the segment on every rank of `comm` (collective); `None` on every rank
    /// when one could not, or when the ranks are not all on one node (`one_node`, the same on
    /// every rank).
    pub fn make(comm: Handle, rank: c_int, ranks: c_int, one_node: bool) -> Option<Board> {
        if !one_node || ranks < 2 {
            return None;
        }
        let p = real::pmpi()?;
        let abi = abi::get();
        let bytes = Board::bytes(ranks as usize);
        // Rank 0 names the segment; a first byte of 0 says it could not make it.
        let mut name = [0u8; 64];
        let mut made = None;
        if rank == 0 {
            let text = format!("/cudampi-board-{}-{}", std::process::id(), MADE.fetch_add(1, Ordering::Relaxed));
            if let Some(m) = CString::new(text).ok().and_then(|n| shm::create(&n, bytes).map(|m| (n, m))) {
                name[..m.0.as_bytes().len()].copy_from_slice(m.0.as_bytes());
                made = Some(m);
            }
        }
        // SAFETY: 64 bytes on every rank.
        if unsafe { (p.bcast)(name.as_mut_ptr().cast(), name.len() as c_int, abi.byte, 0, comm) } != 0 {
            return None;
        }
        let lines = match (&made, name[0]) {
            (Some((_, m)), _) => Some(*m),
            (None, 0) => None,
            (None, _) => {
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                CString::new(&name[..end]).ok().and_then(|n| shm::open(&n, bytes))
            }
        };
        // Every rank mapped it, or none keeps it.
        let flags = [lines.is_none() as i64, 0, 0, 0, 0];
        let all = super::agreement::agree(comm, flags).is_ok_and(|a| a[0] == 0);
        if let Some((n, _)) = &made {
            // Every rank mapped it by now (or gave up).
            shm::unlink(n);
        }
        let lines = lines?;
        let board = Board { lines: lines.cast(), ranks: ranks as usize, rank: rank as usize, number: 0 };
        all.then_some(board)
    }

    /// The maximum over the ranks of each of `flags`, as `agreement::agree` gives it.
    pub fn agree(&mut self, comm: Handle, flags: [i64; FLAGS]) -> Result<[i64; FLAGS], c_int> {
        self.number += 1;
        let half = (self.number & 1) as usize;
        // SAFETY: `ranks` lines, mapped for the board's life.
        let line = |r: usize| unsafe { &*self.lines.add(r) };
        let mine = line(self.rank);
        for (slot, &v) in mine.said[half].iter().zip(&flags) {
            slot.store(v, Ordering::Relaxed);
        }
        mine.number.store(self.number, Ordering::Release);
        let mut out = flags;
        let mut since: Option<Instant> = None;
        for r in (0..self.ranks).filter(|&r| r != self.rank) {
            let other = line(r);
            let mut spins: u32 = 0;
            while other.number.load(Ordering::Acquire) < self.number {
                spins = spins.wrapping_add(1);
                if spins % 64 != 0 {
                    std::hint::spin_loop();
                    continue;
                }
                let started = *since.get_or_insert_with(Instant::now);
                progress(comm);
                let waited = started.elapsed();
                if waited > Duration::from_secs(config::get().handshake_wait_s) {
                    log::error(format_args!("rank {r} of a communicator did not reach its collective within {} s", waited.as_secs()));
                    return Err(abi::get().err_other);
                }
                if waited > Duration::from_micros(100) {
                    std::thread::yield_now();
                }
            }
            for (o, slot) in out.iter_mut().zip(&other.said[half]) {
                *o = (*o).max(slot.load(Ordering::Relaxed));
            }
        }
        Ok(out)
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        // The mapping `make` made, unmapped once.
        shm::unmap(self.lines.cast(), Board::bytes(self.ranks));
    }
}

/// Segments made by this process, for unique names.
static MADE: AtomicU64 = AtomicU64::new(0);

/// One turn of the MPI library's progress, as the host collective's wait would make.
fn progress(comm: Handle) {
    let Some(p) = real::pmpi() else { return };
    let abi = abi::get();
    let mut flag: c_int = 0;
    // SAFETY: a live communicator; the status is ignored.
    unsafe { (p.iprobe)(abi.any_source, abi.any_tag, comm, &mut flag, abi.status_ignore as *mut c_void) };
}
