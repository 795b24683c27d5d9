//! One side of a one-sided operation (origin, result, compare or target buffer), in host or
//! device memory, with any datatype: its payload read out packed and written back in place.
//! The windows that cudampi carries out operations for (`mapped.rs`, `served.rs`) share it,
//! with what `windows.rs` asks of such a window (`Carried`), the table each kind keeps its
//! windows in (`Table`), and the attributes they report.
//!
//! It may use every layer below the handlers.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::base::log;
use crate::cuda::{self, driver, signal, CudaError, Device, InContext, Location};
use crate::mpi::abi::{self, Handle};
use crate::mpi::datatype::{self, TypeInfo};
use crate::mpi::{errors, real, typemap};
use crate::staging::stage::Window;

/// `count` elements of `datatype` at `at`.
pub type Buf = (*const c_void, i64, Handle);

/// Where an operation lands in its target: displacement, count, datatype.
pub type Target = (isize, i64, Handle);

/// One side of an operation: its bytes, in host or device memory.
pub struct Side {
    pub at: *mut c_void,
    pub count: i64,
    pub dt: Handle,
    pub t: TypeInfo,
    /// The device memory's GPU, `None` for host memory.
    pub dev: Option<Device>,
}

impl Side {
    pub fn of(name: &'static str, errh: Option<Handle>, (at, count, dt): Buf, dev: Option<Device>) -> Result<Side, c_int> {
        if count < 0 {
            return Err(errors::raise(errh, abi::get().err_count));
        }
        let t = datatype::query(dt).map_err(|e| {
            log::error(format_args!("{name}: the datatype is not one the MPI library knows"));
            errors::raise(errh, e)
        })?;
        Ok(Side { at: at as *mut c_void, count, dt, t, dev })
    }

    pub fn located(name: &'static str, errh: Option<Handle>, buf: Buf) -> Result<Side, c_int> {
        let dev = match cuda::locate(buf.0) {
            Location::Device(d) => Some(d),
            Location::Unreadable if buf.1 > 0 => return Err(errors::unreadable(name, errh, buf.0)),
            _ => None,
        };
        Side::of(name, errh, buf, dev)
    }

    pub fn bytes(&self) -> usize {
        (self.count * self.t.size) as usize
    }

    /// One run of bytes at `at`, in MPI's order: a copy of the run moves the payload as MPI
    /// would (a derived type that lists its bytes out of address order does not qualify).
    pub fn contiguous(&self) -> bool {
        let t = &self.t;
        if t.named {
            return t.packed();
        }
        let shaped = (t.size == t.extent || self.count <= 1) && t.true_lb == 0 && t.true_extent == t.size;
        shaped && typemap::element(self.dt, t).is_some_and(|f| matches!(&f[..], [b] if b.at == 0 && b.rows == 1 && b.planes == 1 && b.len as i64 == t.size))
    }

    /// The span's first byte and the blocks of the payload within it, in MPI's order.
    pub fn blocks(&self) -> Option<(*mut c_void, typemap::Form)> {
        let span = self.t.span(self.count).ok()?;
        let element = typemap::element(self.dt, &self.t)?;
        let form = typemap::message_of(self.dt, &element, self.count, self.t.extent, span.offset, span.len)?;
        Some((self.at.cast::<u8>().wrapping_offset(span.offset as isize).cast(), form))
    }

    /// Whether one copy in `dev`'s context can reach the payload: host memory, or device
    /// memory of that context (another GPU's memory needs its own context current, as its
    /// copies and kernels do).
    pub fn reachable_from(&self, dev: &Device) -> bool {
        self.dev.map_or(true, |d| d.ordinal == dev.ordinal && (d.ctx.is_null() || dev.ctx.is_null() || d.ctx == dev.ctx))
    }

