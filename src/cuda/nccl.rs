//! NCCL, loaded at run time as the driver is: `libnccl.so.2` from the loader's search path
//! (PyTorch and NVIDIA's wheels bring one, and a Python process that imported PyTorch has it
//! loaded already), or the file `CUDAMPI_NCCL_LIB` names. Only a rank that is about to run a
//! collective on device memory loads it: the library is large, and a host program must not pay
//! for it. Not found, or `CUDAMPI_NCCL=0`: [`get`] answers `None` and nothing changes.
//!
//! A [`Comm`] is one NCCL communicator with the stream its work runs on. The layers above
//! describe a collective as [`Op`]s and never name an NCCL call. Types and enums come from
//! cudarc's bindings; result codes are read as plain integers, as the driver's are.
//!
//! Ordering, the same as the staged copies give (`copy.rs`): a collective starts after all
//! work the program issued before the call to the legacy default stream and to blocking
//! streams of the buffers' context (an event recorded on the legacy default stream, which the
//! communicator's stream waits for), and the caller waits for it to finish, so its result is
//! in place for every stream when the MPI call returns.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use cudarc::nccl::sys::{ncclDataType_t as DataType, ncclRedOp_t as RedOp};
use cudarc::nccl::sys::{ncclComm_t, ncclUniqueId};
use libloading::os::unix::{Library, Symbol};

use super::copy::{check, CudaError, InContext};
use super::pointer::Device;
use crate::base::{config, log};

type NcclResult = c_uint;
type Stream = *mut c_void;
const SUCCESS: NcclResult = 0;
/// `ncclInProgress`: only a nonblocking communicator answers it, and cudampi makes none.
const IN_PROGRESS: NcclResult = 7;
/// `CUDA_ERROR_NOT_READY`.
const NOT_READY: c_uint = 600;
/// `CU_EVENT_DISABLE_TIMING`.
const EVENT_NO_TIMING: c_uint = 2;

macro_rules! nccl_api {
    ($($field:ident = $sym:literal : fn($($arg:ty),*);)*) => {
        /// Entry points of the loaded libnccl.
        pub struct Nccl {
            _lib: Library,
            $($field: unsafe extern "C" fn($($arg),*) -> NcclResult,)*
            get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
            /// `NCCL_VERSION_CODE` of the library, e.g. 22803 for 2.28.3.
            pub version: c_int,
        }

        impl Nccl {
            fn resolve(lib: Library) -> Result<Nccl, &'static str> {
                $(
                    // SAFETY: the symbol's C signature is the declared one (nccl.h of NCCL 2.x).
                    let $field = unsafe {
                        let s: Symbol<unsafe extern "C" fn($($arg),*) -> NcclResult> =
                            lib.get(concat!($sym, "\0").as_bytes()).map_err(|_| $sym)?;
                        *s
                    };
                )*
                // SAFETY: `const char *ncclGetErrorString(ncclResult_t)`.
                let get_error_string = unsafe {
                    let s: Symbol<unsafe extern "C" fn(NcclResult) -> *const c_char> =
                        lib.get(b"ncclGetErrorString\0").map_err(|_| "ncclGetErrorString")?;
                    *s
                };
                Ok(Nccl { _lib: lib, $($field,)* get_error_string, version: 0 })
            }
        }
    };
}

