//! Which engine runs a collective that may carry device memory: NCCL, where every rank of the
//! communicator can run its part there (`agreement`), or the staged path of
//! `handlers::collectives`, as before. The collectives handler asks first: [`run`] for a
//! blocking call, [`plan`] at a persistent one's initialization, [`start`] for a nonblocking
//! one (`flight`); `None` means "stage it".
//!
//! NCCL runs a call when: `CUDAMPI_NCCL` is on (every rank alike: the handshake checks it),
//! the call is one of [`Job`]'s, its largest buffer is at least `CUDAMPI_NCCL_BYTES` (below it,
//! NCCL's own latency loses to staging), the communicator is an intracommunicator whose ranks
//! each have a GPU of their own, a reduction's operation and datatype are in `kinds`, and every
//! rank passes device memory of its GPU, without gaps, for every buffer significant on it.
//!
//! This layer uses `base`, `cuda`, `mpi` and `fastpath` (the node and GPU names); the handlers
//! use it, for C and Fortran calls alike.

mod agreement;
mod board;
mod flight;
mod jobs;
pub mod kinds;

use std::ffi::c_int;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::base::{config, log, stats};
use crate::cuda::nccl;
use crate::cuda::{self, Device, Location};
use crate::mpi::abi::{self, Handle};
use crate::mpi::{errors, real};

pub use flight::{start, InFlight, Planned};
pub use jobs::{Job, PerRank};
use jobs::gapless;

/// Whether NCCL may serve collectives at all: the same answer on every rank.
#[inline]
pub fn on() -> bool {
    config::get().nccl
}

impl Job {
    /// Below `CUDAMPI_NCCL_BYTES` by loads alone: such a call never asks (the host route of the
    /// entry points passes it straight to MPI).
    #[inline(always)]
    pub fn below_threshold(&self) -> bool {
        self.below(config::get().nccl_bytes.max(1))
    }