    /// Copies the payload, packed, to `out` (host memory of `bytes()`).
    pub fn read(&self, name: &'static str, errh: Option<Handle>, out: &mut [u8]) -> Result<(), c_int> {
        let n = self.bytes();
        match self.dev {
            Some(dev) if self.contiguous() => {
                let fail = |e| errors::cuda(name, errh, e, self.at, n, &dev);
                let ctx = InContext::enter(&dev).map_err(fail)?;
                ctx.to_host(out.as_mut_ptr().cast(), self.at, n, false).map_err(fail)
            }
            Some(dev) => {
                let (user, form) = self.blocks().ok_or_else(|| too_complex(name, errh))?;
                if !in_order(&form) {
                    let span = self.span_to_host(name, errh, dev, user)?;
                    let base = span.as_ptr().wrapping_offset(-self.span_offset()) as *mut c_void;
                    return self.host_pack(name, errh, base, out.as_mut_ptr(), n, true);
                }
                let w = Window { dev, user, host: out.as_mut_ptr().cast(), len: n, pinned: false, packed: std::ptr::null_mut(), payload: true };
                w.blocks_to_host(name, errh, &form)
            }
            None if self.contiguous() => {
                // SAFETY: host memory holding the payload (the program's buffer).
                unsafe { std::ptr::copy_nonoverlapping(self.at.cast::<u8>(), out.as_mut_ptr(), n) };
                Ok(())
            }
            None => self.host_pack(name, errh, self.at, out.as_mut_ptr(), n, true),
        }
    }

    /// Copies packed bytes from `from` into the payload's places; no other byte is written.
    pub fn write(&self, name: &'static str, errh: Option<Handle>, from: &[u8]) -> Result<(), c_int> {
        let n = self.bytes();
        match self.dev {
            Some(dev) if self.contiguous() => {
                let fail = |e| errors::cuda(name, errh, e, self.at, n, &dev);
                let ctx = InContext::enter(&dev).map_err(fail)?;
                ctx.runs_to_device(self.at, from.as_ptr().cast(), &[(0, n)], None).map_err(fail)
            }
            Some(dev) => {
                let (user, form) = self.blocks().ok_or_else(|| too_complex(name, errh))?;
                if !in_order(&form) {
                    // Unpacked into a host copy of the span, then only the blocks' bytes go back.
                    let mut span = self.span_to_host(name, errh, dev, user)?;
                    let base = span.as_mut_ptr().wrapping_offset(-self.span_offset()) as *mut c_void;
                    self.host_pack(name, errh, base, from.as_ptr() as *mut u8, n, false)?;
                    let w = Window { dev, user, host: span.as_mut_ptr().cast(), len: span.len(), pinned: false, packed: std::ptr::null_mut(), payload: false };
                    return w.blocks_to_device(name, errh, &form);
                }
                let w = Window { dev, user, host: from.as_ptr() as *mut c_void, len: n, pinned: false, packed: std::ptr::null_mut(), payload: true };
                w.blocks_to_device(name, errh, &form)
            }
            None if self.contiguous() => {
                // SAFETY: host memory holding the payload (the program's buffer).
                unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), self.at.cast::<u8>(), n) };
                Ok(())
            }
            None => self.host_pack(name, errh, self.at, from.as_ptr() as *mut u8, n, false),
        }
    }

    /// Where the span starts relative to `at` (the true lower bound; may be negative).
    pub fn span_offset(&self) -> isize {
        self.t.span(self.count).map_or(0, |s| s.offset as isize)
    }

    /// The device span of the payload (from `user`), copied to host memory.
    pub fn span_to_host(&self, name: &'static str, errh: Option<Handle>, dev: Device, user: *mut c_void) -> Result<Vec<u8>, c_int> {
        let len = self.t.span(self.count).map_err(|e| errors::raise(errh, e))?.len;
        let mut span = vec![0u8; len];
        let w = Window { dev, user, host: span.as_mut_ptr().cast(), len, pinned: false, packed: std::ptr::null_mut(), payload: false };
        w.to_host(name, errh, 0, len)?;
        Ok(span)
    }

    /// Packs the payload of host memory at `base` (the buffer's address) into `packed` (`len`
    /// bytes), or unpacks it from there, with the library's own `MPI_Pack` and `MPI_Unpack`.
    pub fn host_pack(&self, name: &'static str, errh: Option<Handle>, base: *mut c_void, packed: *mut u8, len: usize, pack: bool) -> Result<(), c_int> {
        let abi = abi::get();
        let p = real::pmpi().ok_or(abi.err_intern)?;
        let (Ok(count), Ok(size)) = (c_int::try_from(self.count), c_int::try_from(len)) else {
            log::error(format_args!("{name}: more than 2^31 bytes of a datatype with gaps in host memory, on a device window"));
            return Err(errors::raise(errh, abi.err_count));
        };
        let comm = datatype::quiet::comm().map_err(|e| errors::raise(errh, e))?;
        let mut position: c_int = 0;
        // SAFETY: `packed` holds `len` bytes, the payload of `count` elements at `base`.
        let rc = unsafe {
            match pack {
                true => (p.pack)(base, count, self.dt, packed.cast(), size, &mut position, comm),
                false => (p.unpack)(packed.cast(), size, &mut position, base, count, self.dt, comm),
            }
        };
        match rc {
            0 => Ok(()),
            rc => Err(errors::raise(errh, rc)),
        }
    }
}

