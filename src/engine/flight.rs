//! Nonblocking and persistent collectives on NCCL: what a start leaves running ([`InFlight`]),
//! which the request's completion waits for or polls.
//!
//! A nonblocking start must not wait for the other ranks, so it cannot ask them anything: it
//! follows the communicator's last agreement (`agreement::Slot::on_nccl`), which every rank
//! holds alike since agreements come at the same points of every rank's sequence of
//! collectives. Where that agreement chose NCCL, every rank runs the call there whatever its
//! buffers are this time: memory NCCL cannot take as it is (host memory, another GPU's) is
//! copied through scratch memory on the communicator's GPU, in at the start and back at the
//! completion. A datatype with gaps cannot be moved so; that call fails on its rank with one
//! line, and the other ranks' completions fail after `CUDAMPI_HANDSHAKE_WAIT`, as any stalled
//! collective does. A persistent collective agrees at its initialization (`super::plan`),
//! which may wait, and runs every start the way the ranks agreed then.

use std::ffi::{c_int, c_void};
use std::time::Duration;

use super::agreement::{self, Shared};
use super::jobs::{gapless, Job};
use super::{counted, on};
use crate::base::{config, log};
use crate::cuda::copy::{check, CudaError, InContext};
use crate::cuda::nccl::{self, Op};
use crate::cuda::{self, Device, Location};
use crate::mpi::abi::{self, Handle};
use crate::mpi::errors;

/// A persistent collective the ranks agreed to run on NCCL: its operations, queued afresh at
/// every `MPI_Start`.
pub struct Planned {
    pub(super) name: &'static str,
    pub(super) comm: Handle,
    pub(super) nccl: Shared,
    pub(super) ops: Vec<Op>,
    pub(super) bytes: usize,
}

// SAFETY: the operations' addresses are the program's buffers, which it hands to MPI until it
// frees the request; the communicator is shared under its lock.
unsafe impl Send for Planned {}

impl Planned {
    /// One start: queues the operations after the program's earlier work.
    pub fn start(&self) -> Result<InFlight, c_int> {
        launch(self.name, self.comm, &self.nccl, &self.ops, self.bytes, Vec::new(), true)
    }
}

/// A collective queued on NCCL and not yet seen complete.
pub struct InFlight {
    name: &'static str,
    comm: Handle,
    nccl: Shared,
    /// Where the collective ends on the stream; `None`: the end of the work queued last (a
    /// blocking call, waited for before anything else is queued).
    event: Option<nccl::Event>,
    scratch: Vec<Scratch>,
    bytes: usize,
}

// SAFETY: as for `Planned`; the scratch memory is this entry's own.
unsafe impl Send for InFlight {}

