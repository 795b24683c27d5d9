//! Windows whose device parts their owners serve: one-sided communication at the cost of the
//! bytes it moves where peers cannot map the memory (a member on another node, `CUDAMPI_IPC=0`,
//! a handle that does not open).
//!
//! `MPI_Win_create` exchanges one record per process (`Record`) when `mapped.rs` declined.
//! Where some part is device memory, each process whose part is device memory makes a mailbox
//! (`mailbox.rs`) and the library gets two windows: the program's, with no bytes for a device
//! part (a host part as it is, which the library serves as always), and cudampi's own over the
//! mailboxes, on a duplicate of the communicator, held in one `MPI_Win_lock_all` epoch from
//! creation to free. The program's synchronisation calls stay the library's, on the program's
//! window: the fence's barrier, post-start-complete-wait's messages and the passive-target
//! locks order every access, whatever its target's memory.
//!
//! An operation on a device part is written into its owner's mailbox through cudampi's window,
//! and the owner's progress thread carries it out on the device memory:
//! - *Put* (and an accumulate with `MPI_REPLACE`): the origin's payload, packed, in entries of
//!   at most a quarter of the ring; the call returns once they are in the mailbox, so the
//!   origin's buffer is free at once, as MPI allows.
//! - *Get*: an entry names the byte ranges, the thread copies them into it, and the origin
//!   reads them and marks the entry taken.
//! - *Accumulates, fetch-and-op, compare-and-swap*: the thread reads the target's bytes into
//!   the entry and holds every later entry back while the origin combines them with its own
//!   with the library's `MPI_Reduce_local` (any predefined operation and type) and writes the
//!   result back. So accumulates on one part never interleave, from any number of origins and
//!   whatever their buffers, and each origin's apply in its program order.
//! - *Completion*: a call that completes operations at a target (fence, complete, unlock,
//!   flush) first waits until that target's thread has carried out this process's entries (its
//!   `applied` counter passed them), then makes the library's call. A call after which peers
//!   may read this process's own part (fence, post, unlock, sync, free) waits for the program's
//!   work on the legacy default stream first, as for mapped windows.
//!
//! Nothing of a synchronisation grows with the window: the model is `MPI_WIN_UNIFIED`.
//!
//! It may use every layer below the handlers; `windows.rs` and `rma.rs` call it.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

use crate::base::{config, log};
use crate::cuda::copy::check as cuda_check;
use crate::cuda::{self, driver, CudaError, Device, InContext, Location};
use crate::engine::kinds;
use crate::fastpath::held;
use crate::handlers::mailbox::{self, EntryHead, Mailbox};
use crate::handlers::mapped::{Target, What};
use crate::handlers::side::{accumulate_element, device_window_attribute, lock, reduce_local, settle_stream, too_complex, Carried, Side, Table, matching};
use crate::mpi::abi::{self, Handle};
use crate::mpi::{errors, real, typemap};
use crate::staging::pool;

/// One process's account of its part, as exchanged at `MPI_Win_create`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Record {
    /// 1: device memory; 2: memory no one can read; 0: host memory, or none.
    kind: u32,
    _pad: u32,
    size: u64,
    disp_unit: i64,
    /// The ring of its mailbox (a device part's).
    ring: u64,
}

const RECORD_BYTES: c_int = std::mem::size_of::<Record>() as c_int;

struct Part {
    device: bool,
    size: usize,
    disp_unit: i64,
    ring: u64,
}

pub struct Served {
    /// The window's communicator duplicated, and cudampi's window over the mailboxes on it.
    comm: Handle,
    mail: Handle,
    parts: Vec<Part>,
    /// This process's own part, where it is device memory.
    own: Option<(*mut c_void, Device)>,
    /// Its bytes: the value `MPI_WIN_SIZE` points to.
    size_attribute: isize,
    mailbox: Option<Arc<Mailbox>>,
    /// The thread serves the mailbox (a dynamic window's from its first attach on).
    serving: bool,
    /// A dynamic window: origins name attached device memory by its tagged address
    /// ([`TAG`]), and the library's window serves the rest.
    dynamic: bool,
    /// Per target, the end of this process's last entry not yet known to be carried out.
    owed: BTreeMap<c_int, u64>,
}

// SAFETY: handles and addresses, used under the window's mutex.
unsafe impl Send for Served {}

static SERVED: Table<Served> = Table::new();

/// Whether any window is served.
pub fn any() -> bool {
    SERVED.any()
}

fn get(win: Handle) -> Option<Arc<Mutex<Served>>> {
    SERVED.get(win)
}

/// Every process's record on `comm` (`None` on an intercommunicator, where no window is
/// served). `Err` is an MPI code.
fn exchange(comm: Handle, me: Record) -> Result<Option<Vec<Record>>, c_int> {
    let (abi, p) = (abi::get(), real::pmpi().ok_or(abi::get().err_intern)?);
    let (mut n, mut inter) = (0, 0);
    // SAFETY: valid out-pointers; the caller's communicator.
    unsafe {
        if (p.comm_test_inter)(comm, &mut inter) != 0 || inter != 0 || (p.comm_size)(comm, &mut n) != 0 || n <= 0 {
            return Ok(None);
        }
    }
    let mut all = vec![me; n as usize];
    // SAFETY: one record in, `n` out, as bytes.
    match unsafe { (p.allgather)((&me as *const Record).cast(), RECORD_BYTES, abi.byte, all.as_mut_ptr().cast(), RECORD_BYTES, abi.byte, comm) } {
        0 => Ok(Some(all)),
        rc => Err(rc),
    }
}

