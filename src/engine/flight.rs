//! Nonblocking and persistent collectives on NCCL: what a start leaves running ([`InFlight`]),
//! which the request's completion waits for or polls.
//!
//! A nonblocking start must not wait for the other ranks, so it cannot ask them anything: it
//! follows the communicator's last agreement (`agreement::Slot::on_nccl`), which every rank
//! holds alike since agreements come at the same points of every rank's sequence of
//! collectives. Where that agreement chose NCCL, every rank runs the call there whatever its
//! buffers are this time: memory NCCL cannot take as it is (host memory, another GPU's) is
//! copied through scratch memory on the communicator's GPU, in at the start and back at the
//! completion. A datatype with gaps is moved packed, as the operations lay its elements out: the
//! library's own `MPI_Pack` of a host copy goes in at the start, and `MPI_Unpack` into a host
//! copy at the completion writes back the datatype's bytes alone. Arguments the library would
//! refuse (the null datatype, a negative count, an uncommitted datatype, one buffer passed as
//! both) are left to it: the call is staged on that rank and gets the library's own error. A
//! persistent collective agrees at its initialization (`super::plan`), which may wait, and
//! runs every start the way the ranks agreed then.

use std::ffi::{c_int, c_void};
use std::time::Duration;

use super::agreement::{self, Shared};
use super::jobs::{gapless, refused, Job};
use super::{counted, on};
use crate::base::{config, log};
use crate::cuda::copy::{check, CudaError, InContext};
use crate::cuda::nccl::{self, Op};
use crate::cuda::{self, Device, Location};
use crate::mpi::abi::{self, Handle};
use crate::mpi::datatype::{self, Span, TypeInfo};
use crate::mpi::{errors, real};

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
                log::error(format_args!("{}: {e}", self.name));
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
    let bases = job.buffers(rank);
    // Arguments the library refuses: its own error, from the staged path.
    if !shape.ok || refused(&bases) {
        return None;
    }
    if !job.consistent(rank) {
        return fail("this rank's counts do not match its datatypes");
    }
    if bases.iter().any(|&(b, _)| b.is_null()) {
        return fail("a buffer at MPI_BOTTOM cannot go through NCCL");
    }
    let ops = job.ops(&shape, rank, size);
    let (ops, scratch) = match through_scratch(&dev, &bases, job.send(), ops, size as usize) {
        Ok(x) => x,
        Err(e) => return fail(&e),
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
    /// The elements of a datatype with gaps, held packed.
    packed: Option<Packed>,
}

/// `count` elements of `datatype` from `user`, which leave gaps: the scratch holds them as
/// `MPI_Pack` lays them out, `span` of the program's bytes around them.
struct Packed {
    datatype: Handle,
    info: TypeInfo,
    count: c_int,
    span: Span,
}

/// Why scratch memory cannot stand in for a buffer.
fn cuda_failed(e: CudaError) -> String {
    format!("{} failed with {}", e.call, e.name())
}

impl Scratch {
    fn new(dev: Device, user: *mut c_void, len: usize, back: bool) -> Result<Scratch, String> {
        let on_device = matches!(cuda::locate(user), Location::Device(d) if !d.managed);
        let ctx = InContext::enter(&dev).map_err(cuda_failed)?;
        let d = ctx.driver();
        let mut s = Scratch { dev, ptr: 0, len, user, on_device, back, packed: None };
        // SAFETY: a valid out-pointer in the GPU's context; the program's range is `len`
        // bytes it passed to the collective (read before the start, as MPI reads a send).
        unsafe {
            check("cuMemAlloc", (d.mem_alloc)(&mut s.ptr, len.max(1))).map_err(cuda_failed)?;
            match on_device {
                true => check("cuMemcpyDtoD", (d.memcpy_dtod)(s.ptr, user as u64, len)),
                false => check("cuMemcpyHtoD", (d.memcpy_htod)(s.ptr, user, len)),
            }
            .map_err(cuda_failed)?;
        }
        Ok(s)
    }

