//! Who can map whose GPU memory: one record per rank, exchanged over the world communicator
//! when MPI starts, and the private communicator the fast path talks on.
//!
//! The records do not need CUDA: most programs load it after `MPI_Init`. A rank names the GPUs
//! it can see by its `CUDA_VISIBLE_DEVICES` entries (all of the node's when unset), and a
//! sender names its buffer's GPU the same way; a receiver on the same node that sees that GPU
//! can open the sender's IPC handles.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::envelope::TOKEN_BYTES;
use crate::base::{config, log};
use crate::mpi::abi::{self, Handle, UNDEFINED};
use crate::mpi::real;

const MAX_VISIBLE: usize = 16;
const VERSION: u32 = 7;

#[repr(C)]
#[derive(Clone, Copy)]
struct Record {
    version: u32,
    /// The rank sends and receives over IPC (`CUDAMPI_IPC`).
    ipc: u32,
    /// The rank sends and receives large messages in chunks (`CUDAMPI_PIPELINE`).
    pipeline: u32,
    /// The process id, which names the rank's shared slots (`claims`) on its node.
    pid: u32,
    node: u64,
    /// A random number; rank 0's marks the job's envelopes (`envelope::set_job`).
    mark: u64,
    /// No `CUDA_VISIBLE_DEVICES`: every GPU of the node.
    sees_all: u32,
    visible: u32,
    tokens: [[u8; TOKEN_BYTES]; MAX_VISIBLE],
}

pub struct Peers {
    pub rank: c_int,
    records: Vec<Record>,
    /// `MPI_COMM_WORLD` duplicated: releases travel here, never among the program's messages.
    pub shadow: Handle,
    world_group: Handle,
    /// Per world rank: its last release said it copied on this rank's GPU (`shares_gpu`).
    shared_gpu: Vec<AtomicBool>,
}

// SAFETY: handles are plain values, used from any thread.
unsafe impl Sync for Peers {}
unsafe impl Send for Peers {}

static PEERS: OnceLock<Peers> = OnceLock::new();

pub fn get() -> Option<&'static Peers> {
    PEERS.get()
}

/// This node: the host name and the kernel's boot id, so that two machines with one name (two
/// containers, say) are not taken for one.
pub fn node_id() -> u64 {
    let mut text = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most host.len() bytes.
    if unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) } == 0 {
        text.extend(host.iter().take_while(|&&b| b != 0));
    }
    // FNV-1a.
    text.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// A number no other job draws: std's hasher keys come from the system's random source.
fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

fn visible_devices() -> Option<Vec<String>> {
    let v = std::env::var("CUDA_VISIBLE_DEVICES").ok()?;
    Some(v.split(',').map(|s| s.trim().to_owned()).take_while(|s| !s.is_empty()).collect())
}

fn token_bytes(name: &str) -> [u8; TOKEN_BYTES] {
    let mut t = [0u8; TOKEN_BYTES];
    let n = name.len().min(TOKEN_BYTES);
    t[..n].copy_from_slice(&name.as_bytes()[..n]);
    t
}

/// The node-wide name of this process's GPU `ordinal`.
pub fn device_token(ordinal: i32) -> [u8; TOKEN_BYTES] {
    match visible_devices() {
        Some(list) => token_bytes(list.get(ordinal as usize).map(String::as_str).unwrap_or("?")),
        None => token_bytes(&ordinal.to_string()),
    }
}

/// This process's ordinal of the GPU a peer names `token`, if it sees it.
pub fn local_ordinal(token: &[u8; TOKEN_BYTES]) -> Option<i32> {
    let name = std::str::from_utf8(&token[..token.iter().position(|&b| b == 0).unwrap_or(TOKEN_BYTES)]).ok()?;
    match visible_devices() {
        Some(list) => list.iter().position(|s| s == name).map(|i| i as i32),
        None => name.parse().ok(),
    }
}

