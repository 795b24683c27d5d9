//! Which engine runs a blocking collective that may carry device memory: NCCL, where every
//! rank of the communicator can run its part there (`agreement`), or the staged path of
//! `handlers::collectives`, as before. The collectives handler asks [`run`] first; `None`
//! means "stage it".
//!
//! NCCL runs a call when: `CUDAMPI_NCCL` is on (every rank alike: the handshake checks it),
//! the call is one of [`Job`]'s, its largest buffer is at least `CUDAMPI_NCCL_BYTES` (below it,
//! NCCL's own latency loses to staging), the communicator is an intracommunicator whose ranks
//! each have a GPU of their own, a reduction's operation and datatype are in `kinds`, and every
//! rank passes device memory of its GPU, without gaps, for every buffer significant on it.
//!
//! This layer uses `base`, `cuda`, `mpi` and `fastpath` (the node and GPU names); only the
//! handlers use it.

mod agreement;
mod kinds;

use std::ffi::{c_int, c_void};
use std::time::Duration;

use crate::base::{config, log, stats};
use crate::cuda::nccl::{self, DataType, Op, RedOp};
use crate::cuda::{self, Device, Location};
use crate::mpi::abi::{self, Handle};
use crate::mpi::{datatype, errors, real};

/// A blocking collective NCCL can run, with the program's arguments.
pub enum Job {
    Allreduce { send: *const c_void, recv: *mut c_void, count: i64, datatype: Handle, op: Handle },
    Reduce { send: *const c_void, recv: *mut c_void, count: i64, datatype: Handle, op: Handle, root: c_int },
    Bcast { buf: *mut c_void, count: i64, datatype: Handle, root: c_int },
    Allgather { send: *const c_void, sendcount: i64, sendtype: Handle, recv: *mut c_void, recvcount: i64, recvtype: Handle },
    ReduceScatterBlock { send: *const c_void, recv: *mut c_void, recvcount: i64, datatype: Handle, op: Handle },
    Alltoall { send: *const c_void, sendcount: i64, sendtype: Handle, recv: *mut c_void, recvcount: i64, recvtype: Handle },
}

/// Whether NCCL may serve collectives at all: the same answer on every rank.
#[inline]
pub fn on() -> bool {
    config::get().nccl
}

/// What a call is, once the checks every rank makes alike have passed.
struct Shape {
    /// Bytes of the largest buffer a rank passes (the same on every rank).
    bytes: usize,
    /// The NCCL type and operation of a reduction; bytes (`ncclUint8`) for data movement.
    dtype: DataType,
    op: Option<RedOp>,
}

fn in_place(p: *const c_void) -> bool {
    abi::get().is_in_place(p)
}

/// A datatype's size, if it is one MPI accepts.
fn size_of(datatype: Handle) -> Option<i64> {
    datatype::size(datatype).filter(|&s| s > 0)
}

/// Whether `count` elements of `datatype` lie packed at the buffer's address, as NCCL reads
/// them: no gaps, no offset.
fn gapless(datatype: Handle) -> bool {
    match datatype::size_packed(datatype) {
        Some((_, true)) => true,
        Some(_) => datatype::query(datatype).is_ok_and(|t| t.size == t.extent && t.true_lb == 0 && t.true_extent == t.size),
        None => false,
    }
}

impl Job {
    /// The checks every rank makes alike; `None`: staged.
    fn shape(&self, size: c_int) -> Option<Shape> {
        let n = size.max(0) as i64;
        let bytes = |count: i64, datatype: Handle| -> Option<i64> { count.checked_mul(size_of(datatype)?).filter(|&b| b > 0) };
        let reduce = |count: i64, datatype: Handle, op: Handle, total: i64| -> Option<Shape> {
            let dtype = kinds::reducible(datatype)?;
            let op = kinds::operation(op)?;
            Some(Shape { bytes: bytes(count, datatype)?.checked_mul(total)? as usize, dtype, op: Some(op) })
        };
        let moves = |b: i64| Some(Shape { bytes: b as usize, dtype: DataType::ncclUint8, op: None });
        match *self {
            Job::Allreduce { count, datatype, op, .. } | Job::Reduce { count, datatype, op, .. } => reduce(count, datatype, op, 1),
            Job::ReduceScatterBlock { recvcount, datatype, op, .. } => reduce(recvcount, datatype, op, n),
            Job::Bcast { count, datatype, .. } => moves(bytes(count, datatype)?),
            Job::Allgather { recvcount, recvtype, .. } => moves(bytes(recvcount, recvtype)?.checked_mul(n)?),
            // In place, every block would be read and written at once: staged.
            Job::Alltoall { send, recvcount, recvtype, .. } if !in_place(send) => moves(bytes(recvcount, recvtype)?.checked_mul(n)?),
            Job::Alltoall { .. } => None,
        }
    }