/// The collective step of `MPI_Win_create(_c)` on `comm` where the window is not mapped: every
/// process calls it, whatever its memory, and all reach the same answer; `None` leaves the
/// window to the public-copy path of `windows.rs` (no device part anywhere, memory no one can
/// read, `CUDAMPI_RMA_RING=0`). `Err` is an MPI code (raised on `comm`).
pub fn prepare(name: &'static str, base: *mut c_void, size: isize, disp_unit: i64, comm: Handle) -> Result<Option<Box<Served>>, c_int> {
    let abi = abi::get();
    let Some(p) = real::pmpi() else { return Ok(None) };
    let ring = config::get().rma_ring;
    let (kind, dev) = match cuda::locate(base) {
        Location::Device(d) if size > 0 && !d.managed => (1, Some(d)),
        Location::Unreadable if size > 0 => (2, None),
        _ => (0, None),
    };
    let me = Record { kind, _pad: 0, size: size.max(0) as u64, disp_unit, ring: if kind == 1 { ring as u64 } else { 0 } };
    let Some(all) = exchange(comm, me)? else { return Ok(None) };
    let n = all.len();
    if !all.iter().any(|r| r.kind == 1) || all.iter().any(|r| r.kind == 2 || (r.kind == 1 && r.ring == 0)) {
        return Ok(None);
    }
    let mailbox = dev.and_then(|d| Mailbox::new(ring, base, size as usize).filter(|m| m.bind(d))).map(Arc::new);
    let ok = (dev.is_none() || mailbox.is_some()) as u8;
    let mut oks = vec![0u8; n];
    // SAFETY: one byte in, `n` out.
    let rc = unsafe { (p.allgather)((&ok as *const u8).cast(), 1, abi.byte, oks.as_mut_ptr().cast(), 1, abi.byte, comm) };
    if rc != 0 {
        return Err(rc);
    }
    if oks.iter().any(|&b| b != 1) {
        log::debug(format_args!("{name}: a process could not make the mailbox of its device part: the window keeps a public copy"));
        return Ok(None);
    }
    let parts = all.iter().map(|r| Part { device: r.kind == 1, size: r.size as usize, disp_unit: r.disp_unit, ring: r.ring }).collect();
    let mut s = Served { comm: 0, mail: 0, parts, own: dev.map(|d| (base, d)), size_attribute: size, mailbox, serving: false, dynamic: false, owed: BTreeMap::new() };
    s.open(name, comm)?;
    Ok(Some(Box::new(s)))
}

/// The collective step of `MPI_Win_create_dynamic` on `comm`: every process that can reach
/// device memory makes a mailbox, bound to a GPU when device memory is first attached; `None`
/// where no process can (no CUDA driver, `CUDAMPI_RMA_RING=0`), and device memory attached
/// there keeps a public copy. `Err` is an MPI code (raised on `comm`).
pub fn prepare_dynamic(name: &'static str, comm: Handle) -> Result<Option<Box<Served>>, c_int> {
    if real::pmpi().is_none() {
        return Ok(None);
    }
    let ring = config::get().rma_ring;
    let mailbox = (ring > 0 && driver::get().is_some()).then(|| Mailbox::new(ring, std::ptr::null_mut(), 0)).flatten().map(Arc::new);
    let me = Record { kind: mailbox.is_some() as u32, _pad: 0, size: 0, disp_unit: 1, ring: mailbox.as_ref().map_or(0, |_| ring as u64) };
    let Some(all) = exchange(comm, me)? else { return Ok(None) };
    if !all.iter().any(|r| r.kind == 1) {
        return Ok(None);
    }
    let parts = all.iter().map(|r| Part { device: r.kind == 1, size: usize::MAX, disp_unit: 1, ring: r.ring }).collect();
    let mut s = Served { comm: 0, mail: 0, parts, own: None, size_attribute: 0, mailbox, serving: false, dynamic: true, owed: BTreeMap::new() };
    s.open(name, comm)?;
    Ok(Some(Box::new(s)))
}

impl Served {
    /// The collective rest of the creation: cudampi's communicator and its window over the
    /// mailboxes, in its epoch, and the thread serving this process's mailbox once it is
    /// bound to a GPU. On failure everything made is released.
    fn open(&mut self, name: &'static str, comm: Handle) -> Result<(), c_int> {
        let (abi, p) = (abi::get(), real::pmpi().ok_or(abi::get().err_intern)?);
        // SAFETY: valid out-pointers; the caller's communicator, then cudampi's own.
        let rc = unsafe { (p.comm_dup)(comm, &mut self.comm) };
        if rc != 0 {
            self.comm = 0;
            return Err(rc);
        }
        let (at, bytes) = self.mailbox.as_ref().map_or((std::ptr::null_mut(), 0), |m| m.memory());
        // SAFETY: the mailbox's memory (none without one), on cudampi's communicator.
        let rc = unsafe {
            (p.comm_set_errhandler)(self.comm, abi.errors_return);
            match (p.win_create)(at, bytes as isize, 1, abi.info_null, self.comm, &mut self.mail) {
                0 => {
                    (p.win_set_errhandler)(self.mail, abi.errors_return);
                    (p.win_lock_all)(abi.mode_nocheck, self.mail)
                }
                rc => {
                    self.mail = 0;
                    rc
                }
            }
        };
        if rc != 0 {
            self.release();
            return Err(rc);
        }
        if !self.dynamic {
            if let Err(rc) = self.start_serving(name) {
                self.release();
                return Err(rc);
            }
        }
        Ok(())
    }

    /// Has the thread serve this process's mailbox from now on.
    fn start_serving(&mut self, name: &'static str) -> Result<(), c_int> {
        let Some(m) = self.mailbox.as_ref().filter(|_| !self.serving) else { return Ok(()) };
        if !mailbox::serve(m.clone()) {
            log::error(format_args!("{name}: cudampi could not start the thread that serves device windows"));
            return Err(abi::get().err_other);
        }
        self.serving = true;
        Ok(())
    }
}

impl Carried for Served {
    fn register(self, win: Handle) {
        SERVED.insert(win, self);
    }

    fn own_device(&self) -> bool {
        self.own.is_some()
    }

    fn discard(mut self) {
        self.release();
    }
}

