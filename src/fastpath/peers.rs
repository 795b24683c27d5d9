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

use super::envelope::TOKEN_BYTES;
use crate::base::{config, log};
use crate::mpi::abi::{self, Handle, UNDEFINED};
use crate::mpi::real;

const MAX_VISIBLE: usize = 16;
const VERSION: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
struct Record {
    version: u32,
    /// The rank sends and receives over IPC (`CUDAMPI_IPC`).
    ipc: u32,
    /// The rank sends and receives large messages in chunks (`CUDAMPI_PIPELINE`).
    pipeline: u32,
    _pad: u32,
    node: u64,
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
fn node_id() -> u64 {
    let mut text = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most host.len() bytes.
    if unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) } == 0 {
        text.extend(host.iter().take_while(|&&b| b != 0));
    }
    // FNV-1a.
    text.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
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

/// Exchanges the records and creates the private communicator. Called by every rank right
/// after the library's `MPI_Init`, so every rank takes part; a failure leaves the fast path
/// off.
pub fn handshake() {
    let cfg = config::get();
    let (Some(p), abi) = (real::pmpi(), abi::get()) else { return };
    let mut me = Record { version: VERSION, ipc: cfg.ipc as u32, pipeline: cfg.pipeline as u32, _pad: 0, node: node_id(), sees_all: 0, visible: 0, tokens: [[0; TOKEN_BYTES]; MAX_VISIBLE] };
    match visible_devices() {
        None => me.sees_all = 1,
        Some(list) => {
            for (i, name) in list.iter().take(MAX_VISIBLE).enumerate() {
                me.tokens[i] = token_bytes(name);
                me.visible += 1;
            }
        }
    }
    let (mut rank, mut size) = (0, 0);
    let mut shadow: Handle = 0;
    let mut world_group: Handle = 0;
    let bytes = std::mem::size_of::<Record>() as c_int;
    // SAFETY: MPI is initialised; valid buffers and out-pointers; every rank makes the same calls.
    let ok = unsafe {
        (p.comm_rank)(abi.comm_world, &mut rank) == 0
            && (p.comm_size)(abi.comm_world, &mut size) == 0
            && {
                let mut all = vec![me; size as usize];
                let rc = (p.allgather)((&me as *const Record).cast(), bytes, abi.byte, all.as_mut_ptr().cast(), bytes, abi.byte, abi.comm_world);
                if rc == 0 && (p.comm_dup)(abi.comm_world, &mut shadow) == 0 && (p.comm_group)(abi.comm_world, &mut world_group) == 0 {
                    let shared_gpu = all.iter().map(|_| AtomicBool::new(false)).collect();
                    let _ = PEERS.set(Peers { rank, records: all, shadow, world_group, shared_gpu });
                    true
                } else {
                    false
                }
            }
    };
    if !ok {
        log::warn(format_args!("the CUDA IPC handshake failed; device messages are staged through host memory"));
    }
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