impl InFlight {
    /// Whether the collective is done, without waiting; when it is, its results are in the
    /// program's buffers.
    pub fn poll(&mut self) -> Result<bool, c_int> {
        let Some(event) = &self.event else { return self.wait().map(|()| true) };
        let reached = agreement::lock(&self.nccl).reached(event);
        match reached {
            Ok(true) => self.deliver().map(|()| true),
            Ok(false) => Ok(false),
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Waits until the collective is done (patience: `CUDAMPI_HANDSHAKE_WAIT`), its results in
    /// the program's buffers.
    pub fn wait(&mut self) -> Result<(), c_int> {
        let patience = Duration::from_secs(config::get().handshake_wait_s);
        let mut c = agreement::lock(&self.nccl);
        let waited = match &self.event {
            Some(event) => c.wait_for(event, patience),
            None => c.wait(patience),
        };
        drop(c);
        match waited {
            Ok(()) => self.deliver(),
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Waits for the collective without reporting anything (its request is gone: MPI may be
    /// finalized), so that its scratch memory is freed only once the GPU is done with it.
    pub fn abandon(self) {
        let patience = Duration::from_secs(config::get().handshake_wait_s);
        let mut c = agreement::lock(&self.nccl);
        let _ = match &self.event {
            Some(event) => c.wait_for(event, patience),
            None => c.wait(patience),
        };
    }

    fn deliver(&mut self) -> Result<(), c_int> {
        for s in self.scratch.iter().filter(|s| s.back) {
            if let Err(e) = s.copy_back() {
                log::error(format_args!("{}: {} failed with {}", self.name, e.call, e.name()));
                return Err(errors::raise(Some(self.comm), abi::get().err_other));
            }
        }
        self.scratch.clear();
        let ordinal = agreement::lock(&self.nccl).ordinal();
        counted(self.name, self.bytes, ordinal);
        Ok(())
    }

    fn failed(&self, e: nccl::Error) -> c_int {
        log::error(format_args!("{}: {e}", self.name));
        errors::raise(Some(self.comm), abi::get().err_other)
    }
}

/// Starts a nonblocking collective on NCCL where the communicator's last agreement chose it;
/// `None`: staged, as before.
pub fn start(name: &'static str, comm: Handle, job: &Job) -> Option<Result<InFlight, c_int>> {
    let slot = chosen(comm, job)?;
    if !slot.on_nccl() {
        return None;
    }
    begin(name, comm, job, slot, true)
}

/// A blocking reduction in a gap of the schedule `agreement::Slot::chose` sets: on NCCL
/// without asking, as a nonblocking start goes; `None`: the agreement decides.
pub fn follow(name: &'static str, comm: Handle, job: &Job, slot: &agreement::Slot) -> Option<c_int> {
    if !job.reduces() || !slot.follows() {
        return None;
    }
    Some(match begin(name, comm, job, slot, false)? {
        Ok(mut f) => f.wait().map_or_else(|rc| rc, |()| 0),
        Err(rc) => rc,
    })
}

/// The communicator's state, for a call NCCL may run that is not below the threshold by what
/// every rank knows alike; `None`: staged.
#[inline]
pub fn chosen(comm: Handle, job: &Job) -> Option<&'static agreement::Slot> {
    if !on() {
        return None;
    }
    let threshold = config::get().nccl_bytes.max(1);
    if job.bytes_here().is_some_and(|b| (b as usize) < threshold) {
        return None;
    }
    agreement::slot(comm)
}

/// Queues `job` on the communicator's NCCL communicator, which the last agreement chose; every
/// rank does, whatever its buffers.
fn begin(name: &'static str, comm: Handle, job: &Job, slot: &agreement::Slot, mark: bool) -> Option<Result<InFlight, c_int>> {
    let shared = slot.lock().nccl.clone()?;
    let (rank, size) = crate::mpi::comm::rank_size(comm).ok()?;
    // Where the sizes differ by rank, no rank knows the others': such a call runs on NCCL at
    // any size.
    let shape = job.shape(rank, size).filter(|s| !s.common || s.bytes >= job.threshold(size))?;
    let dev = agreement::lock(&shared).device();
    let fail = |why: &str| {
        log::error(format_args!("{name}: {why}; the other ranks run this collective on NCCL (set CUDAMPI_NCCL=0 to stage every collective)"));
        Some(Err(errors::raise(Some(comm), abi::get().err_other)))
    };
    if !shape.ok || !job.consistent(rank) {
        return fail("this rank's counts do not match its datatypes");
    }
    let bases = job.buffers(rank);
    if bases.iter().any(|&(b, t)| b.is_null() || !gapless(t)) {
        return fail("a buffer with gaps in its datatype (or MPI_BOTTOM) cannot go through NCCL");
    }
    let ops = job.ops(&shape, rank, size);
    let (ops, scratch) = match through_scratch(&dev, &bases, job.send(), ops, size as usize) {
        Ok(x) => x,
        Err(e) => return fail(&format!("{} failed with {}", e.call, e.name())),
    };
    if !scratch.is_empty() {
        slot.lock().strayed = true;
    }
    Some(launch(name, comm, &shared, &ops, shape.bytes, scratch, mark))
}

/// Queues `ops`; `mark`: for a completion that comes later, with other work queued behind.
fn launch(name: &'static str, comm: Handle, shared: &Shared, ops: &[Op], bytes: usize, scratch: Vec<Scratch>, mark: bool) -> Result<InFlight, c_int> {
    let mut c = agreement::lock(shared);
    match c.run(ops).and_then(|()| if mark { c.mark().map(Some) } else { Ok(None) }) {
        Ok(event) => Ok(InFlight { name, comm, nccl: shared.clone(), event, scratch, bytes }),
        Err(e) => {
            log::error(format_args!("{name}: {e}"));
            Err(errors::raise(Some(comm), abi::get().err_other))
        }
    }
}

/// Device memory on the communicator's GPU standing in for a range of the program's buffer.
struct Scratch {
    dev: Device,
    ptr: u64,
    len: usize,
    /// The program's bytes this stands in for.
    user: *mut c_void,
    /// Where they live: host memory (or managed) is copied by the CPU's side of the driver.
    on_device: bool,
    /// Written by the collective: copied back at its completion.
    back: bool,
}

impl Scratch {
    fn new(dev: Device, user: *mut c_void, len: usize, back: bool) -> Result<Scratch, CudaError> {
        let on_device = matches!(cuda::locate(user), Location::Device(d) if !d.managed);
        let ctx = InContext::enter(&dev)?;
        let d = ctx.driver();
        let mut s = Scratch { dev, ptr: 0, len, user, on_device, back };
        // SAFETY: a valid out-pointer in the GPU's context; the program's range is `len`
        // bytes it passed to the collective (read before the start, as MPI reads a send).
        unsafe {
            check("cuMemAlloc", (d.mem_alloc)(&mut s.ptr, len.max(1)))?;
            match on_device {
                true => check("cuMemcpyDtoD", (d.memcpy_dtod)(s.ptr, user as u64, len))?,
                false => check("cuMemcpyHtoD", (d.memcpy_htod)(s.ptr, user, len))?,
            }
        }
        Ok(s)
    }

    fn copy_back(&self) -> Result<(), CudaError> {
        let ctx = InContext::enter(&self.dev)?;
        let d = ctx.driver();
        // SAFETY: the scratch memory and the program's range it stands in for, both `len`.
        unsafe {
            match self.on_device {
                true => check("cuMemcpyDtoD", (d.memcpy_dtod)(self.user as u64, self.ptr, self.len)),
                false => check("cuMemcpyDtoH", (d.memcpy_dtoh)(self.user, self.ptr, self.len)),
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Ok(ctx) = InContext::enter(&self.dev) {
            // SAFETY: allocated in `new`, freed once.
            unsafe { (ctx.driver().mem_free)(self.ptr) };
        }
    }
}

/// `ops` with every buffer NCCL cannot take as it is (not device memory of `dev`'s GPU) moved
/// to scratch memory there. Each such buffer gets one scratch range covering what the
/// operations touch of it: the program's bytes copied in (so a receive's gaps between blocks
/// keep their values), and copied back if an operation writes it, unless it is the send buffer.
fn through_scratch(dev: &Device, bases: &[(*const c_void, Handle)], send: *const c_void, ops: Vec<Op>, ranks: usize) -> Result<(Vec<Op>, Vec<Scratch>), CudaError> {
    // Each buffer located once (a driver query), not once per operation on it.
    let located: Vec<(usize, bool)> =
        bases.iter().map(|&(b, _)| (b as usize, matches!(cuda::locate(b), Location::Device(d) if !d.managed && d.ordinal == dev.ordinal))).collect();
    let direct = |b: usize| located.iter().any(|&(x, on)| x == b && on);
    let mut moved: Vec<(usize, usize, usize, bool)> = Vec::new(); // (base, low, high, written)
    let base_of = |p: usize| bases.iter().map(|&(b, _)| b as usize).filter(|&b| b <= p).max();
    for op in &ops {
        for (p, len, writes) in op.buffers(ranks).into_iter().flatten() {
            let Some(b) = base_of(p as usize) else { continue };
            if direct(b) {
                continue;
            }
            let (lo, hi) = (p as usize - b, p as usize - b + len);
            match moved.iter_mut().find(|m| m.0 == b) {
                Some(m) => {
                    m.1 = m.1.min(lo);
                    m.2 = m.2.max(hi);
                    m.3 |= writes;
                }
                None => moved.push((b, lo, hi, writes)),
            }
        }
    }
    if moved.is_empty() {
        return Ok((ops, Vec::new()));
    }
    let mut scratch = Vec::with_capacity(moved.len());
    for &(b, lo, hi, writes) in &moved {
        let back = writes && b != send as usize;
        scratch.push(Scratch::new(*dev, (b + lo) as *mut c_void, hi - lo, back)?);
    }
    let to = |p: *const c_void| -> *const c_void {
        let Some(b) = base_of(p as usize) else { return p };
        match moved.iter().position(|m| m.0 == b) {
            Some(i) => (scratch[i].ptr as usize + (p as usize - b - moved[i].1)) as *const c_void,
            None => p,
        }
    };
    let ops = ops.into_iter().map(|op| op.moved(to)).collect();
    Ok((ops, scratch))
}