nccl_api! {
    get_version = "ncclGetVersion": fn(*mut c_int);
    get_unique_id = "ncclGetUniqueId": fn(*mut ncclUniqueId);
    comm_init_rank = "ncclCommInitRank": fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int);
    comm_abort = "ncclCommAbort": fn(ncclComm_t);
    comm_get_async_error = "ncclCommGetAsyncError": fn(ncclComm_t, *mut NcclResult);
    all_reduce = "ncclAllReduce": fn(*const c_void, *mut c_void, usize, DataType, RedOp, ncclComm_t, Stream);
    broadcast = "ncclBroadcast": fn(*const c_void, *mut c_void, usize, DataType, c_int, ncclComm_t, Stream);
    reduce = "ncclReduce": fn(*const c_void, *mut c_void, usize, DataType, RedOp, c_int, ncclComm_t, Stream);
    all_gather = "ncclAllGather": fn(*const c_void, *mut c_void, usize, DataType, ncclComm_t, Stream);
    reduce_scatter = "ncclReduceScatter": fn(*const c_void, *mut c_void, usize, DataType, RedOp, ncclComm_t, Stream);
    send = "ncclSend": fn(*const c_void, usize, DataType, c_int, ncclComm_t, Stream);
    recv = "ncclRecv": fn(*mut c_void, usize, DataType, c_int, ncclComm_t, Stream);
    group_start = "ncclGroupStart": fn();
    group_end = "ncclGroupEnd": fn();
}

static NCCL: OnceLock<Option<Nccl>> = OnceLock::new();

/// The library, loaded on the first call; `None` where it is off or cannot be loaded.
pub fn get() -> Option<&'static Nccl> {
    NCCL.get_or_init(load).as_ref()
}

/// [`get`] for the calls that need the library: its absence is an error (`ncclSystemError`).
fn loaded() -> Result<&'static Nccl, Error> {
    get().ok_or(Error::Nccl { call: "dlopen", code: 2 })
}

fn load() -> Option<Nccl> {
    let cfg = config::get();
    if !cfg.nccl {
        return None;
    }
    let name = cfg.nccl_lib.as_deref().unwrap_or("libnccl.so.2");
    // NCCL 2.22 and later connect a communicator's rings and trees at its first collective of
    // each kind, in the host call that queues it, which waits for the other ranks' calls: two
    // communicators whose nonblocking collectives ranks start in opposite orders (which MPI
    // allows) would wait for each other there. Connected at creation instead, which every rank
    // makes at one agreement (`Comm::create` also connects the point-to-point channels). The
    // program's own setting wins.
    // SAFETY: NUL-terminated strings; set once, before NCCL is loaded.
    unsafe { libc::setenv(c"NCCL_RUNTIME_CONNECT".as_ptr(), c"0".as_ptr(), 0) };
    // SAFETY: loading NCCL runs its constructors, which only set up its own state.
    let lib = match unsafe { Library::open(Some(name), libc::RTLD_NOW | libc::RTLD_LOCAL) } {
        Ok(lib) => lib,
        Err(e) => {
            // No NCCL is an ordinary setup, not an error: collectives stay staged.
            if cfg.debug || cfg.nccl_lib.is_some() {
                log::warn(format_args!("NCCL not loaded ({e}); device collectives are staged through host memory"));
            }
            return None;
        }
    };
    match Nccl::resolve(lib) {
        Ok(mut n) => {
            // SAFETY: a valid out-pointer.
            unsafe { (n.get_version)(&mut n.version) };
            if cfg.debug {
                log::debug(format_args!("NCCL {} loaded from {name}", n.version));
            }
            Some(n)
        }
        Err(sym) => {
            log::warn(format_args!("{name} lacks {sym}; device collectives are staged through host memory"));
            None
        }
    }
}

/// What failed: a driver call, an NCCL call (its name and result), or a collective that did
/// not finish within the patience given to [`Comm::wait`].
#[derive(Clone, Copy, Debug)]
pub enum Error {
    Cuda(CudaError),
    Nccl { call: &'static str, code: c_uint },
    Stalled(Duration),
}

impl From<CudaError> for Error {
    fn from(e: CudaError) -> Error {
        Error::Cuda(e)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Error::Cuda(e) => write!(f, "{} failed with {}", e.call, e.name()),
            Error::Nccl { call, code } => {
                let text = get().map(|n| {
                    // SAFETY: NCCL returns a static NUL-terminated string for any code.
                    let p = unsafe { (n.get_error_string)(code) };
                    if p.is_null() {
                        "unknown NCCL error".into()
                    } else {
                        // SAFETY: as above.
                        unsafe { CStr::from_ptr(p) }.to_string_lossy()
                    }
                });
                write!(f, "{call} failed with NCCL error {code} ({})", text.unwrap_or_default())
            }
            Error::Stalled(d) => write!(f, "an NCCL collective did not finish within {} s (a rank stopped?)", d.as_secs()),
        }
    }
}