    /// The size (`Shape::bytes`) from which NCCL runs this call among `size` ranks:
    /// `CUDAMPI_NCCL_BYTES`, but a sixteenth of it per rank for the calls whose buffers grow
    /// with the ranks' blocks (`MPI_Allgather`, `MPI_Reduce_scatter` and their forms). Staging
    /// those pays a copy of every rank's block, and NCCL overtook it from blocks of 512 bytes at
    /// 2 and 4 GPUs, where the whole buffer was still below 8 KiB (`docs/performance.md`).
    /// `MPI_Alltoall` keeps the whole buffer: at 4 GPUs staging beat NCCL up to 8 KiB.
    pub fn threshold(&self, size: c_int) -> usize {
        let t = config::get().nccl_bytes.max(1);
        match self {
            Job::Allgather { .. } | Job::Allgatherv { .. } | Job::ReduceScatterBlock { .. } | Job::ReduceScatter { .. } => (t / 16).max(1).saturating_mul(size.max(1) as usize),
            _ => t,
        }
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
    let bases = job.buffers(rank);
    for &(buf, datatype) in &bases {
        if buf.is_null() {
            // MPI_BOTTOM with absolute addresses: the staged path describes it.
            out.ready = false;
            continue;
        }
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
    out.ready = out.ready && job.consistent(rank) && !jobs::refused(&bases) && out.device.is_some() && !out.no_nccl;
    out
}

/// What the ranks agreed for one call.
enum Agreed {
    Staged,
    /// The agreement itself failed: the call's result.
    Raised(c_int),
    /// NCCL, with this rank's operations, on the communicator's NCCL communicator.
    Nccl { nccl: agreement::Shared, ops: Vec<nccl::Op>, bytes: usize },
}

/// Runs `job` on NCCL if every rank of `comm` can; `None` when it is to be staged, before
/// anything was done. `Some(rc)`: served, `rc` is the call's result.
pub fn run(name: &'static str, comm: Handle, job: &Job) -> Option<c_int> {
    let slot = flight::chosen(comm, job)?;
    if let Some(rc) = flight::follow(name, comm, job, slot) {
        return Some(rc);
    }
    let (nccl, ops, bytes) = match agree_on(name, comm, job, slot, None) {
        Agreed::Staged => return None,
        Agreed::Raised(rc) => return Some(rc),
        Agreed::Nccl { nccl, ops, bytes } => (nccl, ops, bytes),
    };
    let patience = Duration::from_secs(config::get().handshake_wait_s);
    let mut c = agreement::lock(&nccl);
    if let Err(e) = c.run(&ops).and_then(|()| c.wait(patience)) {
        log::error(format_args!("{name}: {e}"));
        return Some(errors::raise(Some(comm), abi::get().err_other));
    }
    counted(name, bytes, c.ordinal());
    Some(0)
}

/// A persistent collective's initialization (`MPI_Allreduce_init` and the like), which MPI
/// lets synchronise the ranks as a blocking collective may (MPI-4.1 section 6.13: the
/// initialization calls are non-local): the ranks agree once, for every start. `None`: staged.
pub fn plan(name: &'static str, comm: Handle, job: &Job) -> Option<Result<Planned, c_int>> {
    match agree_on(name, comm, job, flight::chosen(comm, job)?, None) {
        Agreed::Staged => None,
        Agreed::Raised(rc) => Some(Err(rc)),
        Agreed::Nccl { nccl, ops, bytes } => Some(Ok(Planned { name, comm, nccl, ops, bytes })),
    }
}

/// Counts one call served on NCCL.
fn counted(name: &'static str, bytes: usize, ordinal: i32) {
    stats::device_call(name);
    stats::NCCL_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    stats::NCCL_BYTES.fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
    if config::get().debug {
        log::debug(format_args!("{name}: {bytes} bytes on NCCL, GPU {ordinal}"));
    }
}

/// An enqueued collective (`MPIX_Allreduce_enqueue`) on the program's `stream`: on NCCL when
/// every rank of `comm` can run it there, at any size, since the alternative is a round trip
/// through cudampi's progress thread. Returns at once, the collective queued; `None` when it
/// is to be served otherwise, before anything was done.
pub fn enqueue(name: &'static str, comm: Handle, job: &Job, stream: *mut std::ffi::c_void) -> Option<c_int> {
    if !on() {
        return None;
    }
    let slot = agreement::slot(comm)?;
    let (nccl, ops, bytes) = match agree_on(name, comm, job, slot, Some(1)) {
        Agreed::Staged => return None,
        Agreed::Raised(rc) => return Some(rc),
        Agreed::Nccl { nccl, ops, bytes } => (nccl, ops, bytes),
    };
    let mut c = agreement::lock(&nccl);
    if let Err(e) = c.run_on(&ops, stream) {
        log::error(format_args!("{name}: {e}"));
        return Some(errors::raise(Some(comm), abi::get().err_other));
    }
    counted(name, bytes, c.ordinal());
    Some(0)
}

/// The agreement for one call on `slot`'s communicator, which [`flight::chosen`] found: what
/// every rank decides alike comes first, so that most calls stop before any lock, small ones
/// before any question to MPI. NCCL runs calls from `min_bytes`, by default the job's
/// threshold.
fn agree_on(name: &'static str, comm: Handle, job: &Job, slot: &agreement::Slot, min_bytes: Option<usize>) -> Agreed {
    let cfg = config::get();
    // The communicator's schedule ticks at every such call on every rank alike, so a
    // program that never passes device memory pays for little more than the lookup.
    if slot.skips() {
        return Agreed::Staged;
    }
    let mut st = slot.lock();
    let Ok((rank, size)) = crate::mpi::comm::rank_size(comm) else { return Agreed::Staged };
    let threshold = min_bytes.unwrap_or_else(|| job.threshold(size));
    let Some(shape) = job.shape(rank, size).filter(|s| !s.common || s.bytes >= threshold) else { return Agreed::Staged };
    let mut me = local(job, rank);
    me.ready &= shape.ok;
    if let (Some(d), Some(c)) = (me.device, st.nccl.as_ref()) {
        let c = agreement::lock(c);
        me.ready &= d.ordinal == c.ordinal() && c.usable();
    }
    let flags = [!me.ready as i64, me.any_device as i64, me.no_nccl as i64, shape.bytes as i64, std::mem::take(&mut st.strayed) as i64];
    let agreed = match st.agree(comm, flags) {
        Ok(a) => a,
        Err(rc) => return Agreed::Raised(errors::raise(Some(comm), rc)),
    };
    // A rank without NCCL stays without it: the communicator stops asking.
    if agreed[2] != 0 {
        slot.never(&mut st);
    }
    slot.agreed(&mut st, agreed[1] != 0);
    // Where the sizes differ by rank, the largest decides, alike everywhere.
    let Some(dev) = me.device.filter(|_| agreed[0] == 0 && (agreed[3] as usize) >= threshold) else {
        slot.chose(&mut st, false, false);
        return Agreed::Staged;
    };
    if st.nccl.is_none() {
        match open(comm, &dev, rank, size) {
            Ok((c, one_node)) => {
                st.nccl = Some(std::sync::Arc::new(std::sync::Mutex::new(c)));
                st.board = board::Board::make(comm, rank, size, one_node);
                if cfg.debug && st.board.is_some() {
                    log::debug(format_args!("{name}: this communicator's agreements go through shared memory"));
                }
            }
            Err(why) => {
                slot.never(&mut st);
                // Ranks sharing a GPU are an ordinary setup (NCCL refuses them); a failure is not.
                match why {
                    NoStart::SharedGpu if cfg.debug => log::debug(format_args!("{name}: two ranks share a GPU: this communicator's device collectives are staged")),
                    NoStart::SharedGpu => (),
                    NoStart::Failed(why) if rank == 0 || cfg.debug => {
                        log::warn(format_args!("{name}: NCCL is not used on this communicator ({why}); its device collectives are staged"))
                    }
                    NoStart::Failed(_) => (),
                }
                return Agreed::Staged;
            }
        }
    }
    let Some(nccl) = st.nccl.clone() else { return Agreed::Staged };
    slot.chose(&mut st, true, agreed[4] != 0);
    Agreed::Nccl { nccl, ops: job.ops(&shape, rank, size), bytes: shape.bytes }
}

/// Why a communicator has no NCCL communicator.
enum NoStart {
    SharedGpu,
    Failed(String),
}

/// Makes the communicator's NCCL communicator; every rank of it calls this at the same
/// collective. The same answer on every rank: two ranks on one GPU (NCCL refuses them) or a
/// rank whose NCCL failed leave every rank staging.
fn open(comm: Handle, dev: &Device, rank: c_int, size: c_int) -> Result<(nccl::Comm, bool), NoStart> {
    let p = real::pmpi().ok_or(NoStart::Failed("no MPI".into()))?;
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
        return Err(NoStart::Failed(format!("MPI_Allgather failed with {rc}")));
    }
    let one_node = keys.chunks(KEY).all(|k| k[..8] == key[..8]);
    let mut seen: Vec<&[u8]> = keys.chunks(KEY).collect();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(NoStart::SharedGpu);
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
        return Err(NoStart::Failed("rank 0 could not make an NCCL id".into()));
    }
    let mut u = nccl::UniqueId([0; 128]);
    u.0.copy_from_slice(&id[1..]);
    let made = nccl::Comm::create(dev, size, rank, &u);
    let failed = |ok: bool| agreement::agree(comm, [!ok as i64, 0, 0, 0, 0]).map_or(true, |a| a[0] != 0);
    let mut c = match made {
        Ok(c) if !failed(true) => c,
        Ok(c) => {
            c.abandon();
            return Err(NoStart::Failed("NCCL failed to start on another rank".into()));
        }
        Err(e) => {
            failed(false);
            return Err(NoStart::Failed(e.to_string()));
        }
    };
    // Only once every rank has joined: a rank connecting alone would wait for the others.
    let connected = c.connect(size, rank);
    match (connected, failed(connected.is_ok())) {
        (Ok(()), false) => Ok((c, one_node)),
        (Ok(()), true) => {
            c.abandon();
            Err(NoStart::Failed("NCCL failed to connect on another rank".into()))
        }
        (Err(e), _) => {
            c.abandon();
            Err(NoStart::Failed(e.to_string()))
        }
    }
}

