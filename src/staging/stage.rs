//! One buffer argument on its way to the real function: passed through when it is host memory,
//! staged through a host buffer when it is device memory.
//!
//! Staging is split in three steps so that blocking, nonblocking and persistent calls share it:
//! [`prepare`] finds where the buffer lives and leases a staging buffer, [`Staged::fill`]
//! copies the device bytes MPI will read (at the call, or at each `MPI_Start`), and
//! [`Staged::deliver`] copies back what MPI wrote (on return, or at completion).

use std::ffi::{c_int, c_void};
use std::sync::{Arc, OnceLock};

use crate::base::{config, log, stats};
use crate::cuda::{self, Deferred, Device, InContext, Location, Strided};
use crate::mpi::abi::{self, Handle};
use crate::mpi::datatype::{self, Span};
use crate::mpi::errors;
use crate::mpi::real;
use crate::mpi::typemap;
use crate::staging::pool::{self, Lease};

/// What the fast paths (`fastpath`, a layer above) hand down when they start: a device
/// message may arrive as an envelope in place of its data, which they then bring.
pub struct Envelopes {
    /// Whether device receives of this many bytes come as envelopes from every sender, so that
    /// the staging buffer need only hold the envelope and may be pageable.
    pub announced: fn(usize) -> bool,
    /// A staged receive completed: if it got an envelope, brings the data to the device span
    /// and sets the status to the message's true size. `None`: an ordinary message.
    pub landed: fn(&'static str, Option<Handle>, *mut c_void, Window, Option<&[(usize, usize)]>) -> Option<Result<(), c_int>>,
    /// A staged receive of a packed payload (`Staged::message`) completed: if it got an
    /// envelope, brings the data into the staging buffer (host memory of the given capacity)
    /// and sets the status to the message's true size. `None`: an ordinary message.
    pub landed_packed: fn(&'static str, Option<Handle>, *mut c_void, *mut c_void, usize) -> Option<Result<(), c_int>>,
    /// The size of an envelope: a receive with a datatype's form lists its runs for `landed`
    /// only when a message of this size arrived.
    pub bytes: usize,
}

static ENVELOPES: OnceLock<Envelopes> = OnceLock::new();

/// Takes the fast paths' part of a receive; the first call counts.
pub fn envelopes(e: Envelopes) {
    let _ = ENVELOPES.set(e);
}

/// A readable host address for calls that must not see the device pointer but will not
/// transfer data either: sends of nothing, calls the library rejects. Never for a receive,
/// which a longer message may overrun.
pub fn placeholder() -> *mut c_void {
    static mut BYTE: u64 = 0;
    // Only the address is taken; MPI transfers nothing into it.
    std::ptr::addr_of_mut!(BYTE).cast()
}

/// What to hand the real function for one buffer argument.
pub enum Prepared {
    /// The caller's pointer (host memory) or the placeholder.
    Direct(*mut c_void),
    Staged(Staged),
}

/// How a buffer is used by the call, which decides what is copied each way.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Send,
    /// A point-to-point receive: the message may be shorter than the buffer, so named
    /// datatypes copy back only the bytes that arrived (from the status). Derived datatypes
    /// copy the device span in first and write all of it back, so the gaps MPI does not write
    /// keep their device values.
    Recv,
    /// `MPI_Sendrecv_replace`: the whole span goes out and all of it comes back.
    Replace,
    /// A receive whose status cannot be trusted to count what arrived (MPICH's
    /// `MPI_Isendrecv` leaves a stale one): the span is copied in first and written back whole.
    RecvWhole,
    /// `MPI_Unpack`: MPI writes every byte of the datatype's runs and reads none, so nothing
    /// is copied in and only the runs go back (the whole span is copied in first only when
    /// there are too many runs to list).
    Write,
    /// An MPI-IO read: the file may end before the buffer does, so named datatypes copy back
    /// the bytes the status counts, and derived ones copy the span in first and write back
    /// its runs. A file's bytes are never an envelope of the fast paths.
    Read,
}

/// What to copy back to the device once MPI has written the staging buffer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Back {
    Nothing,
    /// The bytes the status says arrived.
    Received,
    /// The whole span (it was filled first, or MPI writes all of it), or only its runs when
    /// the staged buffer has them.
    Span,
    /// The bytes the status says were read from a file (never an envelope).
    Read,
}

