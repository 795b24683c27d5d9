//! `CUDAMPI_*` environment variables, read once on the first MPI call (never before `main`).

use std::sync::OnceLock;

#[derive(Debug)]
pub struct Config {
    /// `CUDAMPI_DEBUG=1`: one line per device-buffer call on stderr.
    pub debug: bool,
    /// `CUDAMPI_STATS=1`: per-rank counters printed at `MPI_Finalize`.
    pub stats: bool,
    /// `CUDAMPI_THREAD_MULTIPLE=1`: `MPI_Init` and `MPI_Init_thread` ask the library for
    /// `MPI_THREAD_MULTIPLE`, which the enqueue calls' progress thread needs (`streams`).
    pub thread_multiple: bool,
    /// `CUDAMPI_ENQUEUE=ordered` or `immediate`: whether the enqueue calls return at once with
    /// the operation queued in the stream's order, or synchronise the stream and make the
    /// operation in the call (`streams`); unset, immediate.
    pub enqueue_immediate: Option<bool>,
    /// `CUDAMPI_ENQUEUE=nccl`: enqueued point-to-point calls on device memory between ranks
    /// with GPUs of their own run on NCCL on the program's stream (matched in the order each
    /// pair posts them, as NCCL matches); the others are made in the call.
    pub enqueue_nccl: bool,
    /// `CUDAMPI_POOL_BYTES`: most pinned host memory the staging pool may hold at once.
    pub pool_bytes: usize,
    /// `CUDAMPI_DISABLE=1`: never look at CUDA; every buffer goes straight to MPI.
    pub disabled: bool,
    /// `CUDAMPI_MANAGED=stage`: copy managed memory like device memory instead of letting MPI
    /// read it in place (page faults migrate it then).
    pub stage_managed: bool,
    /// `CUDAMPI_HOST_CACHE=0`: ask the driver about every pointer outside the heap, stack and
    /// program data instead of remembering plain host pages (see `cuda/mapwatch.rs`).
    pub no_host_cache: bool,
    /// `CUDAMPI_ORDERED_RECV_BYTES`: received messages up to this size reach device memory the
    /// way `cudaMemcpy` from pageable memory puts them there: ordered on the legacy default
    /// stream, not waited for (see `InContext::runs_to_device`). 0, the default, waits for every copy.
    pub ordered_recv_bytes: usize,
    /// On unless `CUDAMPI_IPC=0` (or `CUDAMPI_DISABLE=1`): device messages between ranks of one
    /// node go GPU to GPU over CUDA IPC (`fastpath/`). Every rank of the job must set it alike: the
    /// handshake at `MPI_Init` stops a job whose ranks differ.
    pub ipc: bool,
    /// On unless `CUDAMPI_PACK_KERNEL=0`: a datatype of many blocks crosses between device
    /// memory and its staging buffer through cudampi's pack kernel (`cuda::pack`), in one
    /// launch, instead of one copy per block or a copy of its whole span.
    pub pack_kernel: bool,
    /// `CUDAMPI_IPC_BYTES`: smallest message that takes the IPC path.
    pub ipc_bytes: usize,
    /// `CUDAMPI_IPC_AWAITED_BYTES`: smallest message that takes the IPC path, below
    /// `CUDAMPI_IPC_BYTES`, to a rank with a GPU of its own that is already waiting for it in a
    /// receive (`fastpath::claims::Listening`).
    pub ipc_awaited_bytes: usize,
    /// `CUDAMPI_IPC_SAME_GPU_BYTES`: smallest message that takes the IPC path to a rank whose
    /// last IPC copy ran on the sender's GPU (two processes taking turns on one GPU).
    pub ipc_same_gpu_bytes: usize,
    /// `CUDAMPI_IPC_POOL_BYTES`: most device memory a rank exports for IPC at once.
    pub ipc_pool_bytes: usize,
    /// On unless `CUDAMPI_IPC_DIRECT=0`: an IPC receiver copies straight from the program's
    /// own buffer when it can (`fastpath/direct.rs`), and the send completes when it has.
    /// Off, the sender first copies every IPC message into memory of its own.
    pub ipc_direct: bool,
    /// `CUDAMPI_IPC_PUSH=1`: a device message smaller than an envelope, to a rank with a GPU of
    /// its own that waits for it in a blocking receive, is also written straight into the
    /// receiver's buffer, which then needs no copy of its own (`fastpath/pushed.rs`). Off until
    /// its latency is measured on GPUs against staging.
    pub ipc_push: bool,
    /// On unless `CUDAMPI_PIPELINE=0` (or `CUDAMPI_DISABLE=1`): large device messages cross in
    /// chunks, so that the copies out of and into device memory overlap the transfer
    /// (`fastpath/pipeline.rs`). Like `CUDAMPI_IPC`, every rank must set it alike.
    pub pipeline: bool,
    /// `CUDAMPI_PIPELINE_BYTES`: smallest message sent in chunks.
    pub pipeline_bytes: usize,
    /// `CUDAMPI_PIPELINE_CHUNK`: most bytes per chunk (`fastpath::pipeline::chunk_for`).
    pub pipeline_chunk: usize,
    /// `CUDAMPI_PIPELINE_WAIT`: microseconds a chunked send waits for a pinned buffer while
    /// none of its chunks in flight is taken, before it stages through pageable memory; and an
    /// IPC send for exported memory while no receiver gives a block back.
    pub pipeline_wait_us: u64,
    /// On unless `CUDAMPI_NCCL=0` (or `CUDAMPI_DISABLE=1`): blocking collectives on device
    /// buffers run on NCCL where every rank can (`engine/`). Every rank must set it alike.
    pub nccl: bool,
    /// `CUDAMPI_NCCL_LIB`: the NCCL library to load instead of `libnccl.so.2` from the
    /// loader's search path.
    pub nccl_lib: Option<String>,
    /// `CUDAMPI_NCCL_BYTES`: smallest collective (the largest buffer a rank passes) that NCCL
    /// runs, a sixteenth of it per rank for `MPI_Allgather` and `MPI_Reduce_scatter`
    /// (`engine::Job::threshold`); smaller ones are staged, which is faster there.
    pub nccl_bytes: usize,
    /// `CUDAMPI_HANDSHAKE_WAIT`: seconds the handshake at `MPI_Init` waits for the other ranks
    /// before it stops the job (a rank that does not load cudampi never answers), and that an
    /// NCCL collective may take before it is aborted.
    pub handshake_wait_s: u64,
    /// `CUDAMPI_RMA_RING`: bytes of the mailbox ring each process whose part of a window is
    /// device memory exposes where peers cannot map that memory (`handlers/served.rs`). `0`
    /// gives such windows a host public copy instead, synchronised whole at every epoch.
    pub rma_ring: usize,
}