impl Served {
    /// Ends cudampi's epoch and frees its window and communicator (collective), and stops
    /// serving the mailbox.
    fn release(&mut self) {
        if let Some(p) = real::pmpi() {
            if self.mail != 0 {
                // SAFETY: cudampi's window, in the epoch opened at `prepare`.
                unsafe {
                    (p.win_unlock_all)(self.mail);
                    (p.win_free)(&mut self.mail);
                }
                self.mail = 0;
            }
            if self.comm != 0 {
                // SAFETY: the communicator made at `prepare`.
                unsafe { (p.comm_free)(&mut self.comm) };
                self.comm = 0;
            }
        }
        if let Some(m) = self.mailbox.take() {
            if self.dynamic {
                m.ranges().into_iter().for_each(|(start, len)| unlist(start, len));
            }
            mailbox::forget(&m);
        }
    }

    fn ring(&self, t: c_int) -> u64 {
        self.parts[t as usize].ring
    }

    /// Where the entry at `pos` of `t`'s ring starts in its mailbox.
    fn entry_at(&self, t: c_int, pos: u64) -> usize {
        mailbox::HEAD + (pos % self.ring(t)) as usize
    }

    fn flush(&self, t: c_int) -> Result<(), c_int> {
        let p = real::pmpi().ok_or(abi::get().err_intern)?;
        // SAFETY: cudampi's window, in its epoch.
        check(unsafe { (p.win_flush)(t, self.mail) })
    }

    /// `bytes` into `t`'s mailbox at `at`, complete at the target on return.
    fn write(&self, t: c_int, at: usize, bytes: &[u8]) -> Result<(), c_int> {
        self.put_bytes(t, at, bytes)?;
        self.flush(t)
    }

    /// `bytes` into `t`'s mailbox at `at`, complete at the next flush, before which the caller
    /// keeps them.
    fn put_bytes(&self, t: c_int, at: usize, bytes: &[u8]) -> Result<(), c_int> {
        let (p, abi) = (real::pmpi().ok_or(abi::get().err_intern)?, abi::get());
        let n = bytes.len() as c_int;
        // SAFETY: the caller keeps `bytes` until the flush; the range lies in the mailbox (the
        // ring holds every entry).
        check(unsafe { (p.put)(bytes.as_ptr().cast(), n, abi.byte, t, at as isize, n, abi.byte, self.mail) })
    }

    /// `out.len()` bytes of `t`'s mailbox at `at`.
    fn read(&self, t: c_int, at: usize, out: &mut [u8]) -> Result<(), c_int> {
        let (p, abi) = (real::pmpi().ok_or(abi::get().err_intern)?, abi::get());
        let n = out.len() as c_int;
        // SAFETY: as for `write`.
        check(unsafe { (p.get)(out.as_mut_ptr().cast(), n, abi.byte, t, at as isize, n, abi.byte, self.mail) })?;
        self.flush(t)
    }

    fn word(&self, t: c_int, at: usize) -> Result<u64, c_int> {
        let mut w = [0u8; 8];
        self.read(t, at, &mut w)?;
        Ok(u64::from_ne_bytes(w))
    }

    fn set_state(&self, t: c_int, pos: u64, state: u64) -> Result<(), c_int> {
        self.write(t, self.entry_at(t, pos), &(pos | state).to_ne_bytes())
    }

    /// Waits until the owner's reply to the entry at `pos` is one of `replies`; which it is.
    fn until_reply(&self, t: c_int, pos: u64, replies: &[u64]) -> Result<u64, c_int> {
        poll(|| {
            let w = self.word(t, self.entry_at(t, pos) + mailbox::REPLY_AT)?;
            Ok(replies.iter().find(|&&s| w == pos | s).copied())
        })
    }

    /// Reserves `len` bytes of `t`'s ring, free to write on return: a reservation that would
    /// wrap round the ring's end is written off as padding and the next taken.
    fn reserve(&self, t: c_int, len: usize) -> Result<u64, c_int> {
        let p = real::pmpi().ok_or(abi::get().err_intern)?;
        let (long_long, sum) = kinds::long_long_and_sum();
        let ring = self.ring(t);
        loop {
            let add = len as i64;
            let mut pos: i64 = 0;
            // SAFETY: one counter of the mailbox's header; valid buffers.
            check(unsafe { (p.fetch_and_op)((&add as *const i64).cast(), (&mut pos as *mut i64).cast(), long_long, t, mailbox::RESERVED_AT as isize, sum, self.mail) })?;
            self.flush(t)?;
            let pos = pos as u64;
            let end = pos + len as u64;
            if end > ring {
                poll(|| Ok((self.word(t, mailbox::RELEASED_AT)? >= end - ring).then_some(())))?;
            }
            if pos % ring + len as u64 <= ring {
                return Ok(pos);
            }
            let pad = EntryHead { len: len as u64, kind: mailbox::PAD, ..EntryHead::default() };
            self.write(t, self.entry_at(t, pos), as_bytes(&pad))?;
            self.set_state(t, pos, mailbox::FILLED)?;
        }
    }

    /// Writes an entry of `kind` over `piece` into `t`'s mailbox, with `data` as its payload
    /// (a get's and an update's payload is the thread's to fill); its position.
    fn post(&mut self, t: c_int, kind: u32, piece: &Piece, data: Option<&[u8]>) -> Result<u64, c_int> {
        let (runs, bytes) = (&piece.runs[..], piece.bytes);
        let len = mailbox::entry_len(runs.len(), bytes);
        let pos = self.reserve(t, len)?;
        let head = EntryHead { len: len as u64, kind, runs: runs.len() as u32, bytes: bytes as u64, ..EntryHead::default() };
        let mut body = Vec::with_capacity(mailbox::payload_at(runs.len()));
        body.extend_from_slice(as_bytes(&head));
        for &(off, n) in runs {
            body.extend_from_slice(&off.to_ne_bytes());
            body.extend_from_slice(&(n as u64).to_ne_bytes());
        }
        self.put_bytes(t, self.entry_at(t, pos), &body)?;
        if let Some(d) = data.filter(|d| !d.is_empty()) {
            self.put_bytes(t, self.payload(t, pos, runs.len()), d)?;
        }
        self.flush(t)?;
        self.set_state(t, pos, mailbox::FILLED)?;
        let end = pos + len as u64;
        let owed = self.owed.entry(t).or_insert(end);
        *owed = (*owed).max(end);
        Ok(pos)
    }