pub struct Staged {
    pub dev: Device,
    /// First byte of the span in device memory.
    pub user: *mut c_void,
    pub lease: Lease,
    pub span: Span,
    /// The device bytes are copied to the staging buffer before MPI sees it.
    pub fill: bool,
    pub back: Back,
    /// The byte runs `(offset in the span, len)` that the datatype(s) consist of, when they
    /// leave gaps: only these are written back, so bytes between them that the program (or
    /// another pending receive) changes meanwhile are not overwritten with stale copies.
    pub runs: Option<Runs>,
    /// The datatype's blocks (`mpi::typemap`), offsets in the span, in packing order, when it
    /// has them: only these bytes are copied either way (the payload, not the span), and a
    /// receive copies back the blocks of the bytes that arrived.
    pub form: Option<Form>,
    /// A pinned buffer of the payload's size, for a span much larger than its payload: the
    /// blocks cross between it and the device in the same pitched copies, and are spread over
    /// (or gathered from) the span, which is then pageable memory, on the host.
    pub packed: Option<Lease>,
    /// MPI is given the payload packed, as this many elements of this predefined type in
    /// place of the caller's count and datatype (the same type signature): the staging buffer
    /// holds the datatype's bytes in packing order and no span, so the library moves one
    /// contiguous message and never packs the gaps on the host.
    pub message: Option<(i64, Handle)>,
}

/// Strided blocks of a staged span, in packing order.
pub type Form = Arc<[Strided]>;

// SAFETY: the pointers are device and staging addresses, usable from any thread; a staged
// buffer moves between threads only with the request that owns it.
unsafe impl Send for Staged {}

impl Prepared {
    pub fn mpi_ptr(&self) -> *mut c_void {
        match self {
            Prepared::Direct(p) => *p,
            Prepared::Staged(s) => s.mpi_ptr(),
        }
    }

    /// The buffer, count and datatype MPI is given for a call's `count` elements of `datatype`:
    /// the caller's count and datatype, or those of the packed payload (`Staged::message`).
    pub fn message(&self, count: i64, datatype: Handle) -> (*mut c_void, i64, Handle) {
        match self {
            Prepared::Staged(Staged { message: Some((n, t)), .. }) => (self.mpi_ptr(), *n, *t),
            _ => (self.mpi_ptr(), count, datatype),
        }
    }

    pub fn staged(self) -> Option<Staged> {
        match self {
            Prepared::Direct(_) => None,
            Prepared::Staged(s) => Some(s),
        }
    }
}

/// Looks at one buffer and, if it is device memory, leases a staging buffer for it (not yet
/// filled). `Err` is the MPI error code to return at once (already reported and raised on
/// `comm`).
// Inlined so that a host buffer costs its callers a pointer test and no move of a `Prepared`:
// the staging work is out of line in `prepare_device`.
#[inline]
pub fn prepare(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    peer: c_int,
    comm: Option<Handle>,
    dir: Direction,
) -> Result<Prepared, c_int> {
    prepare_as(name, buf, count, datatype, peer, comm, dir, Shape::AsLaidOut)
}

/// How a call hands MPI a staged device buffer of a derived datatype.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// At the device buffer's layout, with the caller's count and datatype: for calls whose
    /// buffer is one of several MPI addresses by displacements (collectives, windows).
    AsLaidOut,
    /// Packed, with the count and datatype `Prepared::message` gives, where the datatype
    /// allows: for calls that pass the buffer's count and datatype to MPI with it.
    Payload,
}

/// [`prepare`] for a call that gives MPI `Prepared::message`'s count and datatype.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn prepare_as(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    peer: c_int,
    comm: Option<Handle>,
    dir: Direction,
    shape: Shape,
) -> Result<Prepared, c_int> {
    let at = if buf.is_null() && count > 0 { absolute(datatype) } else { buf };
    match cuda::locate(at) {
        Location::Host => Ok(Prepared::Direct(buf as *mut c_void)),
        Location::Device(dev) => prepare_device(name, buf, dev, count, datatype, peer, comm, dir, shape),
        Location::Unreadable => unreadable(name, buf, count, datatype, peer, comm),
    }
}

/// Where a datatype used with `MPI_BOTTOM` starts: its displacements are absolute addresses,
/// located like any buffer. A datatype the library refuses locates nothing (the library
/// answers the call itself).
#[cold]
pub fn absolute(datatype: Handle) -> *const c_void {
    match datatype::query(datatype) {
        Ok(t) => t.true_lb as usize as *const c_void,
        Err(_) => std::ptr::null(),
    }
}

/// A buffer MPI would crash on is refused only where MPI would touch it: a call that transfers
/// nothing, or that the library rejects before it looks at the buffer, gets it as given.
#[cold]
fn unreadable(name: &'static str, buf: *const c_void, count: i64, datatype: Handle, peer: c_int, comm: Option<Handle>) -> Result<Prepared, c_int> {
    let abi = abi::get();
    if count <= 0 || peer == abi.proc_null || abi.same(datatype, abi.datatype_null) {
        return Ok(Prepared::Direct(buf as *mut c_void));
    }
    Err(errors::unreadable(name, comm, buf))
}