/// 1 MiB chunks at most: a 16 MiB message crosses in 16.
pub const DEFAULT_PIPELINE_CHUNK: usize = 1 << 20;

/// 1 MiB, in four chunks of 256 KiB: with each rank a node of its own (2 x H200, Open MPI
/// 4.1.6, 2026-11-28, run ND9), 64 messages of 1 MiB in flight moved 0.90x the host MPI's
/// bandwidth one way and 0.98x both ways in chunks of 256 KiB, 0.75x and 0.78x staged whole.
/// A message of one chunk has no copy to overlap and would pay the envelope on top of plain
/// staging (one H100 shared by two ranks, 2026-11-25: 1 MiB in one chunk 207-228 us one way,
/// staged 197-210 us).
pub const DEFAULT_PIPELINE_BYTES: usize = 1 << 20;

/// 20 ms: a receiver taking chunks takes one every few hundred microseconds, but one that
/// takes them only between its own sends (two ranks sending each other windows larger than the
/// pool) can leave them for milliseconds. On an H100 shared by two ranks (2026-11-23),
/// `bench/bw -b` at 16 MiB reached 2.3, 3.4 and 6.3 GB/s with waits of 1, 5 and 20 ms, and
/// one-way 16 MiB 5.4, 6.2 and 6.7 GB/s (host MPI 5.9-6.8). A receiver busy elsewhere costs a
/// sender one such wait, not one per message.
pub const DEFAULT_PIPELINE_WAIT_US: u64 = 20_000;

/// 16 KiB: with one GPU per rank (2 x H200, 2026-11-27, call G1), a message copied straight
/// from the sender's buffer took 14.1-15.7 us one way from 4 KiB to 64 KiB, where staging took
/// 22.4-28.9 us from 8 KiB to 32 KiB, and windows of them moved 2.4-3.2 times staging's bytes.
/// But such a send waits until its receiver has copied, where the MPIs send small messages
/// between ranks of a node eagerly: two ranks that both send before they receive complete with
/// 4000 bytes on Open MPI 4 and 5, 4 KiB on MPICH 5 and 8 KiB on MPICH 4.0, and deadlock from
/// 8300 bytes on all of them (the stand-in driver, staged device buffers). Over IPC those
/// sends would each wait out their patience (`CUDAMPI_PIPELINE_WAIT`): 8 KiB on MPICH 4.0 took
/// 2.2 ms per exchange against 58 us staged. So IPC starts above every eager size.
pub const DEFAULT_IPC_BYTES: usize = 16 << 10;
/// Below `CUDAMPI_IPC_BYTES`, a message goes over IPC only to a receiver already waiting in a
/// receive, which copies it at once: the send completes as soon as an eager one would. 1056
/// bytes, the envelope's size: a smaller receive cannot hold one.
pub const DEFAULT_IPC_AWAITED_BYTES: usize = 1056;