    /// Elements `first..end` of `datatype` at `base`, packed: the whole range, so that packed
    /// bytes the operations leave alone go back as they were.
    fn packed(dev: Device, base: *const c_void, datatype: Handle, (first, end): (i64, i64), back: bool) -> Result<Scratch, String> {
        let t = datatype::query(datatype).map_err(|rc| format!("the datatype could not be read (MPI error {rc})"))?;
        let count = c_int::try_from(end - first).map_err(|_| "too many elements of a datatype with gaps to pack".to_string())?;
        let len = usize::try_from(t.size).ok().and_then(|s| s.checked_mul(count as usize)).filter(|&l| c_int::try_from(l).is_ok());
        let Some(len) = len else { return Err("too many bytes of a datatype with gaps to pack".into()) };
        let span = t.span(count as i64).map_err(|_| "the datatype's span does not fit in memory".to_string())?;
        let user = base.wrapping_byte_offset((first * t.extent) as isize).cast_mut();
        let on_device = matches!(cuda::locate(user.wrapping_byte_offset(span.offset as isize)), Location::Device(d) if !d.managed);
        let mut s = Scratch { dev, ptr: 0, len, user, on_device, back, packed: Some(Packed { datatype, info: t, count, span }) };
        let mut packed = vec![0u8; len];
        let host = s.user_bytes()?;
        let mut position: c_int = 0;
        let p = real::pmpi().ok_or("MPI is not loaded")?;
        let quiet = datatype::quiet::comm().map_err(|rc| format!("no communicator to pack on (MPI error {rc})"))?;
        // SAFETY: `host` holds the elements' span, whose first byte is `span.offset` from the
        // first element; `packed` takes `len` bytes, their packed size.
        let rc = unsafe {
            let origin = host.as_ptr().wrapping_byte_offset(-span.offset as isize);
            (p.pack)(origin.cast(), count, datatype, packed.as_mut_ptr().cast(), len as c_int, &mut position, quiet)
        };
        if rc != 0 {
            return Err(format!("MPI_Pack of a datatype with gaps failed (MPI error {rc})"));
        }
        let ctx = InContext::enter(&dev).map_err(cuda_failed)?;
        let d = ctx.driver();
        // SAFETY: a valid out-pointer in the GPU's context, then `len` bytes into it.
        unsafe {
            check("cuMemAlloc", (d.mem_alloc)(&mut s.ptr, len.max(1))).map_err(cuda_failed)?;
            check("cuMemcpyHtoD", (d.memcpy_htod)(s.ptr, packed.as_ptr().cast(), len)).map_err(cuda_failed)?;
        }
        Ok(s)
    }

    /// A host copy of the program's span around packed elements, as it is now.
    fn user_bytes(&self) -> Result<Vec<u8>, String> {
        let Some(k) = &self.packed else { return Ok(Vec::new()) };
        let mut host = vec![0u8; k.span.len];
        let from = self.user.wrapping_byte_offset(k.span.offset as isize);
        if self.on_device {
            let ctx = InContext::enter(&self.dev).map_err(cuda_failed)?;
            ctx.to_host(host.as_mut_ptr().cast(), from, host.len(), false).map_err(cuda_failed)?;
        } else {
            // SAFETY: host (or managed) memory the program passed, `span.len` bytes of it.
            unsafe { std::ptr::copy_nonoverlapping(from.cast::<u8>(), host.as_mut_ptr(), host.len()) };
        }
        Ok(host)
    }