#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn prepare_device(
    name: &'static str,
    buf: *const c_void,
    dev: Device,
    count: i64,
    datatype: Handle,
    peer: c_int,
    comm: Option<Handle>,
    dir: Direction,
    shape: Shape,
) -> Result<Prepared, c_int> {
    let abi = abi::get();
    // Calls the real library rejects or completes without touching the buffer (negative
    // count, the null datatype, MPI_PROC_NULL) see a harmless host address, so the caller gets
    // exactly the real library's answer.
    if count < 0 || peer == abi.proc_null || abi.same(datatype, abi.datatype_null) {
        return Ok(Prepared::Direct(placeholder()));
    }
    // The library's own failures are raised on the program's communicator.
    let raise = |rc| errors::raise(comm, rc);
    let t = datatype::query(datatype).map_err(raise)?;
    let span = t.span(count).map_err(raise)?;
    // A derived datatype with a form moves its payload only: a receive needs no device byte
    // first, since only the blocks MPI wrote go back.
    let (form, base) = match span.named || span.len == 0 {
        true => (None, None),
        false => {
            let a = typemap::analysis(datatype, &t);
            (a.form.and_then(|e| typemap::message_of(datatype, &e, count, t.extent, span.offset, span.len)), a.base)
        }
    };
    if let Some(form) = form {
        let (fill, back) = match dir {
            Direction::Send => (true, Back::Nothing),
            Direction::Recv => (false, Back::Received),
            Direction::Replace | Direction::RecvWhole => (true, Back::Span),
            Direction::Write => (false, Back::Span),
            // Only the blocks of the bytes the file gave go back.
            Direction::Read => (false, Back::Read),
        };
        if let Some(message) = base.filter(|_| shape == Shape::Payload).and_then(|b| as_payload(&form, span, b, back)) {
            return lease_payload(name, buf, dev, span, comm, fill, back, form, message).map(Prepared::Staged);
        }
        return lease_form(name, buf, dev, span, comm, fill, back, form).map(Prepared::Staged);
    }
    let (fill, back) = match dir {
        // A send of nothing reads nothing. A receive of nothing still gets a staging buffer:
        // a longer message is written past the posted count by Open MPI (the overrun lands in
        // the staging buffer's untouched tail) before it reports MPI_ERR_TRUNCATE.
        Direction::Send if span.len == 0 => return Ok(Prepared::Direct(placeholder())),
        _ if span.len == 0 => (false, Back::Nothing),
        Direction::Send => (true, Back::Nothing),
        Direction::Recv if span.named => (false, Back::Received),
        Direction::Recv | Direction::Replace | Direction::RecvWhole => (true, Back::Span),
        Direction::Write => (!span.named, Back::Span),
        Direction::Read if span.named => (false, Back::Read),
        Direction::Read => (true, Back::Span),
    };
    let mut s = lease_for(name, buf, dev, span, comm, fill, back)?;
    if back == Back::Span && !span.named {
        let element = datatype::element_runs(datatype, &t).map_err(raise)?;
        if (element.len() as i64).saturating_mul(count) <= MAX_RUNS {
            let mut runs = Vec::new();
            datatype::push_runs(&mut runs, &element, t.extent, 0, count);
            s.runs = span_runs(runs, span);
            // Every byte that goes back is one MPI writes: no device byte is needed.
            if dir == Direction::Write {
                s.fill = false;
            }
        }
    }
    Ok(Prepared::Staged(s))
}

/// Most byte runs a staged buffer writes back one by one; beyond it the whole span is copied.
pub const MAX_RUNS: i64 = 1 << 20;

/// Runs relative to the buffer address, as runs within `span`; `None` when they cover it.
pub fn span_runs(runs: Vec<(i64, usize)>, span: Span) -> Option<Runs> {
    let runs = datatype::normalize(runs, span.offset);
    // One run covering the span is the whole span.
    (runs.len() != 1 || runs[0] != (0, span.len)).then(|| runs.into())
}

/// Leases a staging buffer for `span` of a device buffer (not yet filled).
pub fn lease_for(
    name: &'static str,
    buf: *const c_void,
    dev: Device,
    span: Span,
    comm: Option<Handle>,
    fill: bool,
    back: Back,
) -> Result<Staged, c_int> {
    stats::device_call(name);
    let user = buf.cast::<u8>().wrapping_offset(span.offset as isize) as *mut c_void;
    let ctx = InContext::enter(&dev).map_err(|e| errors::cuda(name, comm, e, buf, span.len, &dev))?;
    let lease = match !fill && back == Back::Received && span.named && ENVELOPES.get().is_some_and(|e| (e.announced)(span.len)) {
        true => pool::lease_unpinned(span.len),
        false => pool::lease(span.len, &ctx),
    };
    let lease = lease.ok_or_else(|| errors::no_mem(name, comm, span.len))?;
    if config::get().debug {
        log::debug(format_args!(
            "{name}: device buffer {buf:p} (GPU {}), {} bytes through {} staging buffer",
            dev.ordinal,
            span.len,
            if lease.is_pinned() { "a pinned" } else { "a pageable" },
        ));
    }
    Ok(Staged { dev, user, lease, span, fill, back, runs: None, form: None, packed: None, message: None })
}

