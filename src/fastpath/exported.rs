//! The sender's side: device memory of cudampi's own that peers map over IPC.
//!
//! A device message taking the fast path is copied into a block of this memory on its own GPU,
//! and the send returns at once: the program may reuse its buffer, and no rank ever waits for
//! another to take the data (a receiver may be anywhere, in `MPI_Barrier` say). The receiver
//! copies the data out when its receive completes and sends the block back with a release on
//! the private communicator; the sender collects releases whenever it looks for a free block.
//!
//! Blocks are carved from a few large arenas, each exported once and mapped once by each
//! receiver, so messages of every size share the same memory. Only cudampi's arenas are ever
//! exported, never the program's buffers, so no mapping outlives the memory it maps. Arenas
//! are kept, within `CUDAMPI_IPC_POOL_BYTES`, until `MPI_Finalize`; a message that finds no
//! room waits while receivers give blocks back (`wait_for_room`), else takes the other paths.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use super::envelope::{self, Envelope};
use super::patience::Patience;
use super::peers;
use crate::base::config;
use crate::cuda::copy::check;
use crate::cuda::driver::{self, CUdeviceptr, IpcMemHandle};
use crate::cuda::{CudaError, Device, InContext};
use crate::mpi::abi::{self, Handle};
use crate::mpi::real;

/// Tag of releases on the private communicator.
pub const RELEASE_TAG: c_int = 1;
/// Set in a release's offset when the receiver copied on the sender's GPU (offsets stay far
/// below it).
pub const SAME_GPU: u64 = 1 << 63;

/// Smallest arena: the first messages of a run reserve room for the next ones.
const MIN_ARENA: usize = 64 << 20;
/// Arena sizes are multiples of this (the driver's allocation granularity).
const ARENA_GRAIN: usize = 2 << 20;
/// Block sizes and offsets are multiples of this, so copies stay aligned.
const BLOCK_GRAIN: usize = 4096;

fn round_up(n: usize, grain: usize) -> usize {
    n.div_ceil(grain) * grain
}

struct Arena {
    id: u64,
    ordinal: i32,
    ptr: CUdeviceptr,
    handle: IpcMemHandle,
    /// Free ranges `(offset, len)`, sorted and never adjacent.
    free: Vec<(usize, usize)>,
}

impl Arena {
    /// First fit.
    fn carve(&mut self, len: usize) -> Option<usize> {
        let i = self.free.iter().position(|&(_, l)| l >= len)?;
        let (at, l) = self.free[i];
        if l == len {
            self.free.remove(i);
        } else {
            self.free[i] = (at + len, l - len);
        }
        Some(at)
    }

    /// Returns a block, merging it with its free neighbours.
    fn give_back(&mut self, at: usize, len: usize) {
        let i = self.free.partition_point(|&(o, _)| o < at);
        self.free.insert(i, (at, len));
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
    }
}

/// A block out with a receiver.
struct Block {
    arena: u64,
    offset: usize,
    len: usize,
    /// The envelope naming this block, only kept alive: it must outlive the send that carries
    /// it, and the block stays out until the receiver has read the envelope. A block holding a
    /// withdrawn direct message is named in the sender's slot instead.
    _envelope: Option<Box<[u8; envelope::BYTES]>>,
}

struct Exported {
    arenas: Vec<Arena>,
    out: Vec<Block>,
    total: usize,
    next_id: u64,
    /// The posted receive for releases, and where it lands.
    release: Option<Handle>,
    /// In the static, so its address stays put while the receive is posted.
    release_buf: [u64; 2],
}

// SAFETY: device addresses and MPI handles, used under the mutex.
unsafe impl Send for Exported {}

static EXPORTED: Mutex<Exported> =
    Mutex::new(Exported { arenas: Vec::new(), out: Vec::new(), total: 0, next_id: 1, release: None, release_buf: [0; 2] });

fn exported() -> MutexGuard<'static, Exported> {
    EXPORTED.lock().unwrap_or_else(|e| e.into_inner())
}