    fn copy_back(&self) -> Result<(), String> {
        let ctx = InContext::enter(&self.dev).map_err(cuda_failed)?;
        let d = ctx.driver();
        let Some(k) = &self.packed else {
            // SAFETY: the scratch memory and the program's range it stands in for, both `len`.
            return unsafe {
                match self.on_device {
                    true => check("cuMemcpyDtoD", (d.memcpy_dtod)(self.user as u64, self.ptr, self.len)),
                    false => check("cuMemcpyDtoH", (d.memcpy_dtoh)(self.user, self.ptr, self.len)),
                }
            }
            .map_err(cuda_failed);
        };
        let mut packed = vec![0u8; self.len];
        // SAFETY: `len` bytes of scratch memory into a buffer as long.
        unsafe { check("cuMemcpyDtoH", (d.memcpy_dtoh)(packed.as_mut_ptr().cast(), self.ptr, self.len)) }.map_err(cuda_failed)?;
        drop(ctx);
        let mut host = self.user_bytes()?;
        let mut position: c_int = 0;
        let p = real::pmpi().ok_or("MPI is not loaded")?;
        let quiet = datatype::quiet::comm().map_err(|rc| format!("no communicator to unpack on (MPI error {rc})"))?;
        // SAFETY: as in `packed`, the other way.
        let rc = unsafe {
            let origin = host.as_mut_ptr().wrapping_byte_offset(-k.span.offset as isize);
            (p.unpack)(packed.as_ptr().cast(), self.len as c_int, &mut position, origin.cast(), k.count, k.datatype, quiet)
        };
        if rc != 0 {
            return Err(format!("MPI_Unpack of a datatype with gaps failed (MPI error {rc})"));
        }
        // Only the datatype's bytes: the gaps are the program's.
        let element = datatype::element_runs(k.datatype, &k.info).map_err(|rc| format!("the datatype's layout could not be read (MPI error {rc})"))?;
        let mut runs = Vec::new();
        datatype::push_runs(&mut runs, &element, k.info.extent, 0, k.count as i64);
        let runs = datatype::normalize(runs, k.span.offset);
        let to = self.user.wrapping_byte_offset(k.span.offset as isize);
        if self.on_device {
            let ctx = InContext::enter(&self.dev).map_err(cuda_failed)?;
            return ctx.runs_to_device(to, host.as_ptr().cast(), &runs, None).map_err(cuda_failed);
        }
        for (at, len) in runs {
            // SAFETY: a run of the program's host buffer inside the span.
            unsafe { std::ptr::copy_nonoverlapping(host[at..at + len].as_ptr(), to.cast::<u8>().add(at), len) };
        }
        Ok(())
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

/// `ops` with every buffer NCCL cannot take as it is (not device memory of `dev`'s GPU, or a
/// datatype with gaps) moved to scratch memory there. Each such buffer gets one scratch range
/// covering what the operations touch of it: the program's bytes copied in (so a receive's gaps
/// between blocks keep their values), and copied back if an operation writes it, unless it is
/// the send buffer. The operations lay a datatype's elements out packed (a displacement in
/// sizes), so a datatype with gaps is packed into its scratch and unpacked from it.
fn through_scratch(dev: &Device, bases: &[(*const c_void, Handle)], send: *const c_void, ops: Vec<Op>, ranks: usize) -> Result<(Vec<Op>, Vec<Scratch>), String> {
    // Each buffer located once (a driver query), not once per operation on it.
    // (base, its datatype if it has gaps, NCCL takes it as it is)
    let located: Vec<(usize, Option<Handle>, bool)> = bases
        .iter()
        .map(|&(b, t)| {
            let gaps = (!gapless(t)).then_some(t);
            (b as usize, gaps, gaps.is_none() && matches!(cuda::locate(b), Location::Device(d) if !d.managed && d.ordinal == dev.ordinal))
        })
        .collect();
    let direct = |b: usize| located.iter().any(|&(x, _, on)| x == b && on);
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
    for m in moved.iter_mut() {
        let (b, lo, hi, writes) = *m;
        let back = writes && b != send as usize;
        match located.iter().find(|l| l.0 == b).and_then(|l| l.1) {
            None => scratch.push(Scratch::new(*dev, (b + lo) as *mut c_void, hi - lo, back)?),
            Some(t) => {
                // Whole elements: the scratch starts at the first one the operations touch.
                let size = datatype::size(t).filter(|&s| s > 0).ok_or("a datatype of no size")? as usize;
                let (first, end) = (lo / size, hi.div_ceil(size));
                m.1 = first * size;
                scratch.push(Scratch::packed(*dev, b as *const c_void, t, (first as i64, end as i64), back)?);
            }
        }
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