fn nccl_check(call: &'static str, code: NcclResult) -> Result<(), Error> {
    match code {
        SUCCESS | IN_PROGRESS => Ok(()),
        code => Err(Error::Nccl { call, code }),
    }
}

/// `ncclUniqueId`: what one rank makes and every other rank of the communicator is given.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct UniqueId(pub [u8; 128]);

const _: () = assert!(std::mem::size_of::<UniqueId>() == std::mem::size_of::<ncclUniqueId>());

impl UniqueId {
    pub fn new() -> Result<UniqueId, Error> {
        let n = loaded()?;
        let mut id = UniqueId([0; 128]);
        // SAFETY: UniqueId has ncclUniqueId's size and layout (128 bytes).
        nccl_check("ncclGetUniqueId", unsafe { (n.get_unique_id)((&mut id as *mut UniqueId).cast()) })?;
        Ok(id)
    }
}

/// One collective, as the layers above describe it. Pointers are device memory of the
/// communicator's GPU; counts are elements of `DataType`.
#[derive(Clone, Copy)]
pub enum Op {
    AllReduce { send: *const c_void, recv: *mut c_void, count: usize, dtype: DataType, op: RedOp },
    Reduce { send: *const c_void, recv: *mut c_void, count: usize, dtype: DataType, op: RedOp, root: c_int },
    Broadcast { send: *const c_void, recv: *mut c_void, count: usize, dtype: DataType, root: c_int },
    AllGather { send: *const c_void, recv: *mut c_void, count: usize, dtype: DataType },
    ReduceScatter { send: *const c_void, recv: *mut c_void, count: usize, dtype: DataType, op: RedOp },
    Send { buf: *const c_void, count: usize, dtype: DataType, peer: c_int },
    Recv { buf: *mut c_void, count: usize, dtype: DataType, peer: c_int },
    /// A copy on the communicator's stream, after the group of NCCL operations it is queued with.
    Copy { dst: *mut c_void, src: *const c_void, bytes: usize },
    /// `bytes` from `src` copied into the communicator's own memory before the group, which
    /// then sends from that copy wherever a send reads this range: MPI's in-place all-to-all
    /// reads every block of the buffer its receives write.
    Snapshot { src: *const c_void, bytes: usize },
}

/// Bytes of one element of `t`.
pub fn type_bytes(t: DataType) -> usize {
    use DataType::*;
    match t {
        ncclInt8 | ncclUint8 => 1,
        ncclInt32 | ncclUint32 | ncclFloat32 => 4,
        ncclInt64 | ncclUint64 | ncclFloat64 => 8,
        _ => 2,
    }
}

impl Op {
    /// The memory the operation touches on a communicator of `ranks`: (address, bytes,
    /// written), read side first.
    pub fn buffers(&self, ranks: usize) -> [Option<(*const c_void, usize, bool)>; 2] {
        let b = |count: usize, t: DataType| count * type_bytes(t);
        let two = |send: *const c_void, sb: usize, recv: *mut c_void, rb: usize| [Some((send, sb, false)), Some((recv.cast_const(), rb, true))];
        match *self {
            Op::AllReduce { send, recv, count, dtype, .. } | Op::Reduce { send, recv, count, dtype, .. } | Op::Broadcast { send, recv, count, dtype, .. } => {
                two(send, b(count, dtype), recv, b(count, dtype))
            }
            Op::AllGather { send, recv, count, dtype } => two(send, b(count, dtype), recv, b(count, dtype) * ranks),
            Op::ReduceScatter { send, recv, count, dtype, .. } => two(send, b(count, dtype) * ranks, recv, b(count, dtype)),
            Op::Send { buf, count, dtype, .. } => [Some((buf, b(count, dtype), false)), None],
            Op::Recv { buf, count, dtype, .. } => [Some((buf.cast_const(), b(count, dtype), true)), None],
            Op::Copy { dst, src, bytes } => two(src, bytes, dst, bytes),
            Op::Snapshot { src, bytes } => [Some((src, bytes, false)), None],
        }
    }