impl Exported {
    /// Takes back every block whose release has arrived, and keeps a receive posted.
    fn collect_releases(&mut self) {
        let (Some(p), Some(peers)) = (real::pmpi(), peers::get()) else { return };
        let abi = abi::get();
        loop {
            if let Some(mut req) = self.release {
                let (mut flag, mut status) = (0, abi::Status::zeroed());
                // SAFETY: the receive this module posted; release_buf stays allocated.
                if unsafe { (p.test)((&mut req as *mut Handle).cast(), &mut flag, status.as_mut_ptr()) } != 0 || flag == 0 {
                    return;
                }
                let [arena, word] = self.release_buf;
                let offset = word & !SAME_GPU;
                // SAFETY: the status the completed receive filled.
                let (source, _) = unsafe { abi.status_source_tag(status.as_mut_ptr()) };
                peers.set_shares_gpu(source, word & SAME_GPU != 0);
                if let Some(i) = self.out.iter().position(|b| b.arena == arena && b.offset as u64 == offset) {
                    let b = self.out.swap_remove(i);
                    if let Some(a) = self.arenas.iter_mut().find(|a| a.id == b.arena) {
                        a.give_back(b.offset, b.len);
                    }
                }
                self.release = None;
            }
            let mut req: Handle = 0;
            // SAFETY: a 16-byte buffer that lives in the static; the private communicator.
            let rc = unsafe {
                (p.irecv)(self.release_buf.as_mut_ptr().cast(), 16, abi.byte, abi.any_source, RELEASE_TAG, peers.shadow, &mut req)
            };
            if rc != 0 {
                return;
            }
            self.release = Some(req);
        }
    }

    /// A free block of `len` bytes on GPU `ordinal`, adding an arena if the bound allows:
    /// (arena index, offset).
    fn block(&mut self, d: &driver::Driver, ordinal: i32, len: usize, bound: usize) -> Option<(usize, usize)> {
        for (i, a) in self.arenas.iter_mut().enumerate() {
            if a.ordinal == ordinal {
                if let Some(at) = a.carve(len) {
                    return Some((i, at));
                }
            }
        }
        let mut size = round_up(len, ARENA_GRAIN).max(MIN_ARENA);
        if self.total + size > bound {
            size = round_up(len, ARENA_GRAIN);
        }
        if self.total + size > bound {
            return None;
        }
        let mut arena = allocate(d, ordinal, size).ok()?;
        arena.id = self.next_id;
        self.next_id += 1;
        self.total += size;
        let at = arena.carve(len)?;
        self.arenas.push(arena);
        Some((self.arenas.len() - 1, at))
    }
}

impl Exported {
    /// Waits for a block of `len` bytes while receivers keep giving blocks back: a window of
    /// messages larger than the pool then crosses over IPC as fast as the receiver copies,
    /// instead of the messages past the pool being staged. Blocks come back only from the
    /// receivers' completion calls, so a receiver busy elsewhere (or sending to this rank and
    /// waiting just as well) gives none: after `CUDAMPI_PIPELINE_WAIT` without one the send
    /// takes the other paths, and the next waits are shorter, down to 1/64 of it, until a wait
    /// is rewarded again. A send never waits on its peer for long.
    fn wait_for_room(&mut self, d: &driver::Driver, ordinal: i32, len: usize) -> Option<(usize, usize)> {
        if self.out.is_empty() || len > config::get().ipc_pool_bytes {
            return None;
        }
        let wait = PATIENCE.now();
        let mut since = Instant::now();
        loop {
            let out = self.out.len();
            self.collect_releases();
            if self.out.len() < out {
                if let Some(b) = self.block(d, ordinal, len, config::get().ipc_pool_bytes) {
                    PATIENCE.rewarded();
                    return Some(b);
                }
                since = Instant::now();
            } else if self.out.is_empty() || since.elapsed() > wait {
                PATIENCE.unrewarded(wait);
                return None;
            }
            std::hint::spin_loop();
        }
    }
}

/// How long the next send waits for exported memory without a block coming back.
static PATIENCE: Patience = Patience::new();

/// A buffer holding a copy of the message, ready to be named in an envelope.
pub struct Outgoing {
    pub envelope: *const c_void,
}

/// Copies `bytes` of device memory at `src` into a free exported block on its GPU: (arena
/// index, offset, block length). `bound`: the most exported memory this may take, beyond which
/// it waits for blocks to come back (`None` when none does).
fn place(ex: &mut Exported, d: &driver::Driver, dev: &Device, src: *const c_void, bytes: usize, bound: usize) -> Option<Result<(usize, usize, usize), CudaError>> {
    ex.collect_releases();
    let len = round_up(bytes.max(1), BLOCK_GRAIN);
    let (i, offset) = match ex.block(d, dev.ordinal, len, config::get().ipc_pool_bytes) {
        Some(b) => b,
        None => match ex.wait_for_room(d, dev.ordinal, len) {
            Some(b) => b,
            None => ex.block(d, dev.ordinal, len, bound)?,
        },
    };
    let arena = &mut ex.arenas[i];
    let copied = (|| {
        let ctx = InContext::enter(dev)?;
        // SAFETY: both ranges hold `bytes` bytes of device memory (the caller's span, the block).
        check("cuMemcpyDtoD", unsafe { (d.memcpy_dtod)(arena.ptr + offset as u64, src as CUdeviceptr, bytes) })?;
        // A device-to-device copy returns before it is done; the program may reuse its buffer
        // as soon as the send returns, and the receiver reads the block at any time.
        // SAFETY: the legacy default stream of the current context.
        check("cuStreamSynchronize", unsafe { (d.stream_synchronize)(std::ptr::null_mut()) })?;
        drop(ctx);
        Ok(())
    })();
    if let Err(e) = copied {
        arena.give_back(offset, len);
        return Some(Err(e));
    }
    Some(Ok((i, offset, len)))
}