/// Spans at least this large, and `SPARSE_TIMES` their payload, stage through a packed pinned
/// buffer: pinning the span (a matrix's, for a column) would take memory and pool room for
/// bytes never copied, and a pitched copy into pageable memory goes through the driver's own
/// bounce buffers.
const SPARSE_SPAN: usize = 4 << 20;
const SPARSE_TIMES: usize = 8;

/// [`lease_for`] for a datatype's blocks (`form`, offsets in the span): the span's staging
/// buffer, and for a sparse span a packed pinned one beside it, the span's then pageable.
#[allow(clippy::too_many_arguments)]
pub fn lease_form(
    name: &'static str,
    buf: *const c_void,
    dev: Device,
    span: Span,
    comm: Option<Handle>,
    fill: bool,
    back: Back,
    form: typemap::Form,
) -> Result<Staged, c_int> {
    let payload = typemap::bytes(&form);
    if span.len < SPARSE_SPAN || span.len / SPARSE_TIMES < payload {
        let mut s = lease_for(name, buf, dev, span, comm, fill, back)?;
        s.form = Some(form);
        return Ok(s);
    }
    stats::device_call(name);
    let user = buf.cast::<u8>().wrapping_offset(span.offset as isize) as *mut c_void;
    let ctx = InContext::enter(&dev).map_err(|e| errors::cuda(name, comm, e, buf, span.len, &dev))?;
    let lease = pool::lease_sparse(span.len).ok_or_else(|| errors::no_mem(name, comm, span.len))?;
    let packed = pool::lease(payload.max(1), &ctx).ok_or_else(|| errors::no_mem(name, comm, payload))?;
    if config::get().debug {
        log::debug(format_args!(
            "{name}: device buffer {buf:p} (GPU {}), {payload} of {} bytes through {} packed staging buffer",
            dev.ordinal,
            span.len,
            if packed.is_pinned() { "a pinned" } else { "a pageable" },
        ));
    }
    Ok(Staged { dev, user, lease, span, fill, back, runs: None, form: Some(form), packed: Some(packed), message: None })
}

/// The packed payload's count and type (`Staged::message`) for a datatype's blocks whose every
/// element is `base`, where MPI may be given it: the blocks copy in MPI's packing order (no
/// pitch runs backwards), a copy along them costs less than the span's ([`blocks_pay`]), and
/// a receive is not one of the few words the stream writes itself.
fn as_payload(form: &typemap::Form, span: Span, (base, size): (Handle, i64), back: Back) -> Option<(i64, Handle)> {
    let cuda::strided::Summary { bytes: payload, calls, in_order, .. } = cuda::strided::summary(form);
    let cheap = blocks_pay(calls, span.len, payload);
    let stream_written = back == Back::Received && payload <= SMALL_WRITES;
    let n = payload as i64 / size;
    (in_order && cheap && !stream_written && n <= c_int::MAX as i64).then_some((n, base))
}

/// [`lease_for`] for a payload MPI is given packed: a staging buffer of the payload's size,
/// which the blocks cross to and from in MPI's packing order.
#[allow(clippy::too_many_arguments)]
fn lease_payload(
    name: &'static str,
    buf: *const c_void,
    dev: Device,
    span: Span,
    comm: Option<Handle>,
    fill: bool,
    back: Back,
    form: typemap::Form,
    message: (i64, Handle),
) -> Result<Staged, c_int> {
    stats::device_call(name);
    let payload = cuda::strided::summary(&form).bytes;
    let user = buf.cast::<u8>().wrapping_offset(span.offset as isize) as *mut c_void;
    let ctx = InContext::enter(&dev).map_err(|e| errors::cuda(name, comm, e, buf, span.len, &dev))?;
    let lease = pool::lease(payload.max(1), &ctx).ok_or_else(|| errors::no_mem(name, comm, payload))?;
    if config::get().debug {
        log::debug(format_args!(
            "{name}: device buffer {buf:p} (GPU {}), {payload} of {} bytes packed on the GPU into {} staging buffer",
            dev.ordinal,
            span.len,
            if lease.is_pinned() { "a pinned" } else { "a pageable" },
        ));
    }
    // The span's offset no longer applies: MPI is given the staging buffer itself.
    let span = Span { offset: 0, ..span };
    Ok(Staged { dev, user, lease, span, fill, back, runs: None, form: Some(form), packed: None, message: Some(message) })
}

/// [`prepare`] and [`Staged::fill`] in one: the buffer is ready for MPI.
#[inline]
pub fn stage(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    peer: c_int,
    comm: Option<Handle>,
    dir: Direction,
) -> Result<Prepared, c_int> {
    stage_as(name, buf, count, datatype, peer, comm, dir, Shape::AsLaidOut)
}