    /// Where the payload of the entry at `pos` with `runs` runs starts in `t`'s mailbox.
    fn payload(&self, t: c_int, pos: u64, runs: usize) -> usize {
        self.entry_at(t, pos) + mailbox::payload_at(runs)
    }

    /// The operations' own steps return the library's codes as they are; these, which carry
    /// out one call's operation, raise them on the window once.
    fn put(&mut self, errh: Option<Handle>, t: c_int, runs: &[(u64, usize)], data: &[u8]) -> Result<(), c_int> {
        let mut at = 0;
        for piece in pieces(runs, self.entry(t), 1) {
            self.post(t, mailbox::PUT, &piece, Some(&data[at..at + piece.bytes])).map_err(|rc| errors::raise(errh, rc))?;
            at += piece.bytes;
        }
        Ok(())
    }

    /// A get into host memory, in pieces: the next piece is asked for before this one is read,
    /// so that the owner copies it out of device memory meanwhile.
    fn get(&mut self, name: &'static str, errh: Option<Handle>, t: c_int, runs: &[(u64, usize)], out: &mut [u8]) -> Result<(), c_int> {
        let mut at = 0;
        self.get_pieces(name, errh, t, runs, |s, pos, runs, n| {
            s.read(t, s.payload(t, pos, runs), &mut out[at..at + n]).map_err(|rc| errors::raise(errh, rc))?;
            at += n;
            Ok(())
        })
    }

    /// Asks for the pieces of a get, two ahead, and hands each to `take` (with its position, its
    /// number of runs and its bytes) once the owner copied it into the mailbox; a piece asked
    /// for and not taken after a failure is given up.
    fn get_pieces(&mut self, name: &'static str, errh: Option<Handle>, t: c_int, runs: &[(u64, usize)], mut take: impl FnMut(&mut Served, u64, usize, usize) -> Result<(), c_int>) -> Result<(), c_int> {
        let raise = |rc| errors::raise(errh, rc);
        let mut asked: std::collections::VecDeque<(u64, usize, usize)> = std::collections::VecDeque::new();
        let mut done = Ok(());
        let mut pieces = pieces(runs, self.entry(t), 1).into_iter();
        loop {
            if done.is_ok() && asked.len() < 2 {
                if let Some(piece) = pieces.next() {
                    match self.post(t, mailbox::GET, &piece, None) {
                        Ok(pos) => asked.push_back((pos, piece.runs.len(), piece.bytes)),
                        Err(rc) => done = Err(raise(rc)),
                    }
                    if done.is_ok() {
                        continue;
                    }
                }
            }
            let Some((pos, runs, n)) = asked.pop_front().filter(|_| done.is_ok()) else { break };
            done = match self.until_reply(t, pos, &[mailbox::APPLIED, mailbox::FAILED]).map_err(raise) {
                Ok(mailbox::FAILED) => Err(failed(name, errh, t)),
                Ok(_) => take(self, pos, runs, n).and_then(|()| self.set_state(t, pos, mailbox::TAKEN).map_err(raise)),
                Err(rc) => Err(rc),
            };
        }
        for (pos, _, _) in asked {
            let _ = self.set_state(t, pos, mailbox::TAKEN);
        }
        done
    }

    /// A put from `n` contiguous bytes of device memory at `src`, in pieces: the next piece is
    /// copied out of device memory into a pinned buffer while the library writes this one.
    fn put_from_device(&mut self, name: &'static str, errh: Option<Handle>, t: c_int, runs: &[(u64, usize)], src: *const c_void, dev: &Device) -> Result<(), c_int> {
        let pieces = pieces(runs, self.entry(t), 1);
        let total: usize = pieces.iter().map(|p| p.bytes).sum();
        let fail = |e: CudaError| errors::cuda(name, errh, e, src, total, dev);
        let ctx = InContext::enter(dev).map_err(fail)?;
        let d = ctx.driver();
        let bufs = two_buffers(name, errh, self.chunk(t), &ctx)?;
        let copy_out = |k: usize, at: usize| {
            // SAFETY: the piece lies in the origin's payload; the buffer holds a piece.
            cuda_check("cuMemcpyDtoHAsync", unsafe { (d.memcpy_dtoh_async)(bufs[k % 2].ptr(), src as u64 + at as u64, pieces[k].bytes, std::ptr::null_mut()) })
        };
        let mut at = 0;
        let mut done = copy_out(0, 0).map_err(fail);
        for (k, piece) in pieces.iter().enumerate() {
            done = done.and_then(|()| ctx.synchronize().map_err(fail));
            if done.is_ok() && k + 1 < pieces.len() {
                done = copy_out(k + 1, at + piece.bytes).map_err(fail);
            }
            if done.is_err() {
                break;
            }
            // SAFETY: the buffer holds the piece's bytes, copied above.
            let data = unsafe { std::slice::from_raw_parts(bufs[k % 2].ptr().cast::<u8>(), piece.bytes) };
            if let Err(rc) = self.post(t, mailbox::PUT, piece, Some(data)) {
                done = Err(errors::raise(errh, rc));
                break;
            }
            at += piece.bytes;
        }
        // No copy may still land in a buffer given back.
        let _ = ctx.synchronize();
        done
    }