/// The NCCL communicator of a stream communicator, on which its enqueued point-to-point calls
/// with device buffers run on the program's stream (`CUDAMPI_ENQUEUE=nccl`). Its own, apart
/// from the one the communicator's collectives make, so that the two never share a queue.
pub struct Peers {
    comm: Mutex<Option<nccl::Comm>>,
    /// The stream communicator's size: the ranks NCCL can reach.
    ranks: c_int,
}

// SAFETY: the NCCL communicator is used under its lock only.
unsafe impl Send for Peers {}
unsafe impl Sync for Peers {}

/// Every [`Peers`] made, so that `MPI_Finalize` frees those whose communicator the program did
/// not free.
static ALL_PEERS: Mutex<Vec<Weak<Peers>>> = Mutex::new(Vec::new());

impl Peers {
    /// Whether `rank` is one of the stream communicator's.
    pub fn has(&self, rank: c_int) -> bool {
        (0..self.ranks).contains(&rank)
    }

    /// The stream communicator's size.
    pub fn ranks(&self) -> c_int {
        self.ranks
    }

    /// Queues `ops`, sends and receives, as one group on `stream` after the program's work there.
    pub fn run(&self, name: &'static str, ops: &[nccl::Op], stream: *mut std::ffi::c_void) -> Result<(), String> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut c = self.comm.lock().unwrap_or_else(|e| e.into_inner());
        let c = c.as_mut().ok_or("the communicator's NCCL communicator is freed")?;
        c.run_on(ops, stream).map_err(|e| e.to_string())?;
        // Freed with operations still queued on the program's stream (the communicator freed
        // before the stream is synchronised), the communicator waits for them.
        c.follow(stream).map_err(|e| e.to_string())?;
        for op in ops {
            counted(name, op_bytes(op), c.ordinal());
        }
        Ok(())
    }