/// Tags of the handshake's messages on `MPI_COMM_WORLD`. They travel before `MPI_Init` returns
/// anywhere: each rank sends its hello before any message of its own program and receives the
/// verdict before its program runs, and MPI never lets a later message from the same rank
/// overtake them, so even a program using the same tags or wildcards never sees them.
const HELLO_TAG: c_int = 32_001;
const VERDICT_TAG: c_int = 32_002;
const HELLO_MAGIC: u32 = 0x6364_6d70;

/// What each rank tells rank 0: this library, its version, its fast paths and the smallest
/// message each takes (a receiver orders its receives and picks their staging buffers by the
/// sizes at which peers send envelopes; 0 for a path that is off).
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Hello {
    magic: u32,
    version: u32,
    ipc: u32,
    pipeline: u32,
    ipc_bytes: u64,
    pipeline_bytes: u64,
    ipc_same_gpu_bytes: u64,
    ipc_awaited_bytes: u64,
    /// `CUDAMPI_NCCL`: every rank must take part in the agreement of each large collective,
    /// or none (`engine/`).
    nccl: u64,
    nccl_bytes: u64,
}

impl Hello {
    fn new(cfg: &config::Config) -> Hello {
        Hello {
            magic: HELLO_MAGIC,
            version: VERSION,
            ipc: cfg.ipc as u32,
            pipeline: cfg.pipeline as u32,
            ipc_bytes: if cfg.ipc { cfg.ipc_bytes as u64 } else { 0 },
            pipeline_bytes: if cfg.pipeline { cfg.pipeline_bytes as u64 } else { 0 },
            ipc_same_gpu_bytes: if cfg.ipc { cfg.ipc_same_gpu_bytes as u64 } else { 0 },
            ipc_awaited_bytes: if cfg.ipc { cfg.ipc_awaited_bytes as u64 } else { 0 },
            nccl: cfg.nccl as u64,
            nccl_bytes: if cfg.nccl { cfg.nccl_bytes as u64 } else { 0 },
        }
    }

    /// The paths, and the sizes of those both have on where they differ from `other`'s.
    fn settings(&self, other: &Hello) -> String {
        let mut s = format!("CUDAMPI_IPC={} CUDAMPI_PIPELINE={}", self.ipc, self.pipeline);
        if self.ipc == other.ipc && self.ipc_bytes != other.ipc_bytes {
            s += &format!(" CUDAMPI_IPC_BYTES={}", self.ipc_bytes);
        }
        if self.ipc == other.ipc && self.ipc_same_gpu_bytes != other.ipc_same_gpu_bytes {
            s += &format!(" CUDAMPI_IPC_SAME_GPU_BYTES={}", self.ipc_same_gpu_bytes);
        }
        if self.ipc == other.ipc && self.ipc_awaited_bytes != other.ipc_awaited_bytes {
            s += &format!(" CUDAMPI_IPC_AWAITED_BYTES={}", self.ipc_awaited_bytes);
        }
        if self.pipeline == other.pipeline && self.pipeline_bytes != other.pipeline_bytes {
            s += &format!(" CUDAMPI_PIPELINE_BYTES={}", self.pipeline_bytes);
        }
        if self.nccl != other.nccl {
            s += &format!(" CUDAMPI_NCCL={}", self.nccl);
        } else if self.nccl_bytes != other.nccl_bytes {
            s += &format!(" CUDAMPI_NCCL_BYTES={}", self.nccl_bytes);
        }
        s
    }
}

/// Checks that every rank of the job runs cudampi with the same fast paths, then, if they are
/// on, exchanges the records and creates the private communicator. Called by every rank right
/// after the library's `MPI_Init`, before the program sends anything.
///
/// The check is point to point, never a collective: a rank without cudampi would meet a
/// collective only in its own program's first collective and mismatch it, or never. Every rank
/// sends rank 0 a hello and waits, for `CUDAMPI_HANDSHAKE_WAIT` seconds at most, for rank 0's
/// verdict; rank 0 waits as long for every hello. A rank that never answers, or settings that
/// differ, stop the job with one line naming the rank and `MPI_Abort`.
pub fn handshake() {
    let cfg = config::get();
    let (Some(p), abi) = (real::pmpi(), abi::get()) else { return };
    let (mut rank, mut size) = (0, 0);
    // SAFETY: MPI is initialised; valid out-pointers.
    if unsafe { (p.comm_rank)(abi.comm_world, &mut rank) != 0 || (p.comm_size)(abi.comm_world, &mut size) != 0 } || size < 2 {
        return;
    }
    let me = Hello::new(cfg);
    let wait = Duration::from_secs(cfg.handshake_wait_s);
    if rank == 0 {
        gather_hellos(p, me, size, wait);
    } else {
        send_hello(p, me, rank, wait);
    }
    if cfg.ipc || cfg.pipeline {
        exchange_records(p, rank, size);
    }
}

