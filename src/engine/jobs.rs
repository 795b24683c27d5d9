//! The collectives NCCL can run, as the program called them ([`Job`]), and what each becomes:
//! its size and NCCL type ([`Shape`]), the buffers significant on a rank, and the NCCL
//! operations of one rank's part. Data movement goes as bytes; the `v` forms, `MPI_Gather`,
//! `MPI_Scatter` and `MPI_Alltoall` as one group of NCCL sends and receives (or broadcasts, for
//! `MPI_Allgatherv`); `MPI_Reduce_scatter` with unequal counts as one group of reductions.

use std::ffi::{c_int, c_void};

use super::kinds;
use crate::cuda::nccl::{DataType, Op, RedOp};
use crate::mpi::abi::{self, Handle};
use crate::mpi::counts::Ints;
use crate::mpi::{datatype, typemap};

/// One rank's blocks of a rooted collective's buffer at the root: the same count for each
/// rank, packed in rank order, or counts and displacements (in the datatype's extents).
#[derive(Clone, Copy)]
pub enum PerRank {
    Same(i64),
    V(Ints, Ints),
}

/// A collective NCCL can run, with the program's arguments.
pub enum Job {
    Allreduce { send: *const c_void, recv: *mut c_void, count: i64, datatype: Handle, op: Handle },
    Reduce { send: *const c_void, recv: *mut c_void, count: i64, datatype: Handle, op: Handle, root: c_int },
    Bcast { buf: *mut c_void, count: i64, datatype: Handle, root: c_int },
    Allgather { send: *const c_void, sendcount: i64, sendtype: Handle, recv: *mut c_void, recvcount: i64, recvtype: Handle },
    Allgatherv { send: *const c_void, sendcount: i64, sendtype: Handle, recv: *mut c_void, counts: Ints, displs: Ints, recvtype: Handle },
    ReduceScatterBlock { send: *const c_void, recv: *mut c_void, recvcount: i64, datatype: Handle, op: Handle },
    ReduceScatter { send: *const c_void, recv: *mut c_void, counts: Ints, datatype: Handle, op: Handle },
    Alltoall { send: *const c_void, sendcount: i64, sendtype: Handle, recv: *mut c_void, recvcount: i64, recvtype: Handle },
    Alltoallv { send: *const c_void, sendcounts: Ints, sdispls: Ints, sendtype: Handle, recv: *mut c_void, recvcounts: Ints, rdispls: Ints, recvtype: Handle },
    Gather { send: *const c_void, sendcount: i64, sendtype: Handle, recv: *mut c_void, blocks: PerRank, recvtype: Handle, root: c_int },
    Scatter { send: *const c_void, blocks: PerRank, sendtype: Handle, recv: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int },
}

/// What a call is, from what the rank knows.
pub struct Shape {
    /// Bytes of the largest buffer this rank passes.
    pub bytes: usize,
    /// Whether `bytes` is the same on every rank (the counts that decide it are significant
    /// everywhere); otherwise the agreement carries it.
    pub common: bool,
    /// The NCCL type and operation of a reduction; bytes (`ncclUint8`) for data movement.
    pub dtype: DataType,
    pub op: Option<RedOp>,
    /// False where this rank's own arguments (counts, datatypes of a call whose sizes differ
    /// by rank) keep it off NCCL: it still takes part in the agreement, saying so.
    pub ok: bool,
}

pub fn in_place(p: *const c_void) -> bool {
    abi::get().is_in_place(p)
}

/// A datatype's size, if it is one MPI accepts: from loads alone for a predefined type some
/// thread asked about before.
#[inline]
fn size_of(datatype: Handle) -> Option<i64> {
    datatype::size_known(datatype).or_else(|| datatype::size(datatype)).filter(|&s| s > 0)
}

