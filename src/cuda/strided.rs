//! Copies of strided blocks between a device span and host memory, either a span of the same
//! layout or a packed buffer holding the blocks' bytes one after the other: one
//! `cuMemcpy2DAsync` for a block of rows, one `cuMemcpy3DAsync` for a block of planes, so a
//! column of a matrix crosses as its payload in one copy instead of the matrix's whole span.
//! Blocks that would take more than [`FEW_CALLS`] copies go through the pack kernel (`pack`).
//!
//! Uses the driver (`driver`) in the context an [`InContext`] made current, on its legacy
//! default stream, and waits as `copy` does; knows nothing of MPI. Called by `staging::stage`
//! with the blocks `mpi::typemap` finds for a datatype.

use std::ffi::{c_uint, c_void};
use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::sys::CUmemorytype;

use super::copy::{check, CudaError, InContext};
use super::driver::{Memcpy2D, Memcpy3D};
use super::{pack, signal};

/// Most driver calls the blocks of one copy are given as; past it they go to the pack kernel
/// (`pack`), one launch, where it can run.
pub const FEW_CALLS: usize = 16;

/// A datatype's blocks, shared: the pack kernel keeps its table of runs for as long as the
/// same blocks come back (`pack`), and [`summary`] what it found in them.
pub type Blocks = Arc<[Strided]>;

/// What a pass over blocks finds: payload bytes, driver calls a copy takes, runs, and whether
/// every pitch is non-negative (they copy in the order they are listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub bytes: usize,
    pub calls: usize,
    pub runs: usize,
    pub in_order: bool,
}

/// Blocks this many or fewer are derived from at every call; more are looked up.
const DERIVED_AT_ONCE: usize = 64;
/// Values kept per [`Derived`], of the blocks seen lately.
const KEPT_DERIVED: usize = 16;

/// Something derived from shared blocks, kept for the last few blocks of many: a message sent
/// again and again comes with the same blocks (`mpi::typemap::message_of`), and passes over
/// thousands of them at every step of every call would cost more than its copies.
pub struct Derived<T>(Mutex<Vec<(Weak<[Strided]>, T)>>);

impl<T: Clone> Derived<T> {
    pub const fn new() -> Derived<T> {
        Derived(Mutex::new(Vec::new()))
    }

    /// `make(blocks)`, or what it gave for the same blocks lately.
    pub fn get(&self, blocks: &Blocks, make: impl FnOnce(&[Strided]) -> T) -> T {
        if blocks.len() <= DERIVED_AT_ONCE {
            return make(blocks);
        }
        let same = |w: &Weak<[Strided]>| std::ptr::eq(w.as_ptr(), Arc::as_ptr(blocks));
        if let Some((_, v)) = self.0.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(w, _)| same(w)) {
            return v.clone();
        }
        let v = make(blocks);
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(w, _)| w.strong_count() > 0);
        if kept.len() >= KEPT_DERIVED {
            kept.remove(0);
        }
        kept.push((Arc::downgrade(blocks), v.clone()));
        v
    }
}

/// The [`Summary`] of `blocks` (see [`Derived`]).
pub fn summary(blocks: &Blocks) -> Summary {
    static SUMMARIES: Derived<Summary> = Derived::new();
    SUMMARIES.get(blocks, |b| Summary {
        bytes: b.iter().map(Strided::bytes).sum(),
        calls: b.iter().map(Strided::calls).sum(),
        runs: b.iter().filter(|b| b.len > 0).map(|b| b.rows * b.planes).sum(),
        in_order: b.iter().all(|b| (b.rows <= 1 || b.pitch >= 0) && (b.planes <= 1 || b.plane_pitch >= 0)),
    })
}

/// `planes` planes `plane_pitch` bytes apart, each of `rows` runs of `len` bytes `pitch` apart,
/// the first run at byte `at`. Listed in the order its bytes are packed: planes outer, rows
/// inner. Pitches may be negative (a datatype whose extent is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strided {
    pub at: i64,
    pub len: usize,
    pub rows: usize,
    pub pitch: i64,
    pub planes: usize,
    pub plane_pitch: i64,
}

impl Strided {
    pub fn run(at: i64, len: usize) -> Strided {
        Strided { at, len, rows: 1, pitch: 0, planes: 1, plane_pitch: 0 }
    }

    /// Bytes of payload.
    pub fn bytes(&self) -> usize {
        self.len * self.rows * self.planes
    }