/// Whether blocks copied as `cuda::strided` copies them (each block ascending) come out in
/// MPI's order: not where a pitch runs backwards.
pub fn in_order(form: &[crate::cuda::Strided]) -> bool {
    form.iter().all(|b| b.ascending() == *b)
}

pub fn too_complex(name: &'static str, errh: Option<Handle>) -> c_int {
    log::error(format_args!("{name}: the datatype has more blocks than cudampi copies on a device window ({})", typemap::MAX_BLOCKS));
    errors::raise(errh, abi::get().err_type)
}

/// The origin-side buffer of an operation, which must carry as many bytes as the target.
pub fn matching(name: &'static str, errh: Option<Handle>, buf: Buf, target: &Side) -> Result<Side, c_int> {
    let side = Side::located(name, errh, buf)?;
    if side.bytes() != target.bytes() {
        log::error(format_args!("{name}: {} bytes at the origin, {} at the target: the type signatures must match", side.bytes(), target.bytes()));
        return Err(errors::raise(errh, abi::get().err_type));
    }
    Ok(side)
}

/// The one predefined type a side's payload consists of, and its size.
pub fn element_of(side: &Side) -> Option<(Handle, i64)> {
    if side.t.named {
        return Some((side.dt, side.t.size));
    }
    typemap::analysis(side.dt, &side.t).base
}