    /// A get into contiguous device memory at `dst`, in pieces asked for as `get` does: each
    /// piece goes on to the device through a pinned buffer while the next is read.
    fn get_to_device(&mut self, name: &'static str, errh: Option<Handle>, t: c_int, runs: &[(u64, usize)], dst: *mut c_void, dev: &Device) -> Result<(), c_int> {
        let total: usize = runs.iter().map(|r| r.1).sum();
        let fail = |e: CudaError| errors::cuda(name, errh, e, dst, total, dev);
        let ctx = InContext::enter(dev).map_err(fail)?;
        let d = ctx.driver();
        let bufs = two_buffers(name, errh, self.chunk(t), &ctx)?;
        // Each buffer's event marks its last copy to the device, so that a buffer is refilled
        // once its own copy is done while the other's may still run.
        let mut events = [std::ptr::null_mut(); 2];
        // SAFETY: valid out-pointers; 2: no timing.
        let made = events.iter_mut().try_for_each(|e| cuda_check("cuEventCreate", unsafe { (d.event_create)(e, 2) }));
        if let Err(e) = made {
            for ev in events.into_iter().filter(|ev| !ev.is_null()) {
                // SAFETY: made above, never recorded.
                unsafe { (d.event_destroy)(ev) };
            }
            return Err(fail(e));
        }
        let (mut k, mut at) = (0usize, 0usize);
        let done = self.get_pieces(name, errh, t, runs, |s, pos, runs, n| {
            let event = events[k % 2];
            if k >= 2 {
                // SAFETY: an event this call recorded.
                poll_cuda(|| unsafe { (d.event_query)(event) }).map_err(fail)?;
            }
            // SAFETY: the buffer holds a piece.
            let buf = unsafe { std::slice::from_raw_parts_mut(bufs[k % 2].ptr().cast::<u8>(), n) };
            s.read(t, s.payload(t, pos, runs), buf).map_err(|rc| errors::raise(errh, rc))?;
            // SAFETY: the piece lies in the result's payload; the event is this call's.
            unsafe {
                cuda_check("cuMemcpyHtoDAsync", (d.memcpy_htod_async)(dst as u64 + at as u64, buf.as_ptr().cast(), n, std::ptr::null_mut())).map_err(fail)?;
                cuda_check("cuEventRecord", (d.event_record)(event, std::ptr::null_mut())).map_err(fail)?;
            }
            (k, at) = (k + 1, at + n);
            Ok(())
        });
        // No copy may still read a buffer given back.
        let synced = ctx.synchronize().map_err(fail);
        for e in events {
            // SAFETY: made above, no longer recorded.
            unsafe { (d.event_destroy)(e) };
        }
        done.and(synced)
    }

    /// Read-modify-write of `runs` in pieces of whole elements of `grain` bytes: `f` gets the
    /// old bytes of a piece and the piece's offset in the payload, changes them in place and
    /// says whether they are to be written back.
    fn update(
        &mut self,
        name: &'static str,
        errh: Option<Handle>,
        t: c_int,
        runs: &[(u64, usize)],
        grain: usize,
        mut f: impl FnMut(&mut [u8], usize) -> Result<bool, c_int>,
    ) -> Result<(), c_int> {
        let mut at = 0;
        let raise = |rc| errors::raise(errh, rc);
        for piece in pieces(runs, self.entry(t), grain) {
            let n = piece.bytes;
            let pos = self.post(t, mailbox::UPDATE, &piece, None).map_err(raise)?;
            if self.until_reply(t, pos, &[mailbox::OLD, mailbox::FAILED]).map_err(raise)? == mailbox::FAILED {
                return Err(failed(name, errh, t));
            }
            let payload = self.payload(t, pos, piece.runs.len());
            let mut old = vec![0u8; n];
            let changed = self.read(t, payload, &mut old).map_err(raise).and_then(|()| f(&mut old, at));
            match changed {
                Ok(true) => {
                    self.write(t, payload, &old).map_err(raise)?;
                    self.set_state(t, pos, mailbox::NEW).map_err(raise)?;
                }
                // The thread waits for an answer whatever happened here.
                Ok(false) => self.set_state(t, pos, mailbox::SAME).map_err(raise)?,
                Err(rc) => {
                    let _ = self.set_state(t, pos, mailbox::SAME);
                    return Err(rc);
                }
            }
            at += n;
        }
        Ok(())
    }

    /// Most bytes of one entry in `t`'s ring, head and runs included: a quarter of it, so
    /// that entries of whole pieces tile the ring. An origin asks for two pieces of a get
    /// ahead; when an entry was a little over a quarter, only three fitted, and the third piece
    /// waited for the first's space to be released: on one H200 (2026-11-29, 64 MiB gets, IPC
    /// off) reserving took 270 us per piece of 4 MiB, 4.2 ms of a 14.2 ms get, and 0.7 ms of
    /// 10.9 once four entries fitted. At least a quarter of the smallest ring (64 KiB), which
    /// leaves room for an element after the head and a run.
    fn entry(&self, t: c_int) -> usize {
        (self.ring(t) as usize / 4) / mailbox::GRAIN * mailbox::GRAIN
    }

    /// Most payload bytes of one entry: one run's.
    fn chunk(&self, t: c_int) -> usize {
        self.entry(t) - mailbox::payload_at(1)
    }

    /// Waits until the targets' threads carried out this process's entries (`owed`: none for
    /// `None`, every target's for `Some(None)`, `t`'s for `Some(Some(t))`), and with `own`,
    /// until the program's work on the legacy default stream is done, which may write this
    /// process's own part.
    fn settle(&mut self, name: &'static str, errh: Option<Handle>, owed: Option<Option<c_int>>, own: bool) -> Result<(), c_int> {
        let mine = |t: c_int| owed.is_some_and(|o| o.map_or(true, |x| x == t));
        let owed: Vec<(c_int, u64)> = self.owed.iter().filter(|(t, _)| mine(**t)).map(|(t, e)| (*t, *e)).collect();
        for (t, end) in owed {
            poll(|| Ok((self.word(t, mailbox::APPLIED_AT)? >= end).then_some(()))).map_err(|rc| errors::raise(errh, rc))?;
            self.owed.remove(&t);
        }
        // A dynamic window's device memory is the GPU its mailbox was bound to at the first
        // attach: without this wait, a pageable copy the program made into attached memory
        // could still land after a peer's put there (seen on an H200 with MPICH 5, 1 run in
        // 2 of rma_device).
        let dev = self.own.map(|(_, dev)| dev).or_else(|| self.mailbox.as_ref().and_then(|m| m.device()));
        match dev {
            Some(dev) if own => settle_stream(name, errh, &dev, 0),
            _ => Ok(()),
        }
    }
}

