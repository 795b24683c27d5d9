//! Copies between a device allocation and host memory, run in the allocation's own context.
//!
//! The copies run on the legacy default stream of that context and are waited for: they start
//! after all work already issued to blocking streams of the context, and the data is in place
//! when they return. That is the ordering guarantee the README documents. A peer's device
//! memory copied into host memory ([`InContext::peer_to_host`]) is the exception: it runs on a
//! stream of cudampi's own, which waits for none of the program's. Small copies are
//! waited for by polling host memory (`signal`), and copies to the device of one or two words
//! are written by the stream itself (`signal::write_to_device`).

use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

use super::driver::{self, CUcontext, CuResult, Driver, Memcpy2D, CUDA_SUCCESS};
use super::pointer::Device;
use super::signal;

/// A failed driver call: which one and its result code.
#[derive(Clone, Copy, Debug)]
pub struct CudaError {
    pub call: &'static str,
    pub code: CuResult,
}

impl CudaError {
    pub fn name(&self) -> &'static str {
        driver::get().map_or("unknown CUDA error", |d| d.error_name(self.code))
    }
}

pub fn check(call: &'static str, code: CuResult) -> Result<(), CudaError> {
    if code == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(CudaError { call, code })
    }
}

const MAX_DEVICES: usize = 64;
/// Primary contexts retained for allocations that carry no context (VMM, pools); released in
/// `MPI_Finalize`.
static PRIMARY: [AtomicPtr<c_void>; MAX_DEVICES] = [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_DEVICES];

/// The table slot of GPU `ordinal`; 101 (`CUDA_ERROR_INVALID_DEVICE`) past the table.
fn slot(ordinal: i32) -> Result<usize, CudaError> {
    usize::try_from(ordinal).ok().filter(|&i| i < MAX_DEVICES).ok_or(CudaError { call: "cuDeviceGet", code: 101 })
}

fn primary_context(d: &Driver, ordinal: i32) -> Result<CUcontext, CudaError> {
    let slot = slot(ordinal)?;
    let cached = PRIMARY[slot].load(Ordering::Acquire);
    if !cached.is_null() {
        return Ok(cached.cast());
    }
    let mut dev = 0;
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: out-pointers valid.
    check("cuDeviceGet", unsafe { (d.device_get)(&mut dev, ordinal) })?;
    check("cuDevicePrimaryCtxRetain", unsafe { (d.primary_ctx_retain)(&mut ctx, dev) })?;
    if PRIMARY[slot].compare_exchange(std::ptr::null_mut(), ctx.cast(), Ordering::AcqRel, Ordering::Acquire).is_err() {
        // Another thread retained it first; keep one reference only.
        // SAFETY: balances the retain above.
        unsafe { (d.primary_ctx_release)(dev) };
    }
    Ok(PRIMARY[slot].load(Ordering::Acquire).cast())
}

/// A non-blocking stream of cudampi's own in each retained primary context, for copies whose
/// order against the program's work on this process's GPU does not matter: a peer's device
/// memory into host memory. On the legacy default stream such a copy would wait for every
/// blocking stream of the program, and a program stream may wait for cudampi itself (the
/// stream-ordered calls' progress thread receives so). Destroyed with the contexts.
static OWN_STREAM: [AtomicPtr<c_void>; MAX_DEVICES] = [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_DEVICES];

fn own_stream(d: &Driver, ordinal: i32) -> Result<*mut c_void, CudaError> {
    let slot = slot(ordinal)?;
    let cached = OWN_STREAM[slot].load(Ordering::Acquire);
    if !cached.is_null() {
        return Ok(cached);
    }
    let mut stream = std::ptr::null_mut();
    // SAFETY: a valid out-pointer, in the current context (the primary one of `ordinal`); 1:
    // CU_STREAM_NON_BLOCKING.
    check("cuStreamCreate", unsafe { (d.stream_create)(&mut stream, 1) })?;
    if let Err(other) = OWN_STREAM[slot].compare_exchange(std::ptr::null_mut(), stream, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: made above, never used.
        unsafe { (d.stream_destroy)(stream) };
        return Ok(other);
    }
    Ok(stream)
}