    /// Frees the NCCL communicator (once; later calls find it gone).
    fn close(&self) {
        if let Some(c) = self.comm.lock().unwrap_or_else(|e| e.into_inner()).take() {
            c.destroy();
        }
    }
}

impl Drop for Peers {
    fn drop(&mut self) {
        self.close();
    }
}

fn op_bytes(op: &nccl::Op) -> usize {
    match *op {
        nccl::Op::Send { count, dtype, .. } | nccl::Op::Recv { count, dtype, .. } => count * nccl::type_bytes(dtype),
        _ => 0,
    }
}

/// Opens the NCCL communicator of `comm`, a stream communicator just made, for its enqueued
/// point-to-point calls: collective over `comm`, every rank calls it. `dev`: this rank's
/// stream's GPU where it asks for NCCL (`CUDAMPI_ENQUEUE=nccl`), else `None`. `Some` on every
/// rank or on none: where any rank has no GPU stream, no NCCL, or shares its GPU with another
/// rank, or NCCL fails to start, the calls are made through MPI.
pub fn stream_peers(name: &'static str, comm: Handle, dev: Option<Device>) -> Option<Arc<Peers>> {
    if !on() {
        return None;
    }
    let ready = dev.filter(|_| nccl::get().is_some());
    let agreed = agreement::agree(comm, [ready.is_none() as i64, 0, 0, 0, 0]).ok()?;
    let dev = ready.filter(|_| agreed[0] == 0)?;
    let (rank, size) = crate::mpi::comm::rank_size(comm).ok()?;
    match open(comm, &dev, rank, size) {
        Ok((c, _)) => {
            let peers = Arc::new(Peers { comm: Mutex::new(Some(c)), ranks: size });
            let mut all = ALL_PEERS.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|w| w.strong_count() > 0);
            all.push(Arc::downgrade(&peers));
            Some(peers)
        }
        Err(NoStart::SharedGpu) => {
            if rank == 0 {
                log::warn(format_args!("{name}: two ranks share a GPU, which NCCL refuses: the enqueued point-to-point calls go through MPI"));
            }
            None
        }
        Err(NoStart::Failed(why)) => {
            log::warn(format_args!("{name}: NCCL does not start on this stream communicator ({why}): the enqueued point-to-point calls go through MPI"));
            None
        }
    }
}

/// Frees the NCCL communicators before the library's `MPI_Finalize`.
pub fn finalize() {
    let peers: Vec<Arc<Peers>> = ALL_PEERS.lock().unwrap_or_else(|e| e.into_inner()).drain(..).filter_map(|w| w.upgrade()).collect();
    for p in peers {
        p.close();
    }
    agreement::finalize();
}