/// The two buffers a streamed put or get alternates between, pinned where the pool can.
fn two_buffers(name: &'static str, errh: Option<Handle>, chunk: usize, ctx: &InContext) -> Result<[pool::Lease; 2], c_int> {
    match (pool::lease(chunk, ctx), pool::lease(chunk, ctx)) {
        (Some(a), Some(b)) => Ok([a, b]),
        _ => Err(errors::no_mem(name, errh, chunk)),
    }
}

/// Polls a driver query (`cuEventQuery`) until it answers done.
fn poll_cuda(mut query: impl FnMut() -> driver::CuResult) -> Result<(), CudaError> {
    loop {
        match query() {
            0 => return Ok(()),
            600 => std::hint::spin_loop(),
            code => return Err(CudaError { call: "cuEventQuery", code }),
        }
    }
}

fn check(rc: c_int) -> Result<(), c_int> {
    match rc {
        0 => Ok(()),
        rc => Err(rc),
    }
}

/// Polls `f` until it answers, keeping the library progressing meanwhile (each round is a
/// call of it).
fn poll<T>(mut f: impl FnMut() -> Result<Option<T>, c_int>) -> Result<T, c_int> {
    let mut round = 0u32;
    loop {
        if let Some(v) = f()? {
            return Ok(v);
        }
        round = round.wrapping_add(1);
        if round % 16 == 0 {
            std::thread::yield_now();
        }
    }
}

fn as_bytes(h: &EntryHead) -> &[u8] {
    // SAFETY: a plain `repr(C)` struct of integers, without padding.
    unsafe { std::slice::from_raw_parts((h as *const EntryHead).cast(), mailbox::ENTRY_HEAD) }
}

fn failed(name: &'static str, errh: Option<Handle>, t: c_int) -> c_int {
    log::error(format_args!("{name}: rank {t} could not carry out the operation on its device memory (its own message says why)"));
    errors::raise(errh, abi::get().err_other)
}

/// One entry's share of an operation: its byte runs at the target, and their sum.
#[derive(Default)]
struct Piece {
    runs: Vec<(u64, usize)>,
    bytes: usize,
}