/// Makes cudampi's own stream of GPU `ordinal`'s primary context now, in the calling thread: a
/// thread that must never wait for the program (the stream-ordered calls' progress thread)
/// would otherwise make it on its first copy, and making a stream waits for a driver lock that
/// a program thread holds while it waits for a stream that waits for that very thread (a
/// copy into pageable memory on such a stream, measured on an H200 with MPICH 5).
pub fn prepare_own_stream(ordinal: i32) -> Result<(), CudaError> {
    let ctx = InContext::enter(&Device::primary(ordinal))?;
    own_stream(ctx.driver, ordinal).map(|_| ())
}

/// Makes the allocation's context current for the scope, unless it already is.
pub struct InContext<'a> {
    driver: &'a Driver,
    ctx: CUcontext,
    pushed: bool,
    /// Small copies to the device may be stream memory writes (not into managed memory).
    stream_writes: bool,
}

impl<'a> InContext<'a> {
    pub fn enter(dev: &Device) -> Result<InContext<'static>, CudaError> {
        let d = driver::get().ok_or(CudaError { call: "cuInit", code: 3 })?;
        let target = if dev.ctx.is_null() { primary_context(d, dev.ordinal)? } else { dev.ctx };
        let mut current: CUcontext = std::ptr::null_mut();
        // SAFETY: out-pointer valid.
        check("cuCtxGetCurrent", unsafe { (d.ctx_get_current)(&mut current) })?;
        let stream_writes = !dev.managed;
        if current == target {
            return Ok(InContext { driver: d, ctx: target, pushed: false, stream_writes });
        }
        // SAFETY: target is a live context (from the pointer or a retained primary context).
        check("cuCtxPushCurrent", unsafe { (d.ctx_push_current)(target) })?;
        Ok(InContext { driver: d, ctx: target, pushed: true, stream_writes })
    }

    pub fn driver(&self) -> &'a Driver {
        self.driver
    }

    /// The context the copies run in.
    pub fn context(&self) -> CUcontext {
        self.ctx
    }

    /// Waits for everything queued so far on the context's legacy default stream.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        signal::synchronize(self.driver)
    }

    /// Device to host, `len` bytes. A small copy into pinned memory is queued and waited for by
    /// polling; into pageable memory the driver's queued copy would return only once done, and
    /// polling would then cost a second round trip.
    pub fn to_host(&self, dst: *mut c_void, src: *const c_void, len: usize, pinned: bool) -> Result<(), CudaError> {
        if pinned && len <= signal::MAX_BYTES {
            // SAFETY: as below; the legacy default stream of the current context.
            check("cuMemcpyDtoHAsync", unsafe { (self.driver.memcpy_dtoh_async)(dst, src as u64, len, std::ptr::null_mut()) })?;
            return signal::wait(self.driver, len);
        }
        // SAFETY: the caller guarantees dst holds len writable bytes; the driver validates src.
        check("cuMemcpyDtoH", unsafe { (self.driver.memcpy_dtoh)(dst, src as u64, len) })
    }

    /// A peer's device memory into host memory, `len` bytes, complete on return, on cudampi's
    /// own stream of this context, which must be `ordinal`'s primary one ([`own_stream`]).
    pub fn peer_to_host(&self, ordinal: i32, dst: *mut c_void, src: driver::CUdeviceptr, len: usize) -> Result<(), CudaError> {
        let stream = own_stream(self.driver, ordinal)?;
        // SAFETY: the caller guarantees dst holds len writable bytes and src len readable ones;
        // the stream is this context's.
        unsafe {
            check("cuMemcpyDtoHAsync", (self.driver.memcpy_dtoh_async)(dst, src, len, stream))?;
            check("cuStreamSynchronize", (self.driver.stream_synchronize)(stream))
        }
    }

    /// Host to device, only the byte runs `(offset, len)` (sorted, disjoint) of `src` to the
    /// same offsets of `dst`, complete on return. Runs of equal length at a constant stride go
    /// as one pitched copy, so a strided datatype costs one copy, not one per block. The copies
    /// are queued on the legacy default stream and waited for: measured on an H200 host, 1.2 us
    /// faster for small messages than the synchronous copy, which also returns early from
    /// pageable memory; small ones by polling (`signal`). One or two words (up to 32 on a GPU
    /// another rank shares) are not copied but written by the stream
    /// (`signal::write_to_device`), and a lone byte or aligned 16-bit value is set by a memset
    /// (`set_value`), except into managed memory. With `later`, the copies are only queued and
    /// `later` waits for them (`Deferred`); the stream then writes at most
    /// `signal::BATCH_WRITE_BYTES` of all the copies `later` holds.
    pub fn runs_to_device(&self, dst: *mut c_void, src: *const c_void, runs: &[(usize, usize)], later: Option<&mut Deferred>) -> Result<(), CudaError> {
        if let [(at, len)] = *runs {
            if len <= crate::base::config::get().ordered_recv_bytes {
                // SAFETY: the run lies within both buffers (the caller's staged span).
                return self.ordered_to_device(unsafe { dst.cast::<u8>().add(at) }.cast(), unsafe { src.cast::<u8>().add(at) }.cast(), len);
            }
        }
        let bytes: usize = runs.iter().map(|r| r.1).sum();
        let may_write = later.as_ref().map_or(true, |l| !l.copy_only && l.written + bytes <= signal::BATCH_WRITE_BYTES);
        if self.stream_writes && may_write {
            if let Some(done) = signal::write_to_device(self.driver, dst as u64, src.cast(), runs, later.is_none()) {
                if let (Ok(()), Some(l)) = (&done, later) {
                    l.written += bytes;
                    l.add(self.ctx, bytes, false);
                }
                return done;
            }
        }
        let set = match *runs {
            // SAFETY: the run lies within both buffers (the caller's staged span).
            [(at, len)] if self.stream_writes => self.set_value(dst as u64 + at as u64, unsafe { src.cast::<u8>().add(at) }, len),
            _ => None,
        };
        match set {
            Some(done) => done?,
            None => self.queue_copies(dst, src, runs)?,
        }
        let shaped = runs.len() > 1;
        match (later, shaped) {
            (Some(l), _) => {
                l.add(self.ctx, bytes, shaped);
                Ok(())
            }
            (None, false) => signal::wait(self.driver, bytes),
            (None, true) => signal::wait_shaped(self.driver, bytes),
        }
    }

    /// One byte, or two at an even address, set by a memset queued on the legacy default
    /// stream: the value travels in the command, as a stream write's does, where a copy has the
    /// GPU read it from host memory first (`bench/results/2026-11-27-2xH200-ompi4.1.6-memset`).
    /// Waited for by the host word, a byte took 5.0-5.7 us against 6.2-6.5 copied on one H200
    /// and one H100; a second memset costs what the copy saves (three bytes as 8 + 16 bits:
    /// 6.4-7.1). The 1-byte ping-pong with a GPU per rank went from 14.59-14.73 to 14.31-14.42
    /// us one way. `None` for any other run.
    fn set_value(&self, dst: u64, src: *const u8, len: usize) -> Option<Result<(), CudaError>> {
        let legacy = std::ptr::null_mut();
        // SAFETY: src holds the run's len readable bytes; dst is device memory of this context
        // with as many, aligned for the 16-bit write.
        let done = match len {
            1 => check("cuMemsetD8Async", unsafe { (self.driver.memset_d8_async)(dst, src.read(), 1, legacy) }),
            2 if dst % 2 == 0 => check("cuMemsetD16Async", unsafe {
                (self.driver.memset_d16_async)(dst, src.cast::<u16>().read_unaligned(), 1, legacy)
            }),
            _ => return None,
        };
        if done.is_ok() {
            crate::base::stats::add(&crate::base::stats::BYTES_STREAM_WRITTEN, len);
        }
        Some(done)
    }

    /// Queues the copies of `runs_to_device`, one per run or one pitched copy per group of runs
    /// of one length at one stride.
    fn queue_copies(&self, dst: *mut c_void, src: *const c_void, runs: &[(usize, usize)]) -> Result<(), CudaError> {
        use cudarc::driver::sys::CUmemorytype;
        let legacy = std::ptr::null_mut();
        let mut i = 0;
        while i < runs.len() {
            let (at, len) = runs[i];
            // The longest group of runs from i with this length and one stride.
            let mut rows = 1;
            if i + 1 < runs.len() && runs[i + 1].1 == len {
                let pitch = runs[i + 1].0 - at;
                while i + rows < runs.len() && runs[i + rows].1 == len && runs[i + rows].0 - runs[i + rows - 1].0 == pitch {
                    rows += 1;
                }
            }
            if rows == 1 {
                // SAFETY: the run lies within both buffers (the caller's staged span).
                check("cuMemcpyHtoDAsync", unsafe {
                    (self.driver.memcpy_htod_async)(dst as u64 + at as u64, src.cast::<u8>().add(at).cast(), len, legacy)
                })?;
            } else {
                let pitch = runs[i + 1].0 - at;
                let c = Memcpy2D {
                    src_x_in_bytes: 0,
                    src_y: 0,
                    src_memory_type: CUmemorytype::CU_MEMORYTYPE_HOST as c_uint,
                    // SAFETY: within the staged span.
                    src_host: unsafe { src.cast::<u8>().add(at) }.cast(),
                    src_device: 0,
                    src_array: std::ptr::null_mut(),
                    src_pitch: pitch,
                    dst_x_in_bytes: 0,
                    dst_y: 0,
                    dst_memory_type: CUmemorytype::CU_MEMORYTYPE_DEVICE as c_uint,
                    dst_host: std::ptr::null_mut(),
                    dst_device: dst as u64 + at as u64,
                    dst_array: std::ptr::null_mut(),
                    dst_pitch: pitch,
                    width_in_bytes: len,
                    height: rows,
                };
                // SAFETY: a host-to-device pitched copy within both spans.
                check("cuMemcpy2DAsync", unsafe { (self.driver.memcpy_2d_async)(&c, legacy) })?;
            }
            i += rows;
        }
        Ok(())
    }
}