/// [`prepare_as`] and [`Staged::fill`] in one.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn stage_as(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    peer: c_int,
    comm: Option<Handle>,
    dir: Direction,
    shape: Shape,
) -> Result<Prepared, c_int> {
    let p = prepare_as(name, buf, count, datatype, peer, comm, dir, shape)?;
    if let Prepared::Staged(s) = &p {
        s.fill(name, comm)?;
    }
    Ok(p)
}

/// Byte runs `(offset in the span, len)`, sorted and disjoint.
pub type Runs = Arc<[(usize, usize)]>;

/// One buffer argument: address, count, datatype, peer.
pub type BufArg = (*const c_void, i64, Handle, c_int);

/// Stages the two buffers of a send-receive (both `Direct` as given when they are host
/// memory, and the call goes straight through), each given to MPI as `Prepared::message`
/// says.
pub fn stage_pair(
    name: &'static str,
    comm: Handle,
    send: BufArg,
    recv: BufArg,
    recv_dir: Direction,
) -> Result<(Prepared, Prepared), c_int> {
    let out = stage_as(name, send.0, send.1, send.2, send.3, Some(comm), Direction::Send, Shape::Payload)?;
    let into = stage_as(name, recv.0, recv.1, recv.2, recv.3, Some(comm), recv_dir, Shape::Payload)?;
    if matches!((&out, &into), (Prepared::Direct(a), Prepared::Direct(b)) if std::ptr::eq(*a, send.0) && std::ptr::eq(*b, recv.0)) {
        stats::host_call();
    }
    Ok((out, into))
}

impl Staged {
    /// The address MPI is given: the staging buffer shifted so that the span's offset from
    /// the buffer address is the same as on the device.
    pub fn mpi_ptr(&self) -> *mut c_void {
        self.lease.ptr().cast::<u8>().wrapping_offset(-self.span.offset as isize).cast()
    }

    /// Copies the device span (or its datatype's blocks) to the staging buffer, if MPI reads it.
    pub fn fill(&self, name: &'static str, comm: Option<Handle>) -> Result<(), c_int> {
        if !self.fill {
            return Ok(());
        }
        if let (Some(form), Some(_)) = (&self.form, self.message) {
            // In MPI's packing order, into the staging buffer as MPI reads it.
            return self.window().blocks_to_host(name, comm, form);
        }
        if let Some(form) = &self.form {
            let copies = typemap::copies_of(form);
            // Many small blocks that fill most of the span cost less as one copy of it, unless
            // the pack kernel takes them.
            let calls = cuda::strided::summary(&copies).calls;
            if blocks_pay(calls, self.span.len, cuda::strided::summary(form).bytes) {
                return self.window().blocks_to_host(name, comm, &copies);
            }
        }
        self.to_host(name, comm, 0, self.span.len)
    }

    /// A received message fills the span as it is, byte for byte: no datatype gaps, nothing
    /// packed.
    pub fn contiguous(&self) -> bool {
        self.back == Back::Received && self.runs.is_none() && self.form.is_none() && self.packed.is_none() && self.message.is_none()
    }

    /// The device span and its staging buffer, for copies made without holding the request.
    pub fn window(&self) -> Window {
        let packed = self.packed.as_ref().map_or(std::ptr::null_mut(), Lease::ptr);
        let payload = self.message.is_some();
        Window { dev: self.dev, user: self.user, host: self.lease.ptr(), len: self.span.len, pinned: self.lease.is_pinned(), packed, payload }
    }

    pub fn to_host(&self, name: &'static str, comm: Option<Handle>, at: usize, len: usize) -> Result<(), c_int> {
        self.window().to_host(name, comm, at, len)
    }

    /// Copies back what MPI wrote. `status` is the status MPI filled for this operation (never
    /// `MPI_STATUS_IGNORE`), or null when the call has none (collectives); a cancelled
    /// receive copies nothing.
    pub fn deliver(&self, name: &'static str, comm: Option<Handle>, status: *mut c_void) -> Result<(), c_int> {
        deliver(self.window(), self.back, self.runs.as_deref(), self.form.as_ref(), name, comm, status, None)
    }
}