/// Whether elements of `datatype` lie packed from the buffer's address, as NCCL reads them: no
/// gaps, no offset (so a displacement in extents is one in sizes).
pub fn gapless(datatype: Handle) -> bool {
    match datatype::size_packed(datatype) {
        Some((_, true)) => true,
        Some(_) => datatype::query(datatype).is_ok_and(|t| t.packed() && t.true_extent == t.size),
        None => false,
    }
}

/// `count` elements of `datatype` in bytes; `None` for a negative count or a bad datatype.
fn bytes(count: i64, datatype: Handle) -> Option<i64> {
    if count < 0 {
        return None;
    }
    count.checked_mul(size_of(datatype)?)
}

/// The sum of `n` counts; `None` if one is negative or the array is null.
fn total(counts: Ints, n: c_int) -> Option<i64> {
    if counts.is_null() {
        return None;
    }
    // SAFETY: the program passes one count per rank of the communicator.
    (0..n.max(0) as usize).map(|i| unsafe { counts.at(i) }).try_fold(0i64, |acc, c| if c < 0 { None } else { acc.checked_add(c) })
}

/// Bytes from a buffer's start to the end of its last block (counts and displacements in
/// elements of `datatype`); `None` for a negative count or displacement.
fn span(counts: Ints, displs: Ints, n: c_int, datatype: Handle) -> Option<i64> {
    if counts.is_null() || displs.is_null() {
        return None;
    }
    (0..n.max(0)).try_fold(0i64, |end, p| {
        let (c, d) = (at(counts, p), at(displs, p));
        if c < 0 || d < 0 {
            return None;
        }
        Some(if c == 0 { end } else { end.max(bytes(d.checked_add(c)?, datatype)?) })
    })
}

/// Element `i` of a count or displacement array.
fn at(a: Ints, i: c_int) -> i64 {
    // SAFETY: the program passes one entry per rank; callers index ranks only.
    unsafe { a.at(i as usize) }
}

impl PerRank {
    /// Count and byte offset of rank `p`'s block, for a datatype of `size` bytes without gaps.
    fn block(self, p: c_int, size: i64) -> (i64, i64) {
        match self {
            PerRank::Same(c) => (c, p as i64 * c * size),
            PerRank::V(counts, displs) => (at(counts, p), at(displs, p) * size),
        }
    }

    fn total(self, n: c_int) -> Option<i64> {
        match self {
            PerRank::Same(c) => c.checked_mul(n as i64),
            PerRank::V(counts, displs) if !displs.is_null() => total(counts, n),
            PerRank::V(..) => None,
        }
    }
}