/// `runs` in pieces whose entries take at most `entry` bytes, head and runs included, a run
/// cut only at a multiple of `grain` bytes (`entry` leaves room for an element after the head
/// and one run).
fn pieces(runs: &[(u64, usize)], entry: usize, grain: usize) -> Vec<Piece> {
    // The payload bytes left in the current piece for one more run.
    let left = |cur: &Piece| entry.saturating_sub(mailbox::payload_at(cur.runs.len() + 1) + cur.bytes);
    let (mut out, mut cur) = (Vec::new(), Piece::default());
    for &(mut off, mut len) in runs {
        while len > 0 {
            let room = left(&cur);
            let take = if len <= room { len } else { room / grain * grain };
            if take == 0 {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            cur.runs.push((off, take));
            (cur.bytes, off, len) = (cur.bytes + take, off + take as u64, len - take);
            if left(&cur) < grain {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.runs.is_empty() {
        out.push(cur);
    }
    out
}

/// The byte runs `(offset in the part, bytes)` of `count` elements of `datatype` at
/// displacement `disp`, in MPI's order; `Err` past the part's end.
fn target_runs(name: &'static str, errh: Option<Handle>, part: &Part, target: &Side, disp: isize) -> Result<Vec<(u64, usize)>, c_int> {
    let span = target.t.span(target.count).map_err(|e| errors::raise(errh, e))?;
    let origin = disp as i64 * part.disp_unit;
    let first = origin + span.offset;
    if disp < 0 || first < 0 || first as u64 + span.len as u64 > part.size as u64 {
        log::error(format_args!("{name}: bytes {first} to {} of the target's window, which has {} bytes", first + span.len as i64, part.size));
        return Err(errors::raise(errh, abi::get().err_rma_range));
    }
    if target.bytes() == 0 {
        return Ok(Vec::new());
    }
    if target.contiguous() {
        return Ok(vec![(origin as u64, target.bytes())]);
    }
    let (at, form) = target.blocks().ok_or_else(|| too_complex(name, errh))?;
    let runs = typemap::runs(&form, 1 << 24).ok_or_else(|| too_complex(name, errh))?;
    Ok(runs.into_iter().filter(|r| r.1 > 0).map(|(o, n)| ((origin + at as i64 + o) as u64, n)).collect())
}

/// The tag of an address within device memory attached to a served dynamic window, as
/// `MPI_Get_address` gives it: bit 62, which no user-space address has on x86-64 or AArch64.
/// Sums and differences of addresses within one attached range keep it or cancel it, as the
/// displacement arithmetic of MPI-4.1 §12.2.4 needs; an origin finds it in the displacement
/// and serves the operation.
pub const TAG: u64 = 1 << 62;

/// Device memory attached to served dynamic windows, every window's: (start, length, windows
/// it is attached to), for `MPI_Get_address`.
static ATTACHED: Mutex<Vec<(u64, u64, usize)>> = Mutex::new(Vec::new());
static N_ATTACHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn unlist(start: u64, len: u64) {
    let mut a = lock(&ATTACHED);
    if let Some(i) = a.iter().position(|r| (r.0, r.1) == (start, len)) {
        a[i].2 -= 1;
        if a[i].2 == 0 {
            a.remove(i);
        }
    }
    N_ATTACHED.store(a.len(), std::sync::atomic::Ordering::Relaxed);
}

/// `MPI_Win_attach` of device memory on `dev` to a served dynamic window: origins name it by
/// its tagged address from now on, and the library gets nothing. `None` leaves it to the
/// public-copy path (not a served window, or no mailbox here). The same range attached to a
/// second window is accepted; one overlapping attached device memory without being it is
/// refused (`MPI_ERR_RMA_ATTACH`), as on the public-copy path.
pub fn attach(name: &'static str, win: Handle, base: *mut c_void, size: isize, dev: Device) -> Option<c_int> {
    let s = get(win)?;
    let mut s = lock(&s);
    let m = s.mailbox.clone().filter(|_| s.dynamic)?;
    let errh = errors::on_window(win);
    let (start, len) = (base as u64, size as u64);
    {
        let mut a = lock(&ATTACHED);
        match a.iter().position(|r| start < r.0 + r.1 && r.0 < start + len) {
            Some(i) if (a[i].0, a[i].1) == (start, len) => a[i].2 += 1,
            Some(i) => {
                log::error(format_args!(
                    "{name}: device memory {base:p} ({len} bytes) overlaps device memory {:#x} ({} bytes) attached already; attach the same range or ranges apart",
                    a[i].0, a[i].1
                ));
                return Some(errors::raise(errh, abi::get().err_rma_attach));
            }
            None => a.push((start, len, 1)),
        }
        N_ATTACHED.store(a.len(), std::sync::atomic::Ordering::Relaxed);
    }
    let bound = m.bind(dev);
    if !bound {
        log::error(format_args!("{name}: device memory of a second GPU attached to one dynamic window (or no stream could be made for it); attach memory of one GPU per window"));
    }
    let serving = if bound { s.start_serving(name) } else { Err(abi::get().err_rma_attach) };
    if let Err(rc) = serving {
        unlist(start, len);
        return Some(errors::raise(errh, rc));
    }
    m.attach(start, len);
    Some(0)
}

/// `MPI_Win_detach` of device memory attached to a served dynamic window; `None` if it is not.
pub fn detach(win: Handle, base: *const c_void) -> Option<c_int> {
    let s = get(win)?;
    let s = lock(&s);
    let m = s.mailbox.as_ref().filter(|_| s.dynamic)?;
    let len = m.detach(base as u64)?;
    unlist(base as u64, len);
    Some(0)
}

/// `MPI_Get_address` of an address within device memory attached to a served dynamic window:
/// the address, tagged.
pub fn tagged(location: *const c_void) -> Option<isize> {
    if N_ATTACHED.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return None;
    }
    let at = location as u64;
    lock(&ATTACHED).iter().any(|r| (r.0..r.0 + r.1).contains(&at)).then_some((at | TAG) as isize)
}

/// Carries out `what` on `target` of window `win` when that target's part is served device
/// memory; `None` leaves it to the library (not a served window, a host part,
/// `MPI_PROC_NULL`). A request form (`request` not null) gets a request that is complete: the
/// origin's buffers are free, and a get's bytes are in place.
pub fn operate(name: &'static str, win: Handle, target: c_int, at: Target, what: What, request: *mut c_void) -> Option<c_int> {
    let s = get(win)?;
    let mut s = lock(&s);
    let device = s.parts.get(usize::try_from(target).ok()?)?.device;
    let errh = errors::on_window(win);
    let mut at = at;
    if s.dynamic {
        // Attached device memory is named by its tagged address, anything else by the library.
        if at.0 as u64 & TAG == 0 {
            return None;
        }
        if !device {
            log::error(format_args!("{name}: rank {target} has no device memory attached at {:#x}", at.0 as u64 & !TAG));
            return Some(errors::raise(errh, abi::get().err_rma_range));
        }
        at.0 = (at.0 as u64 & !TAG) as isize;
    } else if !device {
        return None;
    }
    if let Err(rc) = run(name, &mut s, target, at, what, errh) {
        return Some(rc);
    }
    if request.is_null() {
        return Some(0);
    }
    Some(held::completed(request, &abi::Status::zeroed(), 0))
}

fn run(name: &'static str, s: &mut Served, t: c_int, (disp, count, dt): Target, what: What, errh: Option<Handle>) -> Result<(), c_int> {
    let abi = abi::get();
    let target = Side::of(name, errh, (std::ptr::null(), count, dt), None)?;
    let runs = target_runs(name, errh, &s.parts[t as usize], &target, disp)?;
    let n = target.bytes();
    let payload = |side: &Side| -> Result<Vec<u8>, c_int> {
        let mut bytes = vec![0u8; n];
        side.read(name, errh, &mut bytes)?;
        Ok(bytes)
    };
    match what {
        What::Put(origin) => {
            let origin = matching(name, errh, origin, &target)?;
            if let Some(dev) = origin.dev.filter(|_| origin.contiguous() && n > s.chunk(t)) {
                return s.put_from_device(name, errh, t, &runs, origin.at, &dev);
            }
            if origin.dev.is_none() && origin.contiguous() {
                // SAFETY: the program's host buffer holds the payload.
                let data = unsafe { std::slice::from_raw_parts(origin.at.cast::<u8>(), n) };
                return s.put(errh, t, &runs, data);
            }
            let data = payload(&origin)?;
            s.put(errh, t, &runs, &data)
        }
        What::Get(result) => {
            let result = matching(name, errh, result, &target)?;
            if let Some(dev) = result.dev.filter(|_| result.contiguous() && n > s.chunk(t)) {
                return s.get_to_device(name, errh, t, &runs, result.at, &dev);
            }
            if result.dev.is_none() && result.contiguous() && n > 0 {
                // SAFETY: the program's host buffer holds the payload.
                let out = unsafe { std::slice::from_raw_parts_mut(result.at.cast::<u8>(), n) };
                return s.get(name, errh, t, &runs, out);
            }
            let mut bytes = vec![0u8; n];
            s.get(name, errh, t, &runs, &mut bytes)?;
            result.write(name, errh, &bytes)
        }
        What::Accumulate(origin, op) => {
            let data = payload(&matching(name, errh, origin, &target)?)?;
            if abi.same(op, abi.op_no_op) {
                return Ok(());
            }
            if abi.same(op, abi.op_replace) {
                return s.put(errh, t, &runs, &data);
            }
            let (element, size) = accumulate_element(name, errh, &target)?;
            s.update(name, errh, t, &runs, size, |old, at| reduce_local(name, errh, &data[at..at + old.len()], old, element, size, op).map(|()| true))
        }
        What::GetAccumulate(origin, result, op) => {
            let result = matching(name, errh, result, &target)?;
            let mut olds = vec![0u8; n];
            if abi.same(op, abi.op_no_op) {
                s.get(name, errh, t, &runs, &mut olds)?;
                return result.write(name, errh, &olds);
            }
            let data = payload(&matching(name, errh, origin, &target)?)?;
            let replace = abi.same(op, abi.op_replace);
            let (element, size) = match replace {
                true => accumulate_element(name, errh, &target).unwrap_or((abi.byte, 1)),
                false => accumulate_element(name, errh, &target)?,
            };
            s.update(name, errh, t, &runs, size, |old, at| {
                olds[at..at + old.len()].copy_from_slice(old);
                match replace {
                    true => old.copy_from_slice(&data[at..at + old.len()]),
                    false => reduce_local(name, errh, &data[at..at + old.len()], old, element, size, op)?,
                }
                Ok(true)
            })?;
            result.write(name, errh, &olds)
        }
        What::CompareAndSwap(origin, compare, result) => {
            let (new, expected) = (payload(&matching(name, errh, origin, &target)?)?, payload(&matching(name, errh, compare, &target)?)?);
            let result = matching(name, errh, result, &target)?;
            let mut olds = vec![0u8; n];
            s.update(name, errh, t, &runs, n.max(1), |old, _| {
                olds.copy_from_slice(old);
                let swap = *old == expected[..];
                if swap {
                    old.copy_from_slice(&new);
                }
                Ok(swap)
            })?;
            result.write(name, errh, &olds)
        }
    }
}

/// A synchronisation call on a served window: `owed` says whose operations it completes
/// (`Some(None)`: every target's, `Some(Some(t))`: `t`'s), `own` whether peers may read this
/// process's part after it; then the library's call.
fn around(name: &'static str, win: Handle, owed: Option<Option<c_int>>, own: bool, call: impl FnOnce() -> c_int) -> c_int {
    let Some(s) = get(win) else { return call() };
    let settled = lock(&s).settle(name, errors::on_window(win), owed, own);
    let rc = call();
    if rc != 0 {
        rc
    } else {
        settled.err().unwrap_or(0)
    }
}

pub fn fence(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    around(name, win, Some(None), true, call)
}

pub fn post(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    around(name, win, None, true, call)
}

pub fn complete(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    around(name, win, Some(None), false, call)
}

/// `MPI_Win_unlock` (`Some(rank)`) and `MPI_Win_unlock_all` (`None`).
pub fn unlock(name: &'static str, target: Option<c_int>, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    around(name, win, Some(target), true, call)
}

/// `MPI_Win_flush(_local)` (`Some(rank)`) and `MPI_Win_flush(_local)_all` (`None`): a local
/// flush completes them too, since the origin's buffers are free once an entry is written.
pub fn flush(name: &'static str, target: Option<c_int>, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    around(name, win, Some(target), false, call)
}

pub fn sync(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    around(name, win, None, true, call)
}

/// `MPI_Win_free`: this process's operations are carried out, its own stores done, then
/// cudampi's window goes (collective: no peer writes the mailbox after it), then the library's.
pub fn free(name: &'static str, win: Handle, call: impl FnOnce() -> c_int) -> c_int {
    let Some(s) = get(win) else { return call() };
    let settled = lock(&s).settle(name, errors::on_window(win), Some(None), true);
    SERVED.remove(win);
    lock(&s).release();
    let rc = call();
    if rc != 0 {
        rc
    } else {
        settled.err().unwrap_or(0)
    }
}

/// `MPI_Win_get_attr` of a served window with a device part: its base, size and model.
pub fn attribute(win: Handle, keyval: c_int, value: *mut c_void) {
    let Some(s) = get(win) else { return };
    let s = lock(&s);
    if let Some((base, _)) = s.own {
        device_window_attribute(keyval, value, base, &s.size_attribute);
    }
}

/// Forgets every window (after the library's `MPI_Finalize`, which freed its windows and
/// communicators) and stops the thread.
pub fn clear() {
    for s in SERVED.take_all() {
        let mut s = lock(&s);
        s.comm = 0;
        s.mail = 0;
        s.release();
    }
    lock(&ATTACHED).clear();
    N_ATTACHED.store(0, std::sync::atomic::Ordering::Relaxed);
    mailbox::clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every piece's entry fits, the pieces cover the runs in order, and runs are cut only at
    /// whole elements.
    fn check(runs: &[(u64, usize)], entry: usize, grain: usize) -> Vec<Piece> {
        let out = pieces(runs, entry, grain);
        let mut parts = out.iter().flat_map(|p| p.runs.iter().copied());
        for p in &out {
            assert!(!p.runs.is_empty());
            assert!(mailbox::entry_len(p.runs.len(), p.bytes) <= entry, "entry of {} runs, {} bytes over {entry}", p.runs.len(), p.bytes);
            assert_eq!(p.bytes, p.runs.iter().map(|r| r.1).sum::<usize>());
        }
        for &(off, len) in runs {
            let mut at = 0;
            while at < len {
                assert_eq!(at % grain, 0, "a run cut inside an element");
                let (o, n) = parts.next().expect("a run left out");
                assert_eq!(o, off + at as u64);
                at += n;
            }
            assert_eq!(at, len);
        }
        assert!(parts.next().is_none());
        out
    }

    #[test]
    fn whole_pieces_tile_the_ring() {
        let entry = config::DEFAULT_RMA_RING / 4;
        let out = check(&[(0, 64 << 20)], entry, 1);
        assert_eq!(out.len(), 17, "64 MiB in pieces a little under 4 MiB");
        assert!(out[..16].iter().all(|p| mailbox::entry_len(1, p.bytes) == entry));
    }

    #[test]
    fn many_runs_and_elements() {
        let runs: Vec<(u64, usize)> = (0..5000).map(|i| (i * 40, 24)).collect();
        check(&runs, 16 << 10, 8);
        check(&[(8, 100_000), (200_000, 3), (300_000, 70_000)], 16 << 10, 1);
        check(&[(0, 96_000)], 16 << 10, 24);
    }
}