/// 1 MiB: two ranks sharing one GPU take turns on it, and an IPC message makes them switch, so
/// a ping-pong costs about 150 us one way at every size up to 4 MiB (the manual IPC floor, one
/// H100, 2026-11-25). Staged it costs 32 us at 64 KiB and 200-250 us at 1 MiB, while windows of
/// messages gain from IPC from 64 KiB on (the receiver copies a whole window in one turn):
/// from 1 MiB IPC wins in both shapes.
pub const DEFAULT_IPC_SAME_GPU_BYTES: usize = 1 << 20;

/// 1 GiB per rank: a window of 16 messages of 64 MiB in flight.
pub const DEFAULT_IPC_POOL_BYTES: usize = 1 << 30;

/// 8 KiB: NCCL's own collectives take 17-25 us at any size up to 32 KiB (2 x H100, 4 x H100,
/// 2 x H200, NCCL 2.28, 2026-11-28); staging 2 KiB takes about as long and 8 KiB longer at 2
/// and 4 ranks (4 ranks, `MPI_Allreduce` of 8 KiB: 29.9 us staged, 21.7 NCCL's own call).
pub const DEFAULT_NCCL_BYTES: usize = 8 << 10;

/// 60 s: ranks leave the library's `MPI_Init` at nearly the same time, but an oversubscribed
/// node or a slow file system can hold one back for seconds.
pub const DEFAULT_HANDSHAKE_WAIT_S: u64 = 60;
/// The mailbox ring of a served window: 16 MiB, entries of up to 4 MiB.
pub const DEFAULT_RMA_RING: usize = 16 << 20;

/// 256 MiB: enough to stage the largest messages whole on typical codes, small next to host RAM.
pub const DEFAULT_POOL_BYTES: usize = 256 << 20;

impl Config {
    /// The smallest message a sender takes over IPC: from `CUDAMPI_IPC_SAME_GPU_BYTES` where
    /// the two processes take turns on one GPU (`gpu_shared`), else from `CUDAMPI_IPC_BYTES`.
    /// Senders choose by it and receivers bound what may reach them by it.
    pub fn ipc_from(&self, gpu_shared: bool) -> usize {
        match gpu_shared {
            true => self.ipc_bytes.max(self.ipc_same_gpu_bytes),
            false => self.ipc_bytes,
        }
    }

    /// The smallest message a sender may take over IPC when its receiver awaits it: from
    /// `CUDAMPI_IPC_AWAITED_BYTES`, and where the two processes take turns on one GPU not below
    /// `CUDAMPI_IPC_SAME_GPU_BYTES` (with the defaults, from 1 MiB as before).
    pub fn ipc_awaited_from(&self, gpu_shared: bool) -> usize {
        let awaited = match gpu_shared {
            true => self.ipc_awaited_bytes.max(self.ipc_same_gpu_bytes),
            false => self.ipc_awaited_bytes,
        };
        self.ipc_from(gpu_shared).min(awaited)
    }
}

/// The bounce buffer of an ordered receive is one per thread and kept for the thread's life.
pub const MAX_ORDERED_RECV_BYTES: usize = 64 << 10;

static CONFIG: OnceLock<Config> = OnceLock::new();

pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| {
        let disabled = flag("CUDAMPI_DISABLE");
        let pipeline_chunk = bytes("CUDAMPI_PIPELINE_CHUNK").unwrap_or(DEFAULT_PIPELINE_CHUNK).clamp(64 << 10, 1 << 30);
        Config {
        debug: flag("CUDAMPI_DEBUG"),
        stats: flag("CUDAMPI_STATS"),
        thread_multiple: flag("CUDAMPI_THREAD_MULTIPLE"),
        enqueue_immediate: match std::env::var("CUDAMPI_ENQUEUE").as_deref() {
            Ok("immediate" | "nccl") => Some(true),
            Ok("ordered") => Some(false),
            _ => None,
        },
        enqueue_nccl: matches!(std::env::var("CUDAMPI_ENQUEUE").as_deref(), Ok("nccl")),
        pool_bytes: bytes("CUDAMPI_POOL_BYTES").unwrap_or(DEFAULT_POOL_BYTES),
        disabled,
        stage_managed: matches!(std::env::var("CUDAMPI_MANAGED").as_deref(), Ok("stage")),
        no_host_cache: matches!(std::env::var("CUDAMPI_HOST_CACHE").as_deref(), Ok("0" | "no" | "off")),
        ordered_recv_bytes: bytes("CUDAMPI_ORDERED_RECV_BYTES").unwrap_or(0).min(MAX_ORDERED_RECV_BYTES),
        ipc: !disabled && !off("CUDAMPI_IPC"),
        pack_kernel: !off("CUDAMPI_PACK_KERNEL"),
        ipc_bytes: bytes("CUDAMPI_IPC_BYTES").unwrap_or(DEFAULT_IPC_BYTES),
        ipc_awaited_bytes: bytes("CUDAMPI_IPC_AWAITED_BYTES").unwrap_or(DEFAULT_IPC_AWAITED_BYTES),
        ipc_same_gpu_bytes: bytes("CUDAMPI_IPC_SAME_GPU_BYTES").unwrap_or(DEFAULT_IPC_SAME_GPU_BYTES),
        ipc_pool_bytes: bytes("CUDAMPI_IPC_POOL_BYTES").unwrap_or(DEFAULT_IPC_POOL_BYTES),
        ipc_direct: !off("CUDAMPI_IPC_DIRECT"),
        ipc_push: flag("CUDAMPI_IPC_PUSH"),
        pipeline: !disabled && !off("CUDAMPI_PIPELINE"),
        pipeline_bytes: bytes("CUDAMPI_PIPELINE_BYTES").unwrap_or(DEFAULT_PIPELINE_BYTES),
        pipeline_chunk,
        pipeline_wait_us: whole("CUDAMPI_PIPELINE_WAIT").unwrap_or(DEFAULT_PIPELINE_WAIT_US),
        nccl: !disabled && !off("CUDAMPI_NCCL"),
        nccl_lib: std::env::var("CUDAMPI_NCCL_LIB").ok().filter(|s| !s.is_empty()),
        nccl_bytes: bytes("CUDAMPI_NCCL_BYTES").unwrap_or(DEFAULT_NCCL_BYTES),
        handshake_wait_s: whole("CUDAMPI_HANDSHAKE_WAIT").unwrap_or(DEFAULT_HANDSHAKE_WAIT_S).max(1),
        rma_ring: match bytes("CUDAMPI_RMA_RING").unwrap_or(DEFAULT_RMA_RING) {
            0 => 0,
            n => n.clamp(64 << 10, 1 << 30) / 64 * 64,
        },
        }
    })
}

/// A switch that is on unless set to `0`, `no`, `false` or `off`.
fn off(name: &str) -> bool {
    matches!(std::env::var(name).as_deref(), Ok("0" | "no" | "false" | "off"))
}

fn flag(name: &str) -> bool {
    matches!(std::env::var(name).as_deref(), Ok("1" | "yes" | "true" | "on"))
}

/// Accepts plain bytes or a K/M/G suffix (powers of 1024); anything else is reported and ignored.
fn bytes(name: &str) -> Option<usize> {
    let text = std::env::var(name).ok()?;
    let parsed = parse_bytes(&text);
    if parsed.is_none() {
        crate::base::log::warn(format_args!("ignoring {name}={text}: expected a size such as 268435456 or 256M"));
    }
    parsed
}

/// A whole number (of microseconds or seconds, as the variable says); anything else is
/// reported and ignored.
fn whole(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let parsed = text.trim().parse::<u64>().ok();
    if parsed.is_none() {
        crate::base::log::warn(format_args!("ignoring {name}={text}: expected a whole number such as 5000"));
    }
    parsed
}

pub fn parse_bytes(text: &str) -> Option<usize> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'k' | 'K') => (&t[..i], 10),
        (i, 'm' | 'M') => (&t[..i], 20),
        (i, 'g' | 'G') => (&t[..i], 30),
        _ => (t, 0),
    };
    digits.trim().parse::<usize>().ok()?.checked_mul(1usize << shift)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("256M"), Some(256 << 20));
        assert_eq!(parse_bytes(" 2g "), Some(2 << 30));
        assert_eq!(parse_bytes("1k"), Some(1024));
        assert_eq!(parse_bytes("M"), None);
        assert_eq!(parse_bytes("-5"), None);
        assert_eq!(parse_bytes("lots"), None);
    }
}