/// Copies back what MPI wrote into a staged span, as `back` says. `status` as for
/// [`Staged::deliver`]. With `later`, a copy of the span or of its runs is left for `later` to
/// wait for; messages that bring an envelope and datatypes copied along their blocks are in
/// place on return either way.
#[allow(clippy::too_many_arguments)]
pub fn deliver(
    w: Window,
    back: Back,
    runs: Option<&[(usize, usize)]>,
    form: Option<&typemap::Form>,
    name: &'static str,
    comm: Option<Handle>,
    status: *mut c_void,
    later: Option<&mut Deferred>,
) -> Result<(), c_int> {
    // A file read's status has no cancelled flag of its own (the library leaves the field as
    // the caller's status had it).
    if back == Back::Nothing || (back != Back::Read && !status.is_null() && cancelled(status)) {
        return Ok(());
    }
    if let Some(form) = form {
        return deliver_form(w, back, form, name, comm, status);
    }
    if back != Back::Read {
        if let Some(r) = ENVELOPES.get().and_then(|e| (e.landed)(name, comm, status, w, runs)) {
            return r;
        }
    }
    if let (Back::Span, Some(runs)) = (back, runs) {
        return w.copy_runs(name, comm, runs, later);
    }
    let len = match back {
        Back::Received | Back::Read => match received_bytes(status) {
            Some(n) => n.min(w.len),
            None => {
                log::error(format_args!(
                    "{name}: cannot tell how many bytes arrived; the device buffer {:p} was not updated",
                    w.user
                ));
                return Err(errors::raise(comm, abi::get().err_intern));
            }
        },
        _ => w.len,
    };
    match len {
        0 => Ok(()),
        _ => w.copy_runs(name, comm, &[(0, len)], later),
    }
}

/// Receives of at most this many bytes may be written by the stream (`cuda::signal`).
const SMALL_WRITES: usize = cuda::signal::SHARED_MAX_WRITES * 8;

/// Whether a copy along a datatype's blocks costs less than a copy of its span: the blocks
/// take few driver calls, or the pack kernel copies them in one launch, or they are too sparse
/// (under half the span) for the span to be worth its bytes and not so many that their calls
/// (~2-5 us each) cost more than any span a GPU holds.
fn blocks_pay(calls: usize, span: usize, payload: usize) -> bool {
    calls <= cuda::strided::FEW_CALLS || cuda::pack::expected() || (span > 2 * payload && calls <= 4096)
}

/// [`deliver`] along a datatype's blocks: all of them, or those of the bytes the status says
/// arrived (in packing order, as MPI fills a receive).
fn deliver_form(w: Window, back: Back, form: &typemap::Form, name: &'static str, comm: Option<Handle>, status: *mut c_void) -> Result<(), c_int> {
    let mut arrived = if status.is_null() { None } else { received_bytes(status) };
    // A file read never carries an envelope.
    if let (Some(e), Some(n), true, true) = (ENVELOPES.get(), arrived, back != Back::Read, w.payload) {
        // The envelope lies packed at the start of the staging buffer: the data it brings
        // lands there, and goes on along the blocks as any packed message.
        if n == e.bytes {
            if let Some(r) = (e.landed_packed)(name, comm, status, w.host, cuda::strided::summary(form).bytes) {
                r?;
                arrived = received_bytes(status);
            }
        }
    } else if let (Some(e), Some(n), true) = (ENVELOPES.get(), arrived, back != Back::Read) {
        if n == e.bytes {
            let Some(runs) = typemap::runs(form, MAX_RUNS as usize) else {
                log::error(format_args!("{name}: a device message into a datatype of more than {MAX_RUNS} runs; the device buffer {:p} was not updated", w.user));
                return Err(errors::raise(comm, abi::get().err_intern));
            };
            // In packing order: the envelope and the data it brings are read and spread along them.
            let runs: Vec<(usize, usize)> = runs.into_iter().map(|(at, len)| (at as usize, len)).collect();
            if let Some(r) = (e.landed)(name, comm, status, w, Some(&runs)) {
                return r;
            }
        }
    }
    let blocks = match back {
        Back::Received | Back::Read => match arrived {
            Some(n) => typemap::prefix(form, n),
            None => {
                log::error(format_args!("{name}: cannot tell how many bytes arrived; the device buffer {:p} was not updated", w.user));
                return Err(errors::raise(comm, abi::get().err_intern));
            }
        },
        _ => form.clone(),
    };
    if w.payload {
        // In MPI's packing order, from the staging buffer as MPI wrote it.
        return w.blocks_to_device(name, comm, &blocks);
    }
    // A few words are written by the stream itself where it can (`cuda::signal`), as for a
    // contiguous receive: on a GPU two ranks share, any copy to the device waits ~145 us.
    if w.packed.is_null() && cuda::strided::summary(&blocks).bytes <= SMALL_WRITES {
        if let Some(mut runs) = typemap::runs(&blocks, cuda::signal::SHARED_MAX_WRITES) {
            runs.sort_unstable();
            let runs: Vec<(usize, usize)> = runs.into_iter().map(|(at, len)| (at as usize, len)).collect();
            return w.runs_to_device(name, comm, &runs);
        }
    }
    w.blocks_to_device(name, comm, &typemap::copies_of(&blocks))
}

/// A staged span as plain addresses: valid while the staged buffer that made it lives.
#[derive(Clone, Copy)]
pub struct Window {
    pub dev: Device,
    /// The span in device memory, and its staging buffer.
    pub user: *mut c_void,
    pub host: *mut c_void,
    pub len: usize,
    /// The staging buffer is pinned memory.
    pub pinned: bool,
    /// The packed buffer the blocks cross through (`Staged::packed`), or null.
    pub packed: *mut c_void,
    /// The staging buffer holds the blocks' bytes packed in MPI's order, not the span
    /// (`Staged::message`): blocks cross to and from it in the order they are listed.
    pub payload: bool,
}