    /// The same operation on memory moved by `to` (each address the operation names).
    pub fn moved(self, to: impl Fn(*const c_void) -> *const c_void) -> Op {
        let m = |p: *mut c_void| to(p.cast_const()).cast_mut();
        match self {
            Op::AllReduce { send, recv, count, dtype, op } => Op::AllReduce { send: to(send), recv: m(recv), count, dtype, op },
            Op::Reduce { send, recv, count, dtype, op, root } => Op::Reduce { send: to(send), recv: m(recv), count, dtype, op, root },
            Op::Broadcast { send, recv, count, dtype, root } => Op::Broadcast { send: to(send), recv: m(recv), count, dtype, root },
            Op::AllGather { send, recv, count, dtype } => Op::AllGather { send: to(send), recv: m(recv), count, dtype },
            Op::ReduceScatter { send, recv, count, dtype, op } => Op::ReduceScatter { send: to(send), recv: m(recv), count, dtype, op },
            Op::Send { buf, count, dtype, peer } => Op::Send { buf: to(buf), count, dtype, peer },
            Op::Recv { buf, count, dtype, peer } => Op::Recv { buf: m(buf), count, dtype, peer },
            Op::Copy { dst, src, bytes } => Op::Copy { dst: m(dst), src: to(src), bytes },
            Op::Snapshot { src, bytes } => Op::Snapshot { src: to(src), bytes },
        }
    }
}

/// One NCCL communicator, on one GPU, with the stream its collectives run on.
pub struct Comm {
    comm: ncclComm_t,
    stream: Stream,
    /// Recorded on the legacy default stream before each collective; the stream waits for it.
    ready: *mut c_void,
    /// Recorded on the stream after each collective; [`Comm::wait`] polls it.
    done: *mut c_void,
    dev: Device,
    /// Aborted after an error: no more work may be queued.
    broken: bool,
    /// Device memory for [`Op::Snapshot`] (address, bytes), grown as needed; one suffices, as
    /// the communicator's collectives run one after the other on its stream.
    snapshot: (u64, usize),
}

// SAFETY: the handles are plain values the driver and NCCL accept from any thread; the owner
// serialises their use (one communicator's collectives run in the order MPI calls them).
unsafe impl Send for Comm {}

/// Queues `ops` as one NCCL group on `stream`; copies and snapshots are not NCCL's.
///
/// # Safety
/// Pointers are device memory of the communicator's GPU with the counts given; the communicator
/// and the stream are live, in the current context.
unsafe fn group(n: &Nccl, comm: ncclComm_t, stream: *mut c_void, ops: impl Iterator<Item = Op>) -> Result<(), Error> {
    // SAFETY: as the caller promises.
    unsafe {
        nccl_check("ncclGroupStart", (n.group_start)())?;
        let mut queued = Ok(());
        for op in ops {
            let (call, rc) = match op {
                Op::AllReduce { send, recv, count, dtype, op } => ("ncclAllReduce", (n.all_reduce)(send, recv, count, dtype, op, comm, stream)),
                Op::Reduce { send, recv, count, dtype, op, root } => ("ncclReduce", (n.reduce)(send, recv, count, dtype, op, root, comm, stream)),
                Op::Broadcast { send, recv, count, dtype, root } => ("ncclBroadcast", (n.broadcast)(send, recv, count, dtype, root, comm, stream)),
                Op::AllGather { send, recv, count, dtype } => ("ncclAllGather", (n.all_gather)(send, recv, count, dtype, comm, stream)),
                Op::ReduceScatter { send, recv, count, dtype, op } => ("ncclReduceScatter", (n.reduce_scatter)(send, recv, count, dtype, op, comm, stream)),
                Op::Send { buf, count, dtype, peer } => ("ncclSend", (n.send)(buf, count, dtype, peer, comm, stream)),
                Op::Recv { buf, count, dtype, peer } => ("ncclRecv", (n.recv)(buf, count, dtype, peer, comm, stream)),
                Op::Copy { .. } | Op::Snapshot { .. } => continue,
            };
            if queued.is_ok() {
                queued = nccl_check(call, rc);
            }
        }
        // The group is closed even after a failure, so that NCCL's group state stays sane.
        let ended = nccl_check("ncclGroupEnd", (n.group_end)());
        queued.and(ended)
    }
}