impl Job {
    /// The call's size and NCCL type; `None` where NCCL cannot run it (an operation or type it
    /// lacks, a bad count or root: the library answers those).
    pub fn shape(&self, rank: c_int, size: c_int) -> Option<Shape> {
        let n = size.max(0) as i64;
        let reduce = |count: i64, datatype: Handle, op: Handle, times: i64| -> Option<Shape> {
            let dtype = kinds::reducible(datatype)?;
            let op = kinds::operation(op)?;
            Some(Shape { bytes: bytes(count, datatype)?.checked_mul(times)? as usize, common: true, dtype, op: Some(op), ok: true })
        };
        let moves = |b: i64, common: bool| Some(Shape { bytes: b as usize, common, dtype: DataType::ncclUint8, op: None, ok: true });
        // Sizes that differ by rank: whatever this rank finds, it asks with the others.
        let local = |b: Option<i64>| Some(Shape { bytes: b.unwrap_or(0) as usize, common: false, dtype: DataType::ncclUint8, op: None, ok: b.is_some() });
        let root_ok = |root: c_int| (0..size).contains(&root);
        match *self {
            Job::Allreduce { count, datatype, op, .. } => reduce(count, datatype, op, 1),
            Job::Reduce { count, datatype, op, root, .. } => reduce(count, datatype, op, 1).filter(|_| root_ok(root)),
            Job::ReduceScatterBlock { recvcount, datatype, op, .. } => reduce(recvcount, datatype, op, n),
            Job::ReduceScatter { counts, datatype, op, .. } => reduce(total(counts, size)?, datatype, op, 1),
            Job::Bcast { count, datatype, root, .. } => moves(bytes(count, datatype)?, true).filter(|_| root_ok(root)),
            Job::Allgather { recvcount, recvtype, .. } => moves(bytes(recvcount, recvtype)?.checked_mul(n)?, true),
            Job::Allgatherv { counts, recvtype, .. } => moves(bytes(total(counts, size)?, recvtype)?, true),
            Job::Alltoall { recvcount, recvtype, .. } => moves(bytes(recvcount, recvtype)?.checked_mul(n)?, true),
            Job::Alltoallv { send, sendcounts, sendtype, recvcounts, rdispls, recvtype, .. } => {
                let input = if in_place(send) { span(recvcounts, rdispls, size, recvtype) } else { total(sendcounts, size).and_then(|c| bytes(c, sendtype)) };
                local(input.zip(total(recvcounts, size).and_then(|c| bytes(c, recvtype))).map(|(o, i)| o.max(i)))
            }
            Job::Gather { send, sendcount, sendtype, blocks, recvtype, root, .. } if root_ok(root) => match (rank == root, blocks) {
                // At the root, the receive side; elsewhere the send side, which matches it.
                (true, PerRank::Same(_)) => moves(bytes(blocks.total(size)?, recvtype)?, true),
                (true, b) => local(b.total(size).and_then(|c| bytes(c, recvtype))),
                (false, PerRank::Same(_)) => moves(bytes(sendcount, sendtype)?.checked_mul(n)?, true),
                (false, PerRank::V(..)) => local(bytes(sendcount, sendtype).filter(|_| !in_place(send))),
            },
            Job::Scatter { blocks, sendtype, recvcount, recvtype, root, .. } if root_ok(root) => match (rank == root, blocks) {
                (true, PerRank::Same(_)) => moves(bytes(blocks.total(size)?, sendtype)?, true),
                (true, b) => local(b.total(size).and_then(|c| bytes(c, sendtype))),
                (false, PerRank::Same(_)) => moves(bytes(recvcount, recvtype)?.checked_mul(n)?, true),
                (false, PerRank::V(..)) => local(bytes(recvcount, recvtype)),
            },
            Job::Gather { .. } | Job::Scatter { .. } => None,
        }
    }

    /// The call's size where it needs no question to MPI (the calls whose buffers do not
    /// grow with the number of ranks), the same on every rank.
    pub fn bytes_here(&self) -> Option<i64> {
        match *self {
            Job::Allreduce { count, datatype, .. } | Job::Reduce { count, datatype, .. } | Job::Bcast { count, datatype, .. } => bytes(count, datatype),
            _ => None,
        }
    }

    /// Whether the call is below `threshold` bytes by what loads alone tell (a predefined
    /// datatype's size some thread has asked about); false where they cannot tell.
    #[inline(always)]
    pub fn below(&self, threshold: usize) -> bool {
        match *self {
            Job::Allreduce { count, datatype, .. } | Job::Reduce { count, datatype, .. } | Job::Bcast { count, datatype, .. } => {
                count >= 0 && datatype::size_known(datatype).is_some_and(|s| (count as u64).saturating_mul(s as u64) < threshold as u64)
            }
            _ => false,
        }
    }

    /// A reduction: its datatype is the same on every rank (MPI requires it), so whether NCCL
    /// can take it is the same everywhere.
    pub fn reduces(&self) -> bool {
        matches!(self, Job::Allreduce { .. } | Job::Reduce { .. } | Job::ReduceScatterBlock { .. } | Job::ReduceScatter { .. })
    }