/// `MPI_Win_get_attr` of a window whose device part cudampi carries operations out on (mapped
/// or served): its base, its size (`size` lives as long as the window: the attribute's value
/// points to it) and the unified model. Other keys keep the library's answer.
pub fn device_window_attribute(keyval: c_int, value: *mut c_void, base: *mut c_void, size: &isize) {
    let abi = abi::get();
    if keyval == abi.win_base {
        // SAFETY: for MPI_WIN_BASE the library stores the base address at `value`.
        unsafe { value.cast::<*mut c_void>().write_unaligned(base) };
    } else if keyval == abi.win_size {
        // SAFETY: for MPI_WIN_SIZE the library stores a pointer to an MPI_Aint at `value`.
        unsafe { value.cast::<*const isize>().write_unaligned(size) };
    } else if keyval == abi.win_model {
        static UNIFIED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
        UNIFIED.store(abi.win_unified, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: for MPI_WIN_MODEL the library stores a pointer to an int at `value`.
        unsafe { value.cast::<*mut c_int>().write_unaligned(UNIFIED.as_ptr()) };
    }
}

/// A window cudampi carries operations out on, mapped or served, as `MPI_Win_create` made it.
pub trait Carried {
    /// This process's part is device memory: the library gets none of it.
    fn own_device(&self) -> bool;
    /// Records the window the library made, under its handle.
    fn register(self, win: Handle);
    /// Closes what a window the library refused to make had opened.
    fn discard(self);
}


/// The windows of one kind, by handle. The RMA and synchronisation calls look no further than
/// one atomic load while there are none.
pub struct Table<T> {
    windows: Mutex<BTreeMap<Handle, Arc<Mutex<T>>>>,
    count: AtomicUsize,
}

impl<T> Table<T> {
    pub const fn new() -> Table<T> {
        Table { windows: Mutex::new(BTreeMap::new()), count: AtomicUsize::new(0) }
    }

    fn windows(&self) -> MutexGuard<'_, BTreeMap<Handle, Arc<Mutex<T>>>> {
        self.windows.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    pub fn get(&self, win: Handle) -> Option<Arc<Mutex<T>>> {
        if !self.any() {
            return None;
        }
        self.windows().get(&abi::get().key(win)).cloned()
    }

    pub fn insert(&self, win: Handle, w: T) {
        let mut t = self.windows();
        t.insert(abi::get().key(win), Arc::new(Mutex::new(w)));
        self.count.store(t.len(), Ordering::Relaxed);
    }

    pub fn remove(&self, win: Handle) -> Option<Arc<Mutex<T>>> {
        let mut t = self.windows();
        let gone = t.remove(&abi::get().key(win));
        self.count.store(t.len(), Ordering::Relaxed);
        gone
    }

    /// A window [`remove`](Table::remove) took out before the library's `MPI_Win_free`, which
    /// then failed: the window lives on.
    pub fn put_back(&self, win: Handle, w: Arc<Mutex<T>>) {
        let mut t = self.windows();
        t.insert(abi::get().key(win), w);
        self.count.store(t.len(), Ordering::Relaxed);
    }

    /// Every window, the table left empty.
    pub fn take_all(&self) -> Vec<Arc<Mutex<T>>> {
        let all = std::mem::take(&mut *self.windows());
        self.count.store(0, Ordering::Relaxed);
        all.into_values().collect()
    }
}

/// A window's own state, poisoned or not.
pub fn lock<T>(w: &Mutex<T>) -> MutexGuard<'_, T> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits for the work on the legacy default stream of `dev`'s context that copied `bytes`
/// (`cuda::signal::wait`); for none, the program's own work, which a query finds done where
/// the stream is idle. Errors go to `errh`.
pub fn settle_stream(name: &'static str, errh: Option<Handle>, dev: &Device, bytes: usize) -> Result<(), c_int> {
    let fail = |e: CudaError| errors::cuda(name, errh, e, std::ptr::null(), 0, dev);
    let d = driver::get().ok_or(CudaError { call: "cuInit", code: 3 }).map_err(fail)?;
    let _ctx = InContext::enter(dev).map_err(fail)?;
    if bytes == 0 {
        if let Some(s) = d.signals.as_ref() {
            // SAFETY: the legacy default stream of the current context.
            if unsafe { (s.stream_query)(std::ptr::null_mut()) } == 0 {
                return Ok(());
            }
        }
    }
    signal::wait(d, bytes).map_err(fail)
}

/// The one predefined type an accumulate's target consists of, and its size.
pub fn accumulate_element(name: &'static str, errh: Option<Handle>, target: &Side) -> Result<(Handle, usize), c_int> {
    element_of(target).map(|(e, size)| (e, size.max(1) as usize)).ok_or_else(|| {
        log::error(format_args!("{name}: an accumulate's datatype must consist of one predefined type"));
        errors::raise(errh, abi::get().err_type)
    })
}

/// `old = origin op old`, packed elements of `element` (`size` bytes each), with the library's
/// own `MPI_Reduce_local`.
pub fn reduce_local(name: &'static str, errh: Option<Handle>, origin: &[u8], old: &mut [u8], element: Handle, size: usize, op: Handle) -> Result<(), c_int> {
    let abi = abi::get();
    let p = real::pmpi().ok_or(abi.err_intern)?;
    let Ok(elements) = c_int::try_from(old.len() / size) else {
        log::error(format_args!("{name}: more than 2^31 elements in one accumulate on a device window"));
        return Err(errors::raise(errh, abi.err_count));
    };
    // SAFETY: both buffers hold `elements` packed elements of `element`.
    match unsafe { (p.reduce_local)(origin.as_ptr().cast(), old.as_mut_ptr().cast(), elements, element, op) } {
        0 => Ok(()),
        rc => Err(errors::raise(errh, rc)),
    }
}