impl Comm {
    /// Joins the communicator `id` names as rank `rank` of `ranks`, on the GPU of `dev`.
    /// Collective: every rank of the communicator must call it, or it waits for them.
    pub fn create(dev: &Device, ranks: c_int, rank: c_int, id: &UniqueId) -> Result<Comm, Error> {
        let n = loaded()?;
        let ctx = InContext::enter(dev)?;
        let d = ctx.driver();
        let mut c = Comm { comm: std::ptr::null_mut(), stream: std::ptr::null_mut(), ready: std::ptr::null_mut(), done: std::ptr::null_mut(), dev: *dev, broken: false, snapshot: (0, 0) };
        // SAFETY: valid out-pointers in a current context. The stream does not synchronise with
        // the legacy default stream (CU_STREAM_NON_BLOCKING): its collectives follow the
        // program's earlier work through the `ready` event alone. A blocking stream would also
        // wait, through that event's record, for every other communicator's collectives queued
        // before, and two communicators whose nonblocking collectives ranks start in opposite
        // orders would each wait for the other's (measured: a stall on 2 and 4 H100s).
        unsafe {
            check("cuStreamCreate", (d.stream_create)(&mut c.stream, 1))?;
            check("cuEventCreate", (d.event_create)(&mut c.ready, EVENT_NO_TIMING))?;
            check("cuEventCreate", (d.event_create)(&mut c.done, EVENT_NO_TIMING))?;
        }
        let mut comm: ncclComm_t = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the id is 128 bytes laid out as ncclUniqueId.
        let rc = unsafe { (n.comm_init_rank)(&mut comm, ranks, std::mem::transmute::<UniqueId, ncclUniqueId>(*id), rank) };
        nccl_check("ncclCommInitRank", rc)?;
        c.comm = comm;
        Ok(c)
    }

    /// Opens the point-to-point channels to every other rank now (one byte each way), while
    /// every rank is at the collective that made the communicator: NCCL opens them at their
    /// first use otherwise, in the host call that queues it, waiting for the peer's.
    /// Collective, as [`Comm::create`].
    pub fn connect(&mut self, ranks: c_int, rank: c_int) -> Result<(), Error> {
        if ranks < 2 {
            return Ok(());
        }
        let ctx = InContext::enter(&self.dev)?;
        let d = ctx.driver();
        let mut buf: u64 = 0;
        // SAFETY: a valid out-pointer in the GPU's context.
        check("cuMemAlloc", unsafe { (d.mem_alloc)(&mut buf, 2 * ranks as usize) })?;
        let at = |i: c_int| (buf as usize + i as usize) as *mut c_void;
        let ops: Vec<Op> = (0..ranks)
            .filter(|&p| p != rank)
            .flat_map(|p| {
                [Op::Send { buf: at(rank).cast_const(), count: 1, dtype: DataType::ncclUint8, peer: p }, Op::Recv { buf: at(ranks + p), count: 1, dtype: DataType::ncclUint8, peer: p }]
            })
            .collect();
        let patience = Duration::from_secs(config::get().handshake_wait_s);
        let r = self.run(&ops).and_then(|()| self.wait(patience));
        // SAFETY: allocated above; the stream is done with it (or the communicator aborted).
        unsafe { (d.mem_free)(buf) };
        r
    }