impl InContext<'_> {
    /// Host to device through a pageable bounce buffer, as `cudaMemcpy` from pageable memory
    /// does it: the driver takes the bytes before it returns, so the staging buffer is free at
    /// once, and the DMA is ordered on the legacy default stream without being waited for. That
    /// saves the wait for a small copy's completion; work on non-blocking streams is then not
    /// ordered after it, which is why it is an option (`CUDAMPI_ORDERED_RECV_BYTES`).
    fn ordered_to_device(&self, dst: *mut c_void, src: *const c_void, len: usize) -> Result<(), CudaError> {
        thread_local! {
            static BOUNCE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BOUNCE.with_borrow_mut(|bounce| {
            bounce.clear();
            // SAFETY: the caller's span holds len readable bytes at src.
            bounce.extend_from_slice(unsafe { std::slice::from_raw_parts(src.cast::<u8>(), len) });
            // SAFETY: dst is device memory of this context with len bytes; bounce holds len bytes.
            check("cuMemcpyHtoD", unsafe { (self.driver.memcpy_htod)(dst as u64, bounce.as_ptr().cast(), len) })
        })
    }
}

impl Drop for InContext<'_> {
    fn drop(&mut self) {
        if self.pushed {
            let mut popped: CUcontext = std::ptr::null_mut();
            // SAFETY: pops exactly what enter() pushed.
            unsafe { (self.driver.ctx_pop_current)(&mut popped) };
        }
    }
}