    /// The buffers significant on this rank, each with its datatype.
    fn buffers(&self, rank: c_int) -> Vec<(*const c_void, Handle)> {
        let mut out = Vec::with_capacity(2);
        match *self {
            Job::Allreduce { send, recv, datatype, .. } | Job::ReduceScatterBlock { send, recv, datatype, .. } => {
                if !in_place(send) {
                    out.push((send, datatype));
                }
                out.push((recv.cast_const(), datatype));
            }
            Job::Reduce { send, recv, datatype, root, .. } => {
                if root == rank {
                    if !in_place(send) {
                        out.push((send, datatype));
                    }
                    out.push((recv.cast_const(), datatype));
                } else {
                    out.push((send, datatype));
                }
            }
            Job::Bcast { buf, datatype, .. } => out.push((buf.cast_const(), datatype)),
            Job::Allgather { send, sendtype, recv, recvtype, .. } | Job::Alltoall { send, sendtype, recv, recvtype, .. } => {
                if !in_place(send) {
                    out.push((send, sendtype));
                }
                out.push((recv.cast_const(), recvtype));
            }
        }
        out
    }

    /// The send side describes as many bytes as the receive side, as MPI requires; where it
    /// does not, the library is left to say so.
    fn consistent(&self) -> bool {
        match *self {
            Job::Allgather { send, sendcount, sendtype, recvcount, recvtype, .. } | Job::Alltoall { send, sendcount, sendtype, recvcount, recvtype, .. } => {
                in_place(send) || (size_of(sendtype).zip(size_of(recvtype))).is_some_and(|(s, r)| sendcount.checked_mul(s) == recvcount.checked_mul(r))
            }
            _ => true,
        }
    }

    /// The root, for the calls that have one: it must name a rank, or the library answers.
    fn root_ok(&self, size: c_int) -> bool {
        match *self {
            Job::Reduce { root, .. } | Job::Bcast { root, .. } => (0..size).contains(&root),
            _ => true,
        }
    }

