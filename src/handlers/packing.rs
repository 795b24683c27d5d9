//! `MPI_Pack` and `MPI_Unpack`, native and `external32`, on device buffers, staged: the
//! library packs and unpacks host copies (no packing on the GPU yet).
//!
//! The typed buffer is staged like a message buffer: `MPI_Pack` reads its datatype's span, so
//! that goes to the host; `MPI_Unpack` writes its datatype's runs, so only those come back and
//! its gaps keep their device bytes. The packed buffer is staged as a window of bytes starting
//! at `*position`, as long as the typed data can take packed (`MPI_Pack_size`): MPICH writes and reads that many bytes whatever `outsize` or
//! `insize` say (Open MPI refuses with `MPI_ERR_TRUNCATE` first), so a window cut at the
//! size would let it run off the staging buffer. `MPI_Pack` copies to the device exactly the
//! bytes from the old to the new `*position`, as the library wrote them; `MPI_Unpack` copies
//! to the host at most the `insize - *position` bytes the caller said are there.
//!
//! Arguments the library refuses before it touches a buffer (a negative count, no position)
//! reach it with a harmless host address in place of the device one, so the program gets the
//! library's own answer.

use std::ffi::{c_int, c_void};

use crate::base::{log, stats};
use crate::cuda::{self, Location};
use crate::mpi::abi::{self, Handle};
use crate::mpi::datatype::Span;
use crate::mpi::{errors, real};
use crate::handlers::p2p::Count;
use crate::staging::stage::{self, Back, Direction, Prepared, Shape, Staged};

/// The `position` argument: `int*` in `MPI_Pack`/`MPI_Unpack`, `MPI_Aint*` or `MPI_Count*`
/// in the `external32` and large-count forms.
#[derive(Clone, Copy)]
pub enum Pos {
    Int(*mut c_int),
    Wide(*mut i64),
}

impl Pos {
    fn get(self) -> Option<i64> {
        // SAFETY: a non-null position is the caller's integer, which the call reads anyway.
        unsafe {
            match self {
                Pos::Int(p) if !p.is_null() => Some(p.read_unaligned().into()),
                Pos::Wide(p) if !p.is_null() => Some(p.read_unaligned()),
                _ => None,
            }
        }
    }
}

/// How the data are represented packed: the library's own for a communicator, or a named
/// one (`"external32"`), which no communicator's error handler answers for.
#[derive(Clone, Copy)]
pub enum Rep {
    Native(Handle),
    External,
}

impl Rep {
    fn comm(self) -> Option<Handle> {
        match self {
            Rep::Native(comm) => Some(comm),
            Rep::External => None,
        }
    }

    /// The most bytes `count` elements of `datatype` take packed (`count` is not negative):
    /// the library's `MPI_Pack_size`, for `external32` too. External32 never widens a type on
    /// the LP64 platforms cudampi runs on (`long` shrinks to 4 bytes, nothing grows), and
    /// MPICH's `MPI_Pack_external_size` stops the process (SIGILL, MPICH 4.0 and 5.0) on a
    /// struct holding `MPI_CHAR`, which `MPI_Pack_external` itself packs.
    /// `Err`: the library's code, already raised by `MPI_Pack_size`, or `MPI_ERR_COUNT` for a
    /// count it cannot take.
    fn bound(self, name: &'static str, count: i64, datatype: Handle) -> Result<usize, c_int> {
        let Some(p) = real::pmpi() else { return Err(abi::get().err_intern) };
        let Ok(n) = c_int::try_from(count) else {
            log::error(format_args!("{name}: {count} elements of device memory are more than cudampi stages for packing (at most 2^31 - 1)"));
            return Err(errors::raise(self.comm(), abi::get().err_count));
        };
        let comm = self.comm().unwrap_or(abi::get().comm_self);
        let mut size: c_int = 0;
        // SAFETY: the caller's datatype, a communicator, a valid out-pointer.
        match unsafe { (p.pack_size)(n, datatype, comm, &mut size) } {
            0 => Ok(usize::try_from(size).unwrap_or(0)),
            rc => Err(rc),
        }
    }
}

/// The packed buffer's window `[*position, *position + bound)` leased for a device buffer;
/// `None` when the library gets a placeholder (it touches no byte, or refuses the call).
fn window(
    name: &'static str,
    loc: Location,
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    position: Pos,
    rep: Rep,
) -> Result<Option<Staged>, c_int> {
    let dev = match loc {
        Location::Device(dev) => dev,
        Location::Unreadable if count > 0 => return Err(errors::unreadable(name, rep.comm(), buf)),
        _ => return Ok(None),
    };
    let Some(at) = position.get() else { return Ok(None) };
    if count < 0 {
        return Ok(None);
    }
    let len = rep.bound(name, count, datatype)?;
    if len == 0 {
        return Ok(None);
    }
    let span = Span { offset: at, len, named: true };
    stage::lease_for(name, buf, dev, span, rep.comm(), false, Back::Nothing).map(Some)
}