/// Releases the primary contexts retained by `primary_context`, and cudampi's streams in them.
pub fn release_contexts() {
    let Some(d) = driver::get() else { return };
    for (i, slot) in PRIMARY.iter().enumerate() {
        let ctx = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
        let stream = OWN_STREAM[i].swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !stream.is_null() && !ctx.is_null() {
            let mut popped: CUcontext = std::ptr::null_mut();
            // SAFETY: the stream was made in this context, which is still retained; nothing
            // uses it any more (MPI_Finalize).
            unsafe {
                if (d.ctx_push_current)(ctx.cast()) == CUDA_SUCCESS {
                    (d.stream_destroy)(stream);
                    (d.ctx_pop_current)(&mut popped);
                }
            }
        }
        if !ctx.is_null() {
            let mut dev = 0;
            // SAFETY: i was a valid ordinal when the context was retained.
            unsafe {
                if (d.device_get)(&mut dev, i as i32) == CUDA_SUCCESS {
                    (d.primary_ctx_release)(dev);
                }
            }
        }
    }
}

/// One context's queued copies: their bytes, and whether any was shaped (pitched).
struct Queued {
    ctx: CUcontext,
    bytes: usize,
    shaped: bool,
}

/// Copies to the device whose wait is left to the end of a call that makes many of them.
///
/// A completion call over a window of staged receives (`MPI_Waitall` on 64 of them, say)
/// copies each message to the device. Waiting for each copy before queuing the next costs a
/// GPU round trip per message, and on a GPU two ranks share, often a switch from the other
/// process's work per message. Copies made with a `Deferred` are only queued on the legacy
/// default stream of their context; [`Deferred::wait`] then waits once per context, before the
/// call returns, so the data is in place for every stream on return as before.
///
/// The owner must keep the staging buffers the copies read until the wait: dropping a
/// `Deferred` that was not waited for waits too, so an early return cannot hand a buffer back
/// while the GPU still reads it.
#[derive(Default)]
pub struct Deferred {
    queued: Vec<Queued>,
    /// Bytes of the queued copies that the stream writes (`signal::BATCH_WRITE_BYTES`).
    written: usize,
    /// Every copy goes through the copy engine ([`Deferred::copy_only`]).
    copy_only: bool,
}