    /// The NCCL operations of this rank's part.
    fn ops(&self, shape: &Shape, rank: c_int, size: c_int) -> Vec<Op> {
        let dtype = shape.dtype;
        let red = shape.op.unwrap_or(RedOp::ncclSum);
        let elem = |datatype: Handle| size_of(datatype).unwrap_or(1) as usize;
        match *self {
            Job::Allreduce { send, recv, count, datatype, .. } => {
                let send = if in_place(send) { recv.cast_const() } else { send };
                let count = count as usize * elem(datatype) / nccl_size(dtype);
                vec![Op::AllReduce { send, recv, count, dtype, op: red }]
            }
            Job::Reduce { send, recv, count, datatype, root, .. } => {
                let send = if in_place(send) && rank == root { recv.cast_const() } else { send };
                // NCCL reads the receive buffer only at the root.
                let recv = if rank == root { recv } else { send.cast_mut() };
                let count = count as usize * elem(datatype) / nccl_size(dtype);
                vec![Op::Reduce { send, recv, count, dtype, op: red, root }]
            }
            Job::Bcast { buf, root, .. } => vec![Op::Broadcast { send: buf.cast_const(), recv: buf, count: shape.bytes, dtype, root }],
            Job::Allgather { send, recv, .. } => {
                let block = shape.bytes / size as usize;
                // MPI's in-place block is this rank's own block of the receive buffer, which is
                // also NCCL's in-place form.
                let send = if in_place(send) { recv.cast_const().wrapping_byte_add(rank as usize * block) } else { send };
                vec![Op::AllGather { send, recv, count: block, dtype }]
            }
            Job::ReduceScatterBlock { send, recv, recvcount, datatype, .. } => {
                let count = recvcount as usize * elem(datatype) / nccl_size(dtype);
                if !in_place(send) {
                    return vec![Op::ReduceScatter { send, recv, count, dtype, op: red }];
                }
                // NCCL's in-place result lands in this rank's block, MPI's at the buffer's start.
                let block = recvcount as usize * elem(datatype);
                let mine = recv.wrapping_byte_add(rank as usize * block);
                let mut ops = vec![Op::ReduceScatter { send: recv.cast_const(), recv: mine, count, dtype, op: red }];
                if rank != 0 {
                    ops.push(Op::Copy { dst: recv, src: mine.cast_const(), bytes: block });
                }
                ops
            }
            Job::Alltoall { send, recv, .. } => {
                let block = shape.bytes / size as usize;
                (0..size)
                    .flat_map(|p| {
                        let at = p as usize * block;
                        [
                            Op::Send { buf: send.wrapping_byte_add(at), count: block, dtype, peer: p },
                            Op::Recv { buf: recv.wrapping_byte_add(at), count: block, dtype, peer: p },
                        ]
                    })
                    .collect()
            }
        }
    }
}

fn nccl_size(t: DataType) -> usize {
    match t {
        DataType::ncclInt8 | DataType::ncclUint8 => 1,
        DataType::ncclFloat16 | DataType::ncclBfloat16 => 2,
        DataType::ncclInt32 | DataType::ncclUint32 | DataType::ncclFloat32 => 4,
        _ => 8,
    }
}

/// Where this rank stands for one call: whether it can run its part on NCCL (and on which GPU),
/// and whether it passed device memory at all.
struct Local {
    device: Option<Device>,
    ready: bool,
    any_device: bool,
    /// It has device memory here, and no NCCL: no collective on this communicator can use NCCL.
    no_nccl: bool,
}

fn local(job: &Job, rank: c_int) -> Local {
    let mut out = Local { device: None, ready: true, any_device: false, no_nccl: false };
    for (buf, datatype) in job.buffers(rank) {
        match cuda::locate(buf) {
            Location::Device(d) if !d.managed => {
                out.any_device = true;
                match out.device {
                    Some(first) if first.ordinal != d.ordinal => out.ready = false,
                    Some(_) => (),
                    None => out.device = Some(d),
                }
                if !gapless(datatype) {
                    out.ready = false;
                }
            }
            Location::Device(_) => {
                out.any_device = true;
                out.ready = false;
            }
            _ => out.ready = false,
        }
    }
    // Only a rank with device memory here loads NCCL.
    out.no_nccl = out.any_device && nccl::get().is_none();
    out.ready = out.ready && job.consistent() && out.device.is_some() && !out.no_nccl;
    out
}