fn ptr_of(window: &Option<Staged>) -> *mut c_void {
    window.as_ref().map_or(stage::placeholder(), Staged::mpi_ptr)
}

/// `MPI_Pack`, `MPI_Pack_external` and their large-count forms: `call(inbuf, incount,
/// datatype, outbuf)` runs the real one (a device input goes to it packed, as
/// `Prepared::message` says: the packed bytes are the same).
pub fn pack<C: Count>(
    name: &'static str,
    inbuf: *const c_void,
    incount: i64,
    datatype: Handle,
    outbuf: *mut c_void,
    position: Pos,
    rep: Rep,
    call: impl FnOnce(*const c_void, C, Handle, *mut c_void) -> c_int,
) -> c_int {
    let comm = rep.comm();
    let out_loc = cuda::locate(outbuf);
    let input = match stage::stage_as(name, inbuf, incount, datatype, 0, comm, Direction::Send, Shape::Payload) {
        Ok(p) => p,
        Err(rc) => return rc,
    };
    let (ip, n, t) = input.message(incount, datatype);
    let n = C::from_i64(n);
    if matches!(out_loc, Location::Host) {
        if matches!(input, Prepared::Direct(p) if std::ptr::eq(p, inbuf)) {
            stats::host_call();
        }
        return call(ip, n, t, outbuf);
    }
    let out = match window(name, out_loc, outbuf, incount, datatype, position, rep) {
        Ok(Some(w)) => w,
        Ok(None) => return call(ip, n, t, stage::placeholder()),
        Err(rc) => return rc,
    };
    let from = out.span.offset;
    let rc = call(ip, n, t, out.mpi_ptr());
    if rc != 0 {
        return rc;
    }
    // Exactly the bytes the library wrote, which lie in the window it was given.
    let written = position.get().map_or(0, |to| to.saturating_sub(from).clamp(0, out.span.len as i64)) as usize;
    match out.window().to_device(name, comm, 0, written) {
        Ok(()) => rc,
        Err(e) => e,
    }
}

/// `MPI_Unpack`, `MPI_Unpack_external` and their large-count forms: `call(inbuf, outbuf,
/// outcount, datatype)` runs the real one (a device output is written packed, as
/// `Prepared::message` says, and unpacked on the GPU).
pub fn unpack<C: Count>(
    name: &'static str,
    inbuf: *const c_void,
    insize: i64,
    position: Pos,
    outbuf: *mut c_void,
    outcount: i64,
    datatype: Handle,
    rep: Rep,
    call: impl FnOnce(*const c_void, *mut c_void, C, Handle) -> c_int,
) -> c_int {
    let comm = rep.comm();
    let in_loc = cuda::locate(inbuf);
    let output = match stage::stage_as(name, outbuf, outcount, datatype, 0, comm, Direction::Write, Shape::Payload) {
        Ok(p) => p,
        Err(rc) => return rc,
    };
    let (op, n, t) = output.message(outcount, datatype);
    let n = C::from_i64(n);
    let input = if matches!(in_loc, Location::Host) {
        if matches!(output, Prepared::Direct(p) if std::ptr::eq(p, outbuf)) {
            stats::host_call();
            return call(inbuf, outbuf, n, t);
        }
        None
    } else {
        match window(name, in_loc, inbuf, outcount, datatype, position, rep) {
            Ok(w) => Some(w),
            Err(rc) => return rc,
        }
    };
    let inptr = match &input {
        None => inbuf,
        Some(w) => {
            if let (Some(w), Some(at)) = (w, position.get()) {
                // Only what the caller says is there; a library that reads past `insize`
                // finds the window's tail, not the device memory after the buffer.
                let there = insize.saturating_sub(at).clamp(0, w.span.len as i64) as usize;
                if let Err(rc) = w.to_host(name, comm, 0, there) {
                    return rc;
                }
            }
            ptr_of(w)
        }
    };
    let rc = call(inptr, op, n, t);
    if rc != 0 {
        return rc;
    }
    match output.staged() {
        Some(s) => match s.deliver(name, comm, std::ptr::null_mut()) {
            Ok(()) => rc,
            Err(e) => e,
        },
        None => rc,
    }
}