impl Deferred {
    /// No stream writes for this call's copies: the stream writes a receive to spare it the
    /// wait for its copy, which a call that copies others waits for anyway, so that writes
    /// beside copies only add their own time. Both ranks on one H100 (2026-11-26, call T),
    /// `bench/bw` one way, windows of 64 x 256 B, eight runs each: 24.0 MB/s with the first
    /// two receives of each window written and the rest copied, 25.1 with all copied.
    pub fn copy_only(&mut self) {
        self.copy_only = true;
    }

    /// `bytes` copied on the legacy default stream of `ctx`, not yet waited for.
    fn add(&mut self, ctx: CUcontext, bytes: usize, shaped: bool) {
        match self.queued.iter_mut().find(|q| q.ctx == ctx) {
            Some(q) => {
                q.bytes += bytes;
                q.shaped |= shaped;
            }
            None => self.queued.push(Queued { ctx, bytes, shaped }),
        }
    }

    /// Waits for every queued copy; the first failure is returned after all are waited for.
    pub fn wait(mut self) -> Result<(), CudaError> {
        self.wait_all()
    }

    fn wait_all(&mut self) -> Result<(), CudaError> {
        let mut outcome = Ok(());
        for q in std::mem::take(&mut self.queued) {
            let waited = InContext::enter(&Device::new(q.ctx, -1)).and_then(|c| match q.shaped {
                false => signal::wait(c.driver(), q.bytes),
                true => signal::wait_shaped(c.driver(), q.bytes),
            });
            if outcome.is_ok() {
                outcome = waited;
            }
        }
        outcome
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        // Only reached on a path that did not wait; its caller reports the error it returns for.
        let _ = self.wait_all();
    }
}