// SAFETY: device and staging addresses, usable from any thread.
unsafe impl Send for Window {}

impl Window {
    /// The first byte of the span in device memory.
    pub fn user(&self) -> *const c_void {
        self.user
    }

    /// Copies `len` bytes at `at` within the span from the device to the staging buffer.
    pub fn to_host(self, name: &'static str, comm: Option<Handle>, at: usize, len: usize) -> Result<(), c_int> {
        if len == 0 {
            return Ok(());
        }
        debug_assert!(at + len <= self.len);
        let src = self.user.cast::<u8>().wrapping_add(at).cast::<c_void>();
        let fail = |e| errors::cuda(name, comm, e, src, len, &self.dev);
        let ctx = InContext::enter(&self.dev).map_err(fail)?;
        // SAFETY: at + len lies within the staging buffer, which holds self.len bytes.
        let dst = unsafe { self.host.cast::<u8>().add(at) }.cast();
        ctx.to_host(dst, src, len, self.pinned).map_err(fail)?;
        stats::add(&stats::BYTES_TO_HOST, len);
        Ok(())
    }

    /// Copies the bytes of `blocks` (offsets in the span) from the device to the staging buffer.
    pub fn blocks_to_host(self, name: &'static str, comm: Option<Handle>, blocks: &typemap::Form) -> Result<(), c_int> {
        let bytes = cuda::strided::summary(blocks).bytes;
        let fail = |e| errors::cuda(name, comm, e, self.user, bytes, &self.dev);
        let ctx = InContext::enter(&self.dev).map_err(fail)?;
        if self.payload {
            ctx.strided_to_packed(self.host, self.user, blocks).map_err(fail)?;
        } else if self.packed.is_null() {
            ctx.strided_to_host(self.host, self.user, blocks).map_err(fail)?;
        } else {
            ctx.strided_to_packed(self.packed, self.user, blocks).map_err(fail)?;
            // SAFETY: the packed buffer holds the blocks' bytes; the span holds the blocks.
            unsafe { spread(self.packed, self.host, blocks, true) };
        }
        stats::add(&stats::BYTES_TO_HOST, bytes);
        Ok(())
    }

    /// Copies the bytes of `blocks` (offsets in the span) from the staging buffer to the
    /// device; no other device byte is written.
    pub fn blocks_to_device(self, name: &'static str, comm: Option<Handle>, blocks: &typemap::Form) -> Result<(), c_int> {
        let bytes = cuda::strided::summary(blocks).bytes;
        if bytes == 0 {
            return Ok(());
        }
        let fail = |e| errors::cuda(name, comm, e, self.user, bytes, &self.dev);
        let ctx = InContext::enter(&self.dev).map_err(fail)?;
        if self.payload {
            ctx.packed_to_device(self.user, self.host, blocks).map_err(fail)?;
        } else if self.packed.is_null() {
            ctx.strided_to_device(self.user, self.host, blocks).map_err(fail)?;
        } else {
            // SAFETY: as in `blocks_to_host`.
            unsafe { spread(self.packed, self.host, blocks, false) };
            ctx.packed_to_device(self.user, self.packed, blocks).map_err(fail)?;
        }
        stats::add(&stats::BYTES_TO_DEVICE, bytes);
        if config::get().debug {
            log::debug(format_args!("{name}: {bytes} bytes copied back to device buffer {:p} (GPU {})", self.user, self.dev.ordinal));
        }
        Ok(())
    }

    /// Copies the byte runs `(offset in the span, len)` (sorted, disjoint) from the staging
    /// buffer to the device.
    pub fn runs_to_device(self, name: &'static str, comm: Option<Handle>, runs: &[(usize, usize)]) -> Result<(), c_int> {
        self.copy_runs(name, comm, runs, None)
    }

    /// [`Window::runs_to_device`], leaving the wait to `later` (or waiting, without one).
    fn copy_runs(self, name: &'static str, comm: Option<Handle>, runs: &[(usize, usize)], later: Option<&mut Deferred>) -> Result<(), c_int> {
        let Some(&(first, _)) = runs.first() else { return Ok(()) };
        debug_assert!(runs.iter().all(|&(at, len)| at + len <= self.len));
        let at = self.user.cast::<u8>().wrapping_add(first).cast::<c_void>();
        let bytes: usize = runs.iter().map(|r| r.1).sum();
        let fail = |e| errors::cuda(name, comm, e, at, bytes, &self.dev);
        let ctx = InContext::enter(&self.dev).map_err(fail)?;
        ctx.runs_to_device(self.user, self.host, runs, later).map_err(fail)?;
        stats::add(&stats::BYTES_TO_DEVICE, bytes);
        if config::get().debug {
            log::debug(format_args!("{name}: {bytes} bytes copied back to device buffer {at:p} (GPU {})", self.dev.ordinal));
        }
        Ok(())
    }