/// Runs `job` on NCCL if every rank of `comm` can; `None` when it is to be staged, before
/// anything was done. `Some(rc)`: served, `rc` is the call's result.
pub fn run(name: &'static str, comm: Handle, job: &Job) -> Option<c_int> {
    let cfg = config::get();
    if !cfg.nccl {
        return None;
    }
    // What every rank decides alike comes first: most calls stop here without a lock.
    let size = crate::mpi::comm::size(comm).ok()?;
    let shape = job.shape(size).filter(|s| s.bytes >= cfg.nccl_bytes.max(1) && job.root_ok(size))?;
    let slot = agreement::slot(comm)?;
    let mut st = slot.lock();
    let rank = st.rank;
    if !st.asks() {
        return None;
    }
    let mut me = local(job, rank);
    if let (Some(d), Some(c)) = (me.device, st.nccl.as_ref()) {
        me.ready &= d.ordinal == c.ordinal() && c.usable();
    }
    let agreed = match agreement::agree(comm, [!me.ready as i64, me.any_device as i64, me.no_nccl as i64]) {
        Ok(a) => a,
        Err(rc) => return Some(errors::raise(Some(comm), rc)),
    };
    st.agreed(agreed[1] != 0);
    // A rank without NCCL stays without it: the communicator stops asking.
    st.never |= agreed[2] != 0;
    if agreed[0] != 0 {
        return None;
    }
    let dev = me.device?;
    if st.nccl.is_none() {
        match start(comm, &dev, rank, size) {
            Ok(c) => st.nccl = Some(c),
            Err(why) => {
                st.never = true;
                if rank == 0 || cfg.debug {
                    log::warn(format_args!("{name}: NCCL is not used on this communicator ({why}); its device collectives are staged"));
                }
                return None;
            }
        }
    }
    let comm_nccl = st.nccl.as_mut()?;
    let ops = job.ops(&shape, rank, size);
    let patience = Duration::from_secs(cfg.handshake_wait_s);
    if let Err(e) = comm_nccl.run(&ops).and_then(|()| comm_nccl.wait(patience)) {
        log::error(format_args!("{name}: {e}"));
        return Some(errors::raise(Some(comm), abi::get().err_other));
    }
    stats::device_call(name);
    stats::NCCL_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    stats::NCCL_BYTES.fetch_add(shape.bytes as u64, std::sync::atomic::Ordering::Relaxed);
    if cfg.debug {
        log::debug(format_args!("{name}: {} bytes on NCCL, GPU {}", shape.bytes, dev.ordinal));
    }
    Some(0)
}

/// Makes the communicator's NCCL communicator; every rank of it calls this at the same
/// collective. The same answer on every rank: two ranks on one GPU (NCCL refuses them) or a
/// rank whose NCCL failed leave every rank staging.
fn start(comm: Handle, dev: &Device, rank: c_int, size: c_int) -> Result<nccl::Comm, String> {
    let p = real::pmpi().ok_or("no MPI")?;
    let abi = abi::get();
    // Each rank's GPU, named node-wide as the fast path names them.
    const KEY: usize = 8 + crate::fastpath::TOKEN_BYTES;
    let mut key = [0u8; KEY];
    key[..8].copy_from_slice(&crate::fastpath::node_id().to_le_bytes());
    key[8..].copy_from_slice(&crate::fastpath::device_token(dev.ordinal));
    let mut keys = vec![0u8; KEY * size as usize];
    // SAFETY: KEY bytes from each rank into `keys`, which holds KEY per rank.
    let rc = unsafe { (p.allgather)(key.as_ptr().cast(), KEY as c_int, abi.byte, keys.as_mut_ptr().cast(), KEY as c_int, abi.byte, comm) };
    if rc != 0 {
        return Err(format!("MPI_Allgather failed with {rc}"));
    }
    let mut seen: Vec<&[u8]> = keys.chunks(KEY).collect();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err("two ranks share a GPU".into());
    }
    // Rank 0 makes the id; a first byte of 1 says it could.
    let mut id = [0u8; 1 + 128];
    if rank == 0 {
        if let Ok(u) = nccl::UniqueId::new() {
            id[0] = 1;
            id[1..].copy_from_slice(&u.0);
        }
    }
    // SAFETY: 129 bytes on every rank.
    let rc = unsafe { (p.bcast)(id.as_mut_ptr().cast(), id.len() as c_int, abi.byte, 0, comm) };
    if rc != 0 || id[0] != 1 {
        return Err("rank 0 could not make an NCCL id".into());
    }
    let mut u = nccl::UniqueId([0; 128]);
    u.0.copy_from_slice(&id[1..]);
    let made = nccl::Comm::create(dev, size, rank, &u);
    let failed = agreement::agree(comm, [made.is_err() as i64, 0, 0]).map_or(true, |a| a[0] != 0);
    match made {
        Ok(c) if !failed => Ok(c),
        Ok(c) => {
            c.abandon();
            Err("NCCL failed to start on another rank".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Frees the NCCL communicators before the library's `MPI_Finalize`.
pub fn finalize() {
    agreement::finalize();
}