    pub fn ordinal(&self) -> i32 {
        self.dev.ordinal
    }

    /// The GPU the communicator runs on.
    pub fn device(&self) -> Device {
        self.dev
    }

    /// False once an error aborted the communicator.
    pub fn usable(&self) -> bool {
        !self.broken
    }

    /// Aborts and frees a communicator some other rank could not join.
    pub fn abandon(mut self) {
        self.abort();
        self.release();
    }

    /// Queues `ops` as one group on the stream, after the program's earlier work (see the
    /// module's comment). Returns once queued; [`Comm::wait`] waits for them.
    pub fn run(&mut self, ops: &[Op]) -> Result<(), Error> {
        let n = loaded()?;
        if self.broken {
            return Err(Error::Nccl { call: "ncclGroupEnd", code: 5 });
        }
        let ctx = InContext::enter(&self.dev)?;
        let d = ctx.driver();
        let (comm, s) = (self.comm, self.stream);
        // SAFETY: live event and stream of this context; null is the legacy default stream.
        unsafe {
            check("cuEventRecord", (d.event_record)(self.ready, std::ptr::null_mut()))?;
            check("cuStreamWaitEvent", (d.stream_wait_event)(s, self.ready, 0))?;
        }
        let snap = self.snapshot(ops)?;
        let at = self.snapshot.0 as usize;
        let moved = ops.iter().map(|op| match (*op, snap) {
            (Op::Send { buf, count, dtype, peer }, Some((src, bytes))) if (buf as usize).wrapping_sub(src) < bytes => {
                Op::Send { buf: (at + (buf as usize - src)) as *const c_void, count, dtype, peer }
            }
            (op, _) => op,
        });
        // SAFETY: pointers are the caller's device memory of this GPU with the counts given;
        // the communicator and stream are live.
        unsafe { group(n, comm, s, moved)? };
        // SAFETY: as above.
        unsafe {
            // A group reaches the stream only at its end: copies that follow its results come
            // after it.
            for op in ops {
                if let Op::Copy { dst, src, bytes } = *op {
                    check("cuMemcpyDtoDAsync", (d.memcpy_dtod_async)(dst as u64, src as u64, bytes, s))?;
                }
            }
            check("cuEventRecord", (d.event_record)(self.done, s))?;
        }
        Ok(())
    }

    /// Queues `ops` as one group on the program's `stream`, in its order, with no event of the
    /// communicator's: the program waits for them as for its own work there. Copies and
    /// snapshots are refused (the enqueued collectives need none).
    pub fn run_on(&mut self, ops: &[Op], stream: *mut c_void) -> Result<(), Error> {
        let n = loaded()?;
        if self.broken {
            return Err(Error::Nccl { call: "ncclGroupEnd", code: 5 });
        }
        if ops.iter().any(|op| matches!(op, Op::Copy { .. } | Op::Snapshot { .. })) {
            return Err(Error::Nccl { call: "ncclGroupStart", code: 4 });
        }
        let _ctx = InContext::enter(&self.dev)?;
        // SAFETY: device memory of this GPU with the counts given, the program's stream of this
        // GPU, a live communicator.
        unsafe { group(n, self.comm, stream, ops.iter().copied())? };
        self.async_error(n)
    }