    /// The buffer the call only reads (`MPI_IN_PLACE` or a root's argument where it has one).
    pub fn send(&self) -> *const c_void {
        match *self {
            Job::Bcast { .. } => std::ptr::null(),
            Job::Allreduce { send, .. }
            | Job::Reduce { send, .. }
            | Job::Allgather { send, .. }
            | Job::Allgatherv { send, .. }
            | Job::ReduceScatterBlock { send, .. }
            | Job::ReduceScatter { send, .. }
            | Job::Alltoall { send, .. }
            | Job::Alltoallv { send, .. }
            | Job::Gather { send, .. }
            | Job::Scatter { send, .. } => send,
        }
    }

    /// The buffers significant on this rank, each with its datatype.
    pub fn buffers(&self, rank: c_int) -> Vec<(*const c_void, Handle)> {
        let mut out = Vec::with_capacity(2);
        let mut both = |send: *const c_void, sendtype: Handle, recv: *mut c_void, recvtype: Handle| {
            if !in_place(send) {
                out.push((send, sendtype));
            }
            out.push((recv.cast_const(), recvtype));
        };
        match *self {
            Job::Allreduce { send, recv, datatype, .. } | Job::ReduceScatterBlock { send, recv, datatype, .. } | Job::ReduceScatter { send, recv, datatype, .. } => both(send, datatype, recv, datatype),
            Job::Allgather { send, sendtype, recv, recvtype, .. }
            | Job::Allgatherv { send, sendtype, recv, recvtype, .. }
            | Job::Alltoall { send, sendtype, recv, recvtype, .. }
            | Job::Alltoallv { send, sendtype, recv, recvtype, .. } => both(send, sendtype, recv, recvtype),
            Job::Reduce { send, recv, datatype, root, .. } if root == rank => both(send, datatype, recv, datatype),
            Job::Reduce { send, datatype, .. } => out.push((send, datatype)),
            Job::Gather { send, sendtype, recv, recvtype, root, .. } if root == rank => both(send, sendtype, recv, recvtype),
            Job::Gather { send, sendtype, .. } => out.push((send, sendtype)),
            // At the root, MPI_IN_PLACE stands in the receive buffer.
            Job::Scatter { send, sendtype, recv, recvtype, root, .. } if root == rank => both(recv.cast_const(), recvtype, send.cast_mut(), sendtype),
            Job::Scatter { recv, recvtype, .. } => out.push((recv.cast_const(), recvtype)),
            Job::Bcast { buf, datatype, .. } => out.push((buf.cast_const(), datatype)),
        }
        out
    }

    /// The send side describes as many bytes as the receive side where both are on this rank,
    /// as MPI requires; where it does not, the library is left to say so.
    pub fn consistent(&self, rank: c_int) -> bool {
        let same = |sc: i64, st: Handle, rc: i64, rt: Handle| bytes(sc, st).zip(bytes(rc, rt)).is_some_and(|(s, r)| s == r);
        match *self {
            Job::Allgather { send, sendcount, sendtype, recvcount, recvtype, .. } | Job::Alltoall { send, sendcount, sendtype, recvcount, recvtype, .. } => {
                in_place(send) || same(sendcount, sendtype, recvcount, recvtype)
            }
            Job::Allgatherv { send, sendcount, sendtype, counts, recvtype, .. } => in_place(send) || same(sendcount, sendtype, at(counts, rank), recvtype),
            Job::Gather { send, sendcount, sendtype, blocks, recvtype, root, .. } if root == rank && !in_place(send) => {
                same(sendcount, sendtype, blocks.block(rank, 1).0, recvtype)
            }
            Job::Scatter { blocks, sendtype, recv, recvcount, recvtype, root, .. } if root == rank && !in_place(recv) => {
                same(blocks.block(rank, 1).0, sendtype, recvcount, recvtype)
            }
            _ => true,
        }
    }