/// Rank 0: every other rank's hello, compared with its own; the verdict to each.
fn gather_hellos(p: &real::Pmpi, me: Hello, size: c_int, wait: Duration) {
    let abi = abi::get();
    let n = size as usize - 1;
    let mut hellos = vec![Hello::default(); n];
    let mut reqs: Vec<Option<Handle>> = Vec::with_capacity(n);
    for (i, h) in hellos.iter_mut().enumerate() {
        let mut req: Handle = 0;
        // SAFETY: the hello stays in `hellos` until the receive completes or the job stops.
        let rc = unsafe { (p.irecv)((h as *mut Hello).cast(), HELLO_BYTES, abi.byte, i as c_int + 1, HELLO_TAG, abi.comm_world, &mut req) };
        reqs.push((rc == 0).then_some(req));
    }
    if !complete_within(p, &mut reqs, wait) {
        let missing: Vec<String> = reqs.iter().enumerate().filter(|(_, r)| r.is_some()).map(|(i, _)| (i + 1).to_string()).take(8).collect();
        let more = reqs.iter().filter(|r| r.is_some()).count() - missing.len();
        stop(p, format_args!(
            "rank {}{} sent no handshake within {} s of MPI_Init: every rank of the job must load cudampi \
             (LD_PRELOAD for each rank, or linked), or none",
            missing.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
            wait.as_secs()
        ));
    }
    let odd = hellos.iter().position(|h| *h != me);
    let verdict: u32 = odd.is_some() as u32;
    let mut sends: Vec<Option<Handle>> = Vec::with_capacity(n);
    for r in 1..size {
        let mut req: Handle = 0;
        // SAFETY: `verdict` outlives the sends, which complete below.
        let rc = unsafe { (p.isend)((&verdict as *const u32).cast(), 4, abi.byte, r, VERDICT_TAG, abi.comm_world, &mut req) };
        sends.push((rc == 0).then_some(req));
    }
    let Some(i) = odd else {
        complete_within(p, &mut sends, wait);
        return;
    };
    let (rank, h) = (i + 1, hellos[i]);
    if h.magic != HELLO_MAGIC || h.version != VERSION {
        stop(p, format_args!("rank {rank} runs another version of cudampi than rank 0; every rank of the job must load the same one"));
    }
    stop(p, format_args!(
        "ranks disagree on the fast paths: rank 0 has {}, rank {rank} has {}; every rank of the job must set CUDAMPI_IPC, CUDAMPI_PIPELINE, CUDAMPI_NCCL and their _BYTES alike",
        me.settings(&h),
        h.settings(&me)
    ));
}

/// Every rank but 0: its hello, and rank 0's verdict.
fn send_hello(p: &real::Pmpi, me: Hello, rank: c_int, wait: Duration) {
    let abi = abi::get();
    let mut verdict: u32 = u32::MAX;
    let (mut send, mut recv): (Handle, Handle) = (0, 0);
    // SAFETY: `me` and `verdict` outlive both requests, which complete below or the job stops.
    let rcs = unsafe {
        [
            (p.isend)((&me as *const Hello).cast(), HELLO_BYTES, abi.byte, 0, HELLO_TAG, abi.comm_world, &mut send),
            (p.irecv)((&mut verdict as *mut u32).cast(), 4, abi.byte, 0, VERDICT_TAG, abi.comm_world, &mut recv),
        ]
    };
    let mut reqs = vec![(rcs[0] == 0).then_some(send), (rcs[1] == 0).then_some(recv)];
    // Longer than rank 0 waits for the hellos, so that rank 0 names a missing rank first; one
    // rank reports a silent rank 0 and the others follow later, so the job says it once.
    let patience = wait + wait / 2 + Duration::from_secs(if rank == 1 { 2 } else { 7 });
    if !complete_within(p, &mut reqs, patience) {
        stop(p, format_args!(
            "rank 0 did not answer cudampi's handshake within {} s of MPI_Init: every rank of the job must load cudampi \
             (LD_PRELOAD for each rank, or linked), or none",
            patience.as_secs()
        ));
    }
    if verdict != 0 {
        // Rank 0 reports what differs and stops the job; this rank only waits for that.
        std::thread::sleep(wait);
        // SAFETY: MPI is initialised.
        unsafe { (p.abort)(abi.comm_world, 1) };
    }
}