    /// The same bytes with non-negative pitches, first byte lowest: the order a copy takes
    /// does not matter, only which bytes it moves.
    pub fn ascending(mut self) -> Strided {
        if self.rows == 1 && self.planes > 1 {
            (self.rows, self.pitch, self.planes, self.plane_pitch) = (self.planes, self.plane_pitch, 1, 0);
        }
        if self.pitch < 0 {
            self.at += (self.rows as i64 - 1) * self.pitch;
            self.pitch = -self.pitch;
        }
        if self.plane_pitch < 0 {
            self.at += (self.planes as i64 - 1) * self.plane_pitch;
            self.plane_pitch = -self.plane_pitch;
        }
        self
    }

    /// Driver calls one copy of this block takes: one, or one per plane when the planes are
    /// not a whole number of rows apart.
    pub fn calls(&self) -> usize {
        let b = self.ascending();
        if b.planes <= 1 || b.rows <= 1 || (b.pitch > 0 && b.plane_pitch % b.pitch == 0 && b.plane_pitch / b.pitch >= b.rows as i64) {
            1
        } else {
            b.planes
        }
    }
}

/// Which way a copy goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    ToHost,
    ToDevice,
}

impl InContext<'_> {
    /// Device to host: the bytes of `blocks` (offsets from `dev` and from `host`, which have
    /// the same layout), complete on return.
    pub fn strided_to_host(&self, host: *mut c_void, dev: *const c_void, blocks: &Blocks) -> Result<(), CudaError> {
        self.strided(Way::ToHost, host, false, dev as u64, blocks)
    }

    /// Device to host: the bytes of `blocks` (offsets from `dev`) packed one after the other at
    /// `host`, each block's planes and rows in order, first byte lowest ([`Strided::ascending`]).
    pub fn strided_to_packed(&self, host: *mut c_void, dev: *const c_void, blocks: &Blocks) -> Result<(), CudaError> {
        self.strided(Way::ToHost, host, true, dev as u64, blocks)
    }

    /// Host to device: the reverse of [`strided_to_packed`](Self::strided_to_packed).
    pub fn packed_to_device(&self, dev: *mut c_void, host: *const c_void, blocks: &Blocks) -> Result<(), CudaError> {
        self.strided(Way::ToDevice, host as *mut c_void, true, dev as u64, blocks)
    }

    /// Host to device: the bytes of `blocks`, complete on return; no other device byte is
    /// written.
    pub fn strided_to_device(&self, dev: *mut c_void, host: *const c_void, blocks: &Blocks) -> Result<(), CudaError> {
        self.strided(Way::ToDevice, host as *mut c_void, false, dev as u64, blocks)
    }

    /// `packed`: the host side holds the blocks' bytes one after the other instead of at the
    /// device's offsets.
    fn strided(&self, way: Way, host: *mut c_void, packed: bool, dev: u64, blocks: &Blocks) -> Result<(), CudaError> {
        if summary(blocks).calls > FEW_CALLS && pack::expected() && self.packed_by_kernel(way, host, packed, dev, blocks)? {
            return Ok(());
        }
        let d = self.driver();
        let legacy = std::ptr::null_mut();
        let mut bytes = 0;
        for b in blocks.iter().map(|b| b.ascending()) {
            if b.bytes() == 0 {
                continue;
            }
            let h = match packed {
                true => host.cast::<u8>().wrapping_add(bytes),
                false => host.cast::<u8>().wrapping_offset(b.at as isize),
            };
            bytes += b.bytes();
            let v = dev.wrapping_add_signed(b.at);
            // The host side's pitch and plane height: the device's, or the rows packed.
            let (hp, hh) = match packed {
                true => (b.len, b.rows),
                false => (b.pitch.max(0) as usize, if b.pitch > 0 { (b.plane_pitch / b.pitch) as usize } else { 0 }),
            };
            if b.rows == 1 && b.planes == 1 {
                // SAFETY: the block lies within both spans (the caller's).
                check("cuMemcpyAsync", unsafe {
                    match way {
                        Way::ToHost => (d.memcpy_dtoh_async)(h.cast(), v, b.len, legacy),
                        Way::ToDevice => (d.memcpy_htod_async)(v, h.cast(), b.len, legacy),
                    }
                })?;
            } else if b.calls() == 1 && b.planes > 1 {
                let (host_type, dev_type) = (CUmemorytype::CU_MEMORYTYPE_HOST as c_uint, CUmemorytype::CU_MEMORYTYPE_DEVICE as c_uint);
                let (pitch, height) = (b.pitch as usize, (b.plane_pitch / b.pitch) as usize);
                let mut c = Memcpy3D {
                    src_x_in_bytes: 0,
                    src_y: 0,
                    src_z: 0,
                    src_lod: 0,
                    src_memory_type: dev_type,
                    src_host: std::ptr::null(),
                    src_device: v,
                    src_array: std::ptr::null_mut(),
                    reserved0: std::ptr::null_mut(),
                    src_pitch: pitch,
                    src_height: height,
                    dst_x_in_bytes: 0,
                    dst_y: 0,
                    dst_z: 0,
                    dst_lod: 0,
                    dst_memory_type: host_type,
                    dst_host: h.cast(),
                    dst_device: 0,
                    dst_array: std::ptr::null_mut(),
                    reserved1: std::ptr::null_mut(),
                    dst_pitch: hp,
                    dst_height: hh,
                    width_in_bytes: b.len,
                    height: b.rows,
                    depth: b.planes,
                };
                if way == Way::ToDevice {
                    (c.src_memory_type, c.src_host, c.src_device) = (host_type, h.cast(), 0);
                    (c.dst_memory_type, c.dst_host, c.dst_device) = (dev_type, std::ptr::null_mut(), v);
                    (c.src_pitch, c.src_height, c.dst_pitch, c.dst_height) = (hp, hh, pitch, height);
                }
                // SAFETY: a pitched copy within both spans.
                check("cuMemcpy3DAsync", unsafe { (d.memcpy_3d_async)(&c, legacy) })?;
            } else {
                for k in 0..b.planes {
                    let off = k as i64 * b.plane_pitch;
                    let at = match packed {
                        true => h.wrapping_add(k * b.len * b.rows),
                        false => h.wrapping_offset(off as isize),
                    };
                    self.rows(way, at.cast(), v.wrapping_add_signed(off), b, packed)?;
                }
            }
        }
        signal::wait_shaped(d, bytes)
    }

    /// [`strided`](Self::strided) through the pack kernel; `Ok(false)` when it cannot run and
    /// nothing was done. A host side laid out as the span gets the packed bytes through a
    /// buffer of its own, spread and gathered by the CPU.
    fn packed_by_kernel(&self, way: Way, host: *mut c_void, packed: bool, dev: u64, blocks: &Blocks) -> Result<bool, CudaError> {
        if packed {
            return match way {
                Way::ToHost => pack::to_host(self, dev, blocks, host),
                Way::ToDevice => pack::to_device(self, dev, blocks, host),
            };
        }
        let mut buffer = vec![0u8; summary(blocks).bytes];
        let bounce = buffer.as_mut_ptr();
        let spread = |to_span: bool| {
            let mut at = 0;
            pack::each_run(blocks, |off, len| {
                // SAFETY: the run lies within the host span (same layout as the device's), and
                // the bounce buffer holds every run one after the other.
                unsafe {
                    let span = host.cast::<u8>().offset(off as isize);
                    let b = bounce.add(at);
                    if to_span {
                        std::ptr::copy_nonoverlapping(b, span, len);
                    } else {
                        std::ptr::copy_nonoverlapping(span, b, len);
                    }
                }
                at += len;
            });
        };
        match way {
            Way::ToHost => {
                let done = pack::to_host(self, dev, blocks, bounce.cast())?;
                if done {
                    spread(true);
                }
                Ok(done)
            }
            Way::ToDevice => {
                spread(false);
                pack::to_device(self, dev, blocks, bounce.cast_const().cast())
            }
        }
    }

    /// One plane of `b`: its rows as one pitched copy (packed rows on the host side if `packed`).
    fn rows(&self, way: Way, h: *mut c_void, v: u64, b: Strided, packed: bool) -> Result<(), CudaError> {
        let (host_type, dev_type) = (CUmemorytype::CU_MEMORYTYPE_HOST as c_uint, CUmemorytype::CU_MEMORYTYPE_DEVICE as c_uint);
        let pitch = b.pitch.max(b.len as i64) as usize;
        let hp = if packed { b.len } else { pitch };
        let mut c = Memcpy2D {
            src_x_in_bytes: 0,
            src_y: 0,
            src_memory_type: dev_type,
            src_host: std::ptr::null(),
            src_device: v,
            src_array: std::ptr::null_mut(),
            src_pitch: pitch,
            dst_x_in_bytes: 0,
            dst_y: 0,
            dst_memory_type: host_type,
            dst_host: h,
            dst_device: 0,
            dst_array: std::ptr::null_mut(),
            dst_pitch: hp,
            width_in_bytes: b.len,
            height: b.rows,
        };
        if way == Way::ToDevice {
            (c.src_memory_type, c.src_host, c.src_device) = (host_type, h.cast_const(), 0);
            (c.dst_memory_type, c.dst_host, c.dst_device) = (dev_type, std::ptr::null_mut(), v);
            (c.src_pitch, c.dst_pitch) = (hp, pitch);
        }
        // SAFETY: a pitched copy within both spans.
        check("cuMemcpy2DAsync", unsafe { (self.driver().memcpy_2d_async)(&c, std::ptr::null_mut()) })
    }
}