    /// Queues the copy of `ops`' [`Op::Snapshot`], if any, into the communicator's own memory;
    /// returns the range it copied (address, bytes).
    fn snapshot(&mut self, ops: &[Op]) -> Result<Option<(usize, usize)>, Error> {
        let Some((src, bytes)) = ops.iter().find_map(|op| match *op {
            Op::Snapshot { src, bytes } => Some((src as usize, bytes)),
            _ => None,
        }) else {
            return Ok(None);
        };
        let ctx = InContext::enter(&self.dev)?;
        let d = ctx.driver();
        // SAFETY: the stream and memory are this communicator's; the old memory is freed only
        // once the stream is done with it; `src` is device memory of this GPU, `bytes` long.
        unsafe {
            if self.snapshot.1 < bytes {
                check("cuStreamSynchronize", (d.stream_synchronize)(self.stream))?;
                if self.snapshot.0 != 0 {
                    (d.mem_free)(self.snapshot.0);
                    self.snapshot = (0, 0);
                }
                check("cuMemAlloc", (d.mem_alloc)(&mut self.snapshot.0, bytes.max(1)))?;
                self.snapshot.1 = bytes.max(1);
            }
            check("cuMemcpyDtoDAsync", (d.memcpy_dtod_async)(self.snapshot.0, src as u64, bytes, self.stream))?;
        }
        Ok(Some((src, bytes)))
    }

    /// Waits until the work queued by [`Comm::run`] is done, polling NCCL's asynchronous error;
    /// after `patience` without completion, or on an error, aborts the communicator (its
    /// later use fails at once) and says why.
    pub fn wait(&mut self, patience: Duration) -> Result<(), Error> {
        let done = self.done;
        self.wait_on(done, patience)
    }

    /// Marks the work queued so far, for a caller that waits for it later ([`Comm::wait_for`],
    /// [`Comm::reached`]) while other work is queued behind it.
    pub fn mark(&mut self) -> Result<Event, Error> {
        let ctx = InContext::enter(&self.dev)?;
        let d = ctx.driver();
        let mut ev = Event { ev: std::ptr::null_mut(), dev: self.dev };
        // SAFETY: a valid out-pointer; a live stream of this context.
        unsafe {
            check("cuEventCreate", (d.event_create)(&mut ev.ev, EVENT_NO_TIMING))?;
            check("cuEventRecord", (d.event_record)(ev.ev, self.stream))?;
        }
        Ok(ev)
    }

    /// Whether the work `ev` marks is done, without waiting; an error as [`Comm::wait`] gives.
    pub fn reached(&mut self, ev: &Event) -> Result<bool, Error> {
        let n = loaded()?;
        let ctx = InContext::enter(&self.dev)?;
        // SAFETY: a live event of this context.
        match unsafe { (ctx.driver().event_query)(ev.ev) } {
            0 => self.async_error(n).map(|()| true),
            NOT_READY => self.async_error(n).map(|()| false),
            code => {
                self.abort();
                Err(Error::Cuda(CudaError { call: "cuEventQuery", code }))
            }
        }
    }

    /// Makes the communicator's own stream wait for the work queued on `stream` so far (the
    /// operations [`Comm::run_on`] queued there included), so that freeing the communicator,
    /// which synchronises its own stream, waits for them too.
    pub fn follow(&mut self, stream: *mut c_void) -> Result<(), Error> {
        let ctx = InContext::enter(&self.dev)?;
        let d = ctx.driver();
        // SAFETY: the communicator's own event and stream; `stream` a live stream of its GPU.
        unsafe {
            check("cuEventRecord", (d.event_record)(self.done, stream))?;
            check("cuStreamWaitEvent", (d.stream_wait_event)(self.stream, self.done, 0))?;
        }
        Ok(())
    }

    /// [`Comm::wait`] for the work `ev` marks.
    pub fn wait_for(&mut self, ev: &Event, patience: Duration) -> Result<(), Error> {
        self.wait_on(ev.ev, patience)
    }