const HELLO_BYTES: c_int = std::mem::size_of::<Hello>() as c_int;

/// Tests the requests until each is done (then `None`) or `wait` has passed; true if all are.
fn complete_within(p: &real::Pmpi, reqs: &mut [Option<Handle>], wait: Duration) -> bool {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        for r in reqs.iter_mut() {
            if let Some(req) = r {
                let (mut flag, mut status) = (0, abi::Status::zeroed());
                // SAFETY: a request of the handshake; its buffer lives until it completes.
                let rc = unsafe { (p.test)((req as *mut Handle).cast(), &mut flag, status.as_mut_ptr()) };
                if rc != 0 || flag != 0 {
                    *r = None;
                }
            }
        }
        if reqs.iter().all(Option::is_none) {
            return true;
        }
        if start.elapsed() > wait {
            return false;
        }
        // Ranks of one job arrive within microseconds of each other unless one is held back.
        spins += 1;
        if spins > 1000 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Reports why the job cannot go on, and stops it.
fn stop(p: &real::Pmpi, why: std::fmt::Arguments) -> ! {
    log::error(why);
    // MPICH's launcher can kill the job before it has forwarded the line just written.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: MPI is initialised.
    unsafe { (p.abort)(abi::get().comm_world, 1) };
    std::process::exit(1)
}

/// Exchanges the records over a duplicate of `MPI_COMM_WORLD` (every rank is known to take
/// part by now) and keeps it as the private communicator; a failure leaves the fast paths off.
fn exchange_records(p: &real::Pmpi, rank: c_int, size: c_int) {
    let cfg = config::get();
    let abi = abi::get();
    let mut me = Record { version: VERSION, ipc: cfg.ipc as u32, pipeline: cfg.pipeline as u32, pid: std::process::id(), node: node_id(), mark: random(), sees_all: 0, visible: 0, tokens: [[0; TOKEN_BYTES]; MAX_VISIBLE] };
    match visible_devices() {
        None => me.sees_all = 1,
        Some(list) => {
            for (i, name) in list.iter().take(MAX_VISIBLE).enumerate() {
                me.tokens[i] = token_bytes(name);
                me.visible += 1;
            }
        }
    }
    let mut shadow: Handle = 0;
    let mut world_group: Handle = 0;
    let bytes = std::mem::size_of::<Record>() as c_int;
    let mut all = vec![me; size as usize];
    // SAFETY: MPI is initialised; valid buffers and out-pointers; every rank makes the same calls.
    let ok = unsafe {
        (p.comm_dup)(abi.comm_world, &mut shadow) == 0
            && (p.allgather)((&me as *const Record).cast(), bytes, abi.byte, all.as_mut_ptr().cast(), bytes, abi.byte, shadow) == 0
            && (p.comm_group)(abi.comm_world, &mut world_group) == 0
    };
    if !ok {
        log::warn(format_args!("the CUDA IPC handshake failed; device messages are staged through host memory"));
        return;
    }
    super::envelope::set_job(all[0].mark);
    let shared_gpu = all.iter().map(|_| AtomicBool::new(false)).collect();
    let _ = PEERS.set(Peers { rank, records: all, shadow, world_group, shared_gpu });
}

impl Peers {
    fn record(&self, rank: c_int) -> Option<&Record> {
        self.records.get(usize::try_from(rank).ok()?)
    }

    /// Whether two ranks' records let them use IPC, and chunked sends, between them.
    fn paths(a: &Record, b: &Record) -> (bool, bool) {
        let agree = a.version == VERSION && b.version == VERSION;
        (agree && a.ipc != 0 && b.ipc != 0 && a.node == b.node, agree && a.pipeline != 0 && b.pipeline != 0)
    }

    /// Whether some other rank may send this one an envelope.
    pub fn may_receive(&self) -> bool {
        (0..self.records.len() as c_int).any(|r| self.may_send_here(r))
    }

    /// Whether world rank `source` may send this rank envelopes.
    pub fn may_send_here(&self, source: c_int) -> bool {
        let (Some(me), Some(r)) = (self.record(self.rank), self.record(source)) else { return false };
        let (ipc, pipeline) = Self::paths(me, r);
        source != self.rank && (ipc || pipeline)
    }

    /// Whether this rank may send world rank `dest` a message in chunks.
    pub fn pipelines(&self, dest: c_int) -> bool {
        let (Some(me), Some(r)) = (self.record(self.rank), self.record(dest)) else { return false };
        dest != self.rank && Self::paths(me, r).1
    }

    /// Whether world rank `dest` can open handles of this rank's GPU `token` (a process cannot
    /// open its own).
    pub fn can_map(&self, dest: c_int, token: &[u8; TOKEN_BYTES]) -> bool {
        if dest == self.rank {
            return false;
        }
        let (Some(me), Some(r)) = (self.record(self.rank), self.record(dest)) else { return false };
        Self::paths(me, r).0 && (r.sees_all != 0 || r.tokens[..r.visible as usize].contains(token))
    }

    /// Whether this rank sees one GPU through `CUDA_VISIBLE_DEVICES` and another rank of this
    /// node sees that one only too: the two share it. (Without the variable, one GPU on the
    /// node is told by the driver: `cuda::signal`.)
    pub fn one_visible_gpu_shared(&self) -> bool {
        self.one_visible_gpu_shared_by(self.rank)
    }

    /// [`one_visible_gpu_shared`](Peers::one_visible_gpu_shared) for world rank `rank`.
    fn one_visible_gpu_shared_by(&self, rank: c_int) -> bool {
        let Some(me) = self.record(rank) else { return false };
        let one = |r: &Record| r.sees_all == 0 && r.visible == 1;
        one(me) && self.records.iter().enumerate().any(|(r, rec)| r as c_int != rank && rec.node == me.node && one(rec) && rec.tokens[0] == me.tokens[0])
    }

    /// Whether world rank `rank`, a rank of this node, counts its GPU as shared by ranks
    /// (`cuda::signal::gpu_shared`) as far as this rank can tell from the records: it sees only
    /// one GPU that another rank sees only too, or it and this rank see every GPU of a node
    /// that has one. Such a rank sends IPC envelopes from `CUDAMPI_IPC_SAME_GPU_BYTES` only.
    fn counts_gpu_shared(&self, rank: c_int) -> bool {
        let (Some(me), Some(r)) = (self.record(self.rank), self.record(rank)) else { return false };
        let node_of_one = r.sees_all != 0 && me.sees_all != 0 && r.node == me.node && crate::cuda::driver::one_gpu();
        node_of_one || self.one_visible_gpu_shared_by(rank)
    }

    /// The smallest device message (bytes of its span) that any rank may send this one as an
    /// envelope, by the rules of `fastpath::offer` (every rank has the same sizes: the
    /// handshake); `usize::MAX` when none may. Asked once the driver is initialised: whether
    /// the node has one GPU is the driver's to tell.
    pub fn smallest_envelope(&self) -> usize {
        let cfg = config::get();
        let Some(me) = self.record(self.rank) else { return usize::MAX };
        let from = |rank: c_int| {
            let (ipc, pipeline) = Self::paths(me, self.record(rank)?);
            let ipc = ipc.then(|| cfg.ipc_awaited_from(self.counts_gpu_shared(rank)));
            ipc.into_iter().chain(pipeline.then_some(cfg.pipeline_bytes)).min()
        };
        (0..self.records.len() as c_int).filter(|&r| r != self.rank).filter_map(from).min().unwrap_or(usize::MAX)
    }

    /// Whether world rank `rank` is this rank, or one of this node that takes IPC with it.
    pub fn maps_with(&self, rank: c_int) -> bool {
        let (Some(me), Some(r)) = (self.record(self.rank), self.record(rank)) else { return false };
        rank == self.rank || Self::paths(me, r).0
    }

    /// The process id of world rank `rank`.
    pub fn pid(&self, rank: c_int) -> Option<u32> {
        self.record(rank).map(|r| r.pid)
    }

    /// Whether another rank of the job runs on this node.
    pub fn node_shared(&self) -> bool {
        let Some(me) = self.record(self.rank) else { return false };
        self.records.iter().enumerate().any(|(r, rec)| r as c_int != self.rank && rec.node == me.node)
    }

    /// Ranks in `MPI_COMM_WORLD`.
    pub fn size(&self) -> usize {
        self.records.len()
    }

    /// The process ids of the other ranks of this node that take IPC with this one.
    pub fn node_pids(&self) -> Vec<u32> {
        let Some(me) = self.record(self.rank) else { return Vec::new() };
        let mut pids: Vec<u32> = self
            .records
            .iter()
            .enumerate()
            .filter(|&(r, rec)| r as c_int != self.rank && Self::paths(me, rec).0)
            .map(|(_, rec)| rec.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Whether world rank `dest` copied the last IPC message it got from this rank on this
    /// rank's GPU (into host memory, or device memory of the same GPU): the two processes then
    /// take turns on one GPU, and IPC pays only for large messages.
    pub fn shares_gpu(&self, dest: c_int) -> bool {
        usize::try_from(dest).ok().and_then(|d| self.shared_gpu.get(d)).is_some_and(|f| f.load(Relaxed))
    }

    /// What a release from world rank `source` said about where it copied.
    pub fn set_shares_gpu(&self, source: c_int, shared: bool) {
        if let Some(f) = usize::try_from(source).ok().and_then(|s| self.shared_gpu.get(s)) {
            f.store(shared, Relaxed);
        }
    }

    /// The world rank of `rank` in `comm` (of its remote group for an intercommunicator).
    pub fn world_rank(&self, comm: Handle, rank: c_int) -> Option<c_int> {
        let abi = abi::get();
        if abi.same(comm, abi.comm_world) {
            return Some(rank);
        }
        let p = real::pmpi()?;
        let (mut inter, mut group, mut out): (c_int, Handle, c_int) = (0, 0, UNDEFINED);
        // SAFETY: a communicator handle from the caller; valid out-pointers; the group is freed.
        unsafe {
            if (p.comm_test_inter)(comm, &mut inter) != 0 {
                return None;
            }
            // A rank out of range is the library's to refuse: Open MPI 4.1 translates it
            // without a check (and crashes).
            let mut size = 0;
            let rc = if inter != 0 { (p.comm_remote_size)(comm, &mut size) } else { (p.comm_size)(comm, &mut size) };
            if rc != 0 || !(0..size).contains(&rank) {
                return None;
            }
            let rc = if inter != 0 { (p.comm_remote_group)(comm, &mut group) } else { (p.comm_group)(comm, &mut group) };
            if rc != 0 {
                return None;
            }
            (p.group_translate_ranks)(group, 1, &rank, self.world_group, &mut out);
            (p.group_free)(&mut group);
        }
        (out != UNDEFINED && out >= 0).then_some(out)
    }

    /// Frees the world group (`MPI_Finalize`, before the real one). The private communicator is
    /// left to the real `MPI_Finalize`: releases sent after its owner last looked may still be
    /// unmatched on it, and MPICH 5 refuses to free a communicator that holds any.
    pub fn free(&self) {
        let Some(p) = real::pmpi() else { return };
        let mut group = self.world_group;
        // SAFETY: a group this module created; freed once, at finalize.
        unsafe { (p.group_free)(&mut group) };
    }
}