/// Copies `bytes` of device memory at `src` into a free exported buffer on its GPU and writes
/// the envelope naming it. `None`: no buffer within the bound, or a CUDA failure, and the
/// message takes the staged path instead.
pub fn offer(dev: &Device, src: *const c_void, bytes: usize, sender: c_int, token: [u8; envelope::TOKEN_BYTES]) -> Option<Result<Outgoing, CudaError>> {
    let d = driver::get()?;
    let mut ex = exported();
    let (i, offset, len) = match place(&mut ex, d, dev, src, bytes, config::get().ipc_pool_bytes)? {
        Ok(b) => b,
        Err(e) => return Some(Err(e)),
    };
    let arena = &ex.arenas[i];
    let mut envelope = Box::new([0u8; envelope::BYTES]);
    Envelope::new(sender as u32, envelope::IPC, bytes as u64, arena.id, offset as u64, arena.handle.0, token).write(&mut envelope);
    let at = envelope.as_ptr().cast();
    let id = arena.id;
    ex.out.push(Block { arena: id, offset, len, _envelope: Some(envelope) });
    Some(Ok(Outgoing { envelope: at }))
}

/// A direct message the sender withdrew: its data copied into an exported block, beyond the
/// pool's bound if need be (the receiver is waiting for it): (arena id, offset, handle). The
/// receiver releases the block as it does any other.
pub fn withdrawn(dev: &Device, src: *const c_void, bytes: usize) -> Result<(u64, u64, [u8; 64]), CudaError> {
    let d = driver::get().ok_or(CudaError { call: "cuInit", code: 3 })?;
    let mut ex = exported();
    let (i, offset, len) = place(&mut ex, d, dev, src, bytes, usize::MAX).ok_or(CudaError { call: "cuMemAlloc", code: 2 })??;
    let arena = &ex.arenas[i];
    let (id, handle) = (arena.id, arena.handle.0);
    ex.out.push(Block { arena: id, offset, len, _envelope: None });
    Ok((id, offset as u64, handle))
}

fn allocate(d: &driver::Driver, ordinal: i32, bytes: usize) -> Result<Arena, CudaError> {
    let _ctx = InContext::enter(&Device::primary(ordinal))?;
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer, in the GPU's primary context.
    check("cuMemAlloc", unsafe { (d.mem_alloc)(&mut ptr, bytes) })?;
    let mut handle = IpcMemHandle([0; 64]);
    // SAFETY: an allocation of this context.
    if let Err(e) = check("cuIpcGetMemHandle", unsafe { (d.ipc_get_mem_handle)(&mut handle, ptr) }) {
        // SAFETY: just allocated, never shared.
        unsafe { (d.mem_free)(ptr) };
        return Err(e);
    }
    Ok(Arena { id: 0, ordinal, ptr, handle, free: vec![(0, bytes)] })
}

/// Exported bytes held, and how many blocks are out with receivers.
pub fn usage() -> (usize, usize) {
    let ex = exported();
    (ex.total, ex.out.len())
}

/// Takes the releases still owed to this rank (`MPI_Finalize`, once every rank has reached
/// it: every receiver has sent its releases by then), for at most `wait`: a block whose
/// message was never received (or whose send was cancelled) is never released.
pub fn take_releases(wait: std::time::Duration) {
    let since = std::time::Instant::now();
    loop {
        let mut ex = exported();
        ex.collect_releases();
        if ex.out.is_empty() || since.elapsed() > wait {
            return;
        }
        drop(ex);
        std::thread::yield_now();
    }
}

/// Cancels the release receive and frees every arena (`MPI_Finalize`, after every rank has
/// reached it, so no receiver still reads one).
pub fn release_all() {
    let mut ex = exported();
    if let (Some(mut req), Some(p)) = (ex.release.take(), real::pmpi()) {
        let mut status = abi::Status::zeroed();
        // SAFETY: the receive this module posted; cancelled, then completed.
        unsafe {
            (p.cancel)((&mut req as *mut Handle).cast());
            (p.wait)((&mut req as *mut Handle).cast(), status.as_mut_ptr());
        }
    }
    ex.out.clear();
    let arenas = std::mem::take(&mut ex.arenas);
    ex.total = 0;
    let Some(d) = driver::get() else { return };
    for a in arenas {
        if let Ok(_ctx) = InContext::enter(&Device::primary(a.ordinal)) {
            // SAFETY: an allocation of this module, no longer named in any pending envelope.
            unsafe { (d.mem_free)(a.ptr) };
        }
    }
}