    fn wait_on(&mut self, event: *mut c_void, patience: Duration) -> Result<(), Error> {
        if self.broken {
            return Err(Error::Nccl { call: "an NCCL collective", code: 5 });
        }
        let n = loaded()?;
        let ctx = InContext::enter(&self.dev)?;
        let d = ctx.driver();
        let start = Instant::now();
        let mut spins: u32 = 0;
        loop {
            // SAFETY: a live event of this context.
            match unsafe { (d.event_query)(event) } {
                // A failed collective may still let its stream go on: NCCL's own word decides.
                0 => return self.async_error(n),
                NOT_READY => (),
                code => {
                    self.abort();
                    return Err(Error::Cuda(CudaError { call: "cuEventQuery", code }));
                }
            }
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 {
                self.async_error(n)?;
                let waited = start.elapsed();
                if waited > patience {
                    self.abort();
                    return Err(Error::Stalled(waited));
                }
                // Past a collective's usual time, a late rank is being waited for: the core
                // goes to whoever needs it (a GPU-less stand-in's NCCL threads, say).
                if waited > Duration::from_micros(100) {
                    std::thread::yield_now();
                }
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// NCCL's asynchronous error, if any: then the communicator is aborted.
    fn async_error(&mut self, n: &Nccl) -> Result<(), Error> {
        let mut state: NcclResult = SUCCESS;
        // SAFETY: a live communicator; a valid out-pointer.
        let rc = unsafe { (n.comm_get_async_error)(self.comm, &mut state) };
        let found = nccl_check("ncclCommGetAsyncError", rc).and(match state {
            SUCCESS => Ok(()),
            code => Err(Error::Nccl { call: "an NCCL collective", code }),
        });
        if found.is_err() {
            self.abort();
        }
        found
    }

    /// Tears the communicator down at once, whatever is queued (NCCL's `ncclCommAbort`).
    fn abort(&mut self) {
        if self.broken {
            return;
        }
        self.broken = true;
        if let Some(n) = get() {
            // SAFETY: a live communicator, never used again.
            unsafe { (n.comm_abort)(self.comm) };
        }
    }

    /// Frees the communicator, its stream and events, on this rank alone. Every rank frees its
    /// own when the MPI communicator goes.
    pub fn destroy(mut self) {
        self.release();
    }

    fn release(&mut self) {
        let Ok(ctx) = InContext::enter(&self.dev) else { return };
        let d = ctx.driver();
        // SAFETY: handles made in `create`, each released once (nulled after).
        unsafe {
            if !self.comm.is_null() {
                if !self.broken {
                    // Nothing is in flight (every collective is waited for), and ncclCommDestroy
                    // is an intra-node collective that ranks freeing their communicators in
                    // different orders could hang in: ncclCommAbort is local.
                    (d.stream_synchronize)(self.stream);
                    if let Some(n) = get() {
                        (n.comm_abort)(self.comm);
                    }
                }
                self.comm = std::ptr::null_mut();
            }
            for e in [&mut self.ready, &mut self.done] {
                if !e.is_null() {
                    (d.event_destroy)(*e);
                    *e = std::ptr::null_mut();
                }
            }
            // After a failure the stream may never finish with it: then it is left allocated.
            if self.snapshot.0 != 0 && !self.broken {
                (d.stream_synchronize)(self.stream);
                (d.mem_free)(self.snapshot.0);
                self.snapshot = (0, 0);
            }
            if !self.stream.is_null() {
                (d.stream_destroy)(self.stream);
                self.stream = std::ptr::null_mut();
            }
        }
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        self.release();
    }
}

/// A point of a communicator's stream ([`Comm::mark`]).
pub struct Event {
    ev: *mut c_void,
    dev: Device,
}

// SAFETY: an event handle the driver accepts from any thread.
unsafe impl Send for Event {}

impl Drop for Event {
    fn drop(&mut self) {
        if let Ok(ctx) = InContext::enter(&self.dev) {
            // SAFETY: made in `Comm::mark`, destroyed once.
            unsafe { (ctx.driver().event_destroy)(self.ev) };
        }
    }
}