    /// The NCCL operations of this rank's part; `size` ranks.
    pub fn ops(&self, shape: &Shape, rank: c_int, size: c_int) -> Vec<Op> {
        let dtype = shape.dtype;
        let red = shape.op.unwrap_or(RedOp::ncclSum);
        let sz = |datatype: Handle| size_of(datatype).unwrap_or(1);
        // Counts of the reduction's NCCL type (a predefined type is one NCCL element).
        let elems = |count: i64| count as usize;
        let at_byte = |p: *mut c_void, off: i64| p.wrapping_byte_add(off as usize);
        let mut ops = Vec::new();
        match *self {
            Job::Allreduce { send, recv, count, .. } => {
                let send = if in_place(send) { recv.cast_const() } else { send };
                ops.push(Op::AllReduce { send, recv, count: elems(count), dtype, op: red });
            }
            Job::Reduce { send, recv, count, root, .. } => {
                let send = if in_place(send) && rank == root { recv.cast_const() } else { send };
                // NCCL writes the receive buffer only at the root.
                let recv = if rank == root { recv } else { send.cast_mut() };
                ops.push(Op::Reduce { send, recv, count: elems(count), dtype, op: red, root });
            }
            Job::Bcast { buf, root, .. } => ops.push(Op::Broadcast { send: buf.cast_const(), recv: buf, count: shape.bytes, dtype, root }),
            Job::Allgather { send, recv, .. } => {
                let block = shape.bytes / size as usize;
                // MPI's in-place block is this rank's own block of the receive buffer, which is
                // also NCCL's in-place form.
                let send = if in_place(send) { at_byte(recv, rank as i64 * block as i64).cast_const() } else { send };
                ops.push(Op::AllGather { send, recv, count: block, dtype });
            }
            Job::Allgatherv { send, recv, counts, displs, recvtype, .. } => {
                let s = sz(recvtype);
                for p in 0..size {
                    let (count, off) = (at(counts, p) * s, at(displs, p) * s);
                    if count == 0 {
                        continue;
                    }
                    let dst = at_byte(recv, off);
                    let src = if p == rank && !in_place(send) { send } else { dst.cast_const() };
                    ops.push(Op::Broadcast { send: src, recv: dst, count: count as usize, dtype, root: p });
                }
            }
            Job::ReduceScatterBlock { send, recv, recvcount, datatype, .. } => {
                if !in_place(send) {
                    ops.push(Op::ReduceScatter { send, recv, count: elems(recvcount), dtype, op: red });
                } else {
                    // NCCL's in-place result lands in this rank's block, MPI's at the start.
                    let block = recvcount * sz(datatype);
                    let mine = at_byte(recv, rank as i64 * block);
                    ops.push(Op::ReduceScatter { send: recv.cast_const(), recv: mine, count: elems(recvcount), dtype, op: red });
                    if rank != 0 {
                        ops.push(Op::Copy { dst: recv, src: mine.cast_const(), bytes: block as usize });
                    }
                }
            }
            Job::ReduceScatter { send, recv, counts, datatype, .. } => {
                let s = sz(datatype);
                let input = if in_place(send) { recv.cast_const() } else { send };
                let mut off = 0i64;
                let mut mine = None;
                for p in 0..size {
                    let c = at(counts, p);
                    if c > 0 {
                        let block = input.wrapping_byte_add(off as usize);
                        // In place, the root reduces into its own block, then moves it to the start.
                        let out = match (p == rank, in_place(send)) {
                            (true, false) => recv,
                            (true, true) => block.cast_mut(),
                            (false, _) => block.cast_mut(),
                        };
                        if p == rank {
                            mine = Some((out, c * s));
                        }
                        ops.push(Op::Reduce { send: block, recv: out, count: elems(c), dtype, op: red, root: p });
                    }
                    off += c * s;
                }
                if let Some((out, bytes)) = mine {
                    if out != recv {
                        ops.push(Op::Copy { dst: recv, src: out.cast_const(), bytes: bytes as usize });
                    }
                }
            }
            Job::Alltoall { send, recv, .. } => {
                let block = (shape.bytes / size as usize) as i64;
                // In place, the sends read a copy of the buffer taken before the receives write it.
                let send = if in_place(send) {
                    ops.push(Op::Snapshot { src: recv.cast_const(), bytes: shape.bytes });
                    recv.cast_const()
                } else {
                    send
                };
                for p in 0..size {
                    let at = p as i64 * block;
                    ops.push(Op::Send { buf: send.wrapping_byte_add(at as usize), count: block as usize, dtype, peer: p });
                    ops.push(Op::Recv { buf: at_byte(recv, at), count: block as usize, dtype, peer: p });
                }
            }
            Job::Alltoallv { send, sendcounts, sdispls, sendtype, recv, recvcounts, rdispls, recvtype } => {
                // In place, the receive side's counts describe the send side too (MPI-4.1 6.8).
                let (send, sendcounts, sdispls, sendtype) = if in_place(send) {
                    ops.push(Op::Snapshot { src: recv.cast_const(), bytes: span(recvcounts, rdispls, size, recvtype).unwrap_or(0) as usize });
                    (recv.cast_const(), recvcounts, rdispls, recvtype)
                } else {
                    (send, sendcounts, sdispls, sendtype)
                };
                let (ss, rs) = (sz(sendtype), sz(recvtype));
                for p in 0..size {
                    let c = at(sendcounts, p) * ss;
                    if c > 0 {
                        ops.push(Op::Send { buf: send.wrapping_byte_add((at(sdispls, p) * ss) as usize), count: c as usize, dtype, peer: p });
                    }
                    let c = at(recvcounts, p) * rs;
                    if c > 0 {
                        ops.push(Op::Recv { buf: at_byte(recv, at(rdispls, p) * rs), count: c as usize, dtype, peer: p });
                    }
                }
            }
            Job::Gather { send, sendcount, sendtype, recv, blocks, recvtype, root } => {
                if rank == root {
                    let s = sz(recvtype);
                    for p in 0..size {
                        let (count, off) = blocks.block(p, s);
                        if count == 0 || (p == rank && in_place(send)) {
                            continue;
                        }
                        ops.push(Op::Recv { buf: at_byte(recv, off), count: (count * s) as usize, dtype, peer: p });
                    }
                }
                let c = sendcount * sz(sendtype);
                if !(rank == root && in_place(send)) && c > 0 {
                    ops.push(Op::Send { buf: send, count: c as usize, dtype, peer: root });
                }
            }
            Job::Scatter { send, blocks, sendtype, recv, recvcount, recvtype, root } => {
                if rank == root {
                    let s = sz(sendtype);
                    for p in 0..size {
                        let (count, off) = blocks.block(p, s);
                        if count == 0 || (p == rank && in_place(recv)) {
                            continue;
                        }
                        ops.push(Op::Send { buf: send.wrapping_byte_add(off as usize), count: (count * s) as usize, dtype, peer: p });
                    }
                }
                let c = recvcount * sz(recvtype);
                if !(rank == root && in_place(recv)) && c > 0 {
                    ops.push(Op::Recv { buf: recv, count: c as usize, dtype, peer: root });
                }
            }
        }
        ops
    }
}

/// Whether the library may refuse a rank's arguments where NCCL would take them, given its
/// significant buffers (`Job::buffers`): the send and receive buffers are one without
/// `MPI_IN_PLACE` (MPICH's `MPI_ERR_BUFFER`), or a derived datatype is not committed. The
/// staged path gives the library's own answer.
pub fn refused(bases: &[(*const c_void, Handle)]) -> bool {
    let aliased = bases.len() == 2 && !bases[0].0.is_null() && bases[0].0 == bases[1].0;
    aliased || bases.iter().any(|&(_, t)| !datatype::query(t).is_ok_and(|i| i.named) && !typemap::committed(t))
}