    /// Copies `len` bytes at `at` within the span from the staging buffer to the device.
    pub fn to_device(self, name: &'static str, comm: Option<Handle>, at: usize, len: usize) -> Result<(), c_int> {
        if len == 0 {
            return Ok(());
        }
        self.runs_to_device(name, comm, &[(at, len)])
    }
}

/// Copies between packed bytes and their blocks in a span, in the order
/// `InContext::strided_to_packed` packs them: `out` from packed to span, else back.
///
/// # Safety
/// `packed` holds the blocks' bytes and `span` every block.
unsafe fn spread(packed: *mut c_void, span: *mut c_void, blocks: &[Strided], out: bool) {
    let mut at = packed.cast::<u8>();
    for b in blocks.iter().map(|b| b.ascending()) {
        for k in 0..b.planes as i64 {
            for r in 0..b.rows as i64 {
                let s = span.cast::<u8>().wrapping_offset((b.at + k * b.plane_pitch + r * b.pitch) as isize);
                // SAFETY: per the caller; the packed and the span buffers do not overlap.
                unsafe {
                    match out {
                        true => std::ptr::copy_nonoverlapping(at, s, b.len),
                        false => std::ptr::copy_nonoverlapping(s, at, b.len),
                    }
                    at = at.add(b.len);
                }
            }
        }
    }
}

/// Bytes of the message a status describes.
#[inline]
pub fn received_bytes(status: *mut c_void) -> Option<usize> {
    if status.is_null() {
        return None;
    }
    // SAFETY: a status MPI filled (or left zeroed), of the family's full size.
    if let Some(n) = unsafe { abi::get().status_bytes(status) } {
        return Some(n);
    }
    let p = real::pmpi()?;
    let mut n: i64 = 0;
    // SAFETY: status was filled by the receive (or left zeroed); MPI_BYTE counts bytes.
    let rc = unsafe { (p.get_elements_x)(status, abi::get().byte, &mut n) };
    (rc == 0).then(|| usize::try_from(n).ok()).flatten()
}

fn cancelled(status: *mut c_void) -> bool {
    let Some(p) = real::pmpi() else { return false };
    let mut flag: c_int = 0;
    // SAFETY: a status MPI filled.
    unsafe { (p.test_cancelled)(status, &mut flag) == 0 && flag != 0 }
}

/// The status a staged blocking receive gives MPI. It starts zeroed, so a count MPI did not
/// write reads as nothing received, and carries the caller's `MPI_ERROR`, which
/// single-completion calls leave alone; afterwards it is copied out unless the caller passed
/// `MPI_STATUS_IGNORE`. A null status that is not the family's `MPI_STATUS_IGNORE` goes to MPI
/// as it is, so MPI rejects it as it would without cudampi.
pub struct OwnStatus {
    status: abi::Status,
    caller: *mut c_void,
}

impl OwnStatus {
    pub fn new(caller: *mut c_void) -> OwnStatus {
        let abi = abi::get();
        let mut status = abi::Status::zeroed();
        if !caller.is_null() && !abi.is_status_ignore(caller) {
            let at = abi.status_error_offset;
            // SAFETY: the caller's status holds at least status_size bytes.
            unsafe { std::ptr::copy_nonoverlapping(caller.cast::<u8>().add(at), status.0.as_mut_ptr().add(at), 4) };
        }
        OwnStatus { status, caller }
    }

    /// A status that starts as the caller's whole status: for probes, whose status MPI leaves
    /// as it was when it reports no message.
    pub fn copy_of(caller: *mut c_void) -> OwnStatus {
        let abi = abi::get();
        let mut status = abi::Status::zeroed();
        if !caller.is_null() && !abi.is_status_ignore(caller) {
            // SAFETY: the caller's status holds at least status_size bytes.
            unsafe { std::ptr::copy_nonoverlapping(caller.cast::<u8>(), status.0.as_mut_ptr(), abi.status_size) };
        }
        OwnStatus { status, caller }
    }

    /// What MPI fills.
    pub fn for_mpi(&mut self) -> *mut c_void {
        if self.caller.is_null() && !abi::get().is_status_ignore(self.caller) {
            self.caller
        } else {
            self.status.as_mut_ptr()
        }
    }

    /// What MPI filled (still zeroed if MPI was handed the caller's null).
    pub fn filled(&mut self) -> *mut c_void {
        self.status.as_mut_ptr()
    }

    pub fn publish(self) {
        let abi = abi::get();
        if !self.caller.is_null() && !abi.is_status_ignore(self.caller) {
            // SAFETY: both hold at least status_size bytes.
            unsafe { std::ptr::copy_nonoverlapping(self.status.0.as_ptr(), self.caller.cast::<u8>(), abi.status_size) };
        }
    }
}
