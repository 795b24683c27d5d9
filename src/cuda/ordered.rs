//! The GPU side of MPICH's stream-ordered calls (`MPIX_*_enqueue`): a [`Lane`] is one program
//! stream that MPI operations join.
//!
//! Where an operation must start once the stream has reached it, the stream itself writes a
//! ticket into a word of pinned host memory (`cuStreamWriteValue32`), which cudampi's progress
//! thread (`streams`) polls before it makes the MPI calls. A host function (`cuLaunchHostFunc`)
//! would do the same through the driver's own thread and hold the stream until it returned:
//! measured on an H200, a step of a short kernel, a hand-off and a wait took 60 us with a host
//! function and 14 us with the ticket (`bench/handoff.cu`).
//!
//! Where later work on the stream must wait for the operation, the stream waits on the GPU
//! itself (`cuStreamWaitValue32`) for a word of device memory to reach the operation's number:
//! no host thread blocks inside the stream. The numbers are written by the GPU too, by a stream
//! of cudampi's own on which the copies into the program's device buffers are queued first: the
//! program's stream goes on exactly when the received bytes are in place, and the words are
//! written in the order of their numbers, whatever the host thread does meanwhile. A copy of
//! each number in pinned host memory tells the host when a staging buffer may go back to the
//! pool.
//!
//! Nothing here may be called where it could wait for a program stream that waits for the
//! progress thread: freeing the lane's device memory waits for the GPU, so lanes are closed
//! in the program's threads only.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::copy::{check, CudaError, InContext};
use super::driver::{self, CUcontext, CUdevice, CUdeviceptr, Ordered};
use super::pointer::Device;

const PAGE: usize = 4096;
/// Where in the lane's page the ticket word lies: a cache line away from the numbers' copy.
const TICKET_AT: usize = 64;
/// `CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP`.
const REGISTER_FLAGS: u32 = 0x1 | 0x2;
/// `CU_STREAM_WAIT_VALUE_GEQ`: a cyclic comparison, `(int32_t)(*addr - value) >= 0`.
const WAIT_GEQ: u32 = 0;
/// `CU_STREAM_NON_BLOCKING`: the lane's own stream never waits for the legacy default stream,
/// where the program's work may be waiting for it.
const NON_BLOCKING: u32 = 1;

/// One program stream, with what cudampi keeps beside it.
pub struct Lane {
    /// The program's stream.
    pub stream: *mut c_void,
    /// Its context and GPU.
    pub dev: Device,
    /// cudampi's own stream on that context: copies into device buffers, then the word.
    inner: *mut c_void,
    /// The word the program's stream waits on, in device memory: the GPU polls its own memory
    /// at once, where a word of host memory is looked at far less often.
    gate: CUdeviceptr,
    /// The same numbers in host memory, in a page of its own pinned and mapped, for the host.
    page: *mut c_void,
    word_dev: CUdeviceptr,
    /// The last ticket handed out ([`Lane::mark`]).
    tickets: AtomicU32,
    closed: AtomicBool,
}

// SAFETY: driver handles and pinned host memory, usable from any thread; the stream module
// serialises what each thread does with a lane.
unsafe impl Send for Lane {}
unsafe impl Sync for Lane {}

/// The driver's stream-ordered entry points, or why there are none.
fn ordered() -> Result<(&'static driver::Driver, &'static Ordered), CudaError> {
    let d = driver::get().ok_or(CudaError { call: "cuInit", code: 3 })?;
    let o = d.ordered.as_ref().ok_or(CudaError { call: "cuStreamWaitValue32", code: 801 })?;
    Ok((d, o))
}

impl Lane {
    /// Takes up the program's `stream` (a `CUstream`, or `cudaStream_t`: the same handle).
    pub fn open(stream: *mut c_void) -> Result<Lane, CudaError> {
        let (d, o) = ordered()?;
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the driver checks the handle.
        check("cuStreamGetCtx", unsafe { (o.stream_get_ctx)(stream, &mut ctx) })?;
        let scope = InContext::enter(&Device::new(ctx, -1))?;
        let mut ordinal: CUdevice = 0;
        // SAFETY: a valid out-pointer, in the stream's context.
        check("cuCtxGetDevice", unsafe { (o.ctx_get_device)(&mut ordinal) })?;
        let mut lane = Lane { stream, dev: Device::new(ctx, ordinal), inner: std::ptr::null_mut(), gate: 0, page: std::ptr::null_mut(), word_dev: 0, tickets: AtomicU32::new(0), closed: AtomicBool::new(false) };
        // SAFETY: valid out-pointers in the current context; the page is mapped here, pinned
        // and mapped for the device, and released by `close` (or below on failure).
        unsafe {
            check("cuStreamCreate", (d.stream_create)(&mut lane.inner, NON_BLOCKING))?;
            if let Err(e) = check("cuMemAlloc", (d.mem_alloc)(&mut lane.gate, 4)).and_then(|()| check("cuMemcpyHtoD", (d.memcpy_htod)(lane.gate, (&0u32 as *const u32).cast(), 4))) {
                if lane.gate != 0 {
                    (d.mem_free)(lane.gate);
                }
                (d.stream_destroy)(lane.inner);
                return Err(e);
            }
            let page = libc::mmap(std::ptr::null_mut(), PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
            if page == libc::MAP_FAILED {
                (d.mem_free)(lane.gate);
                (d.stream_destroy)(lane.inner);
                return Err(CudaError { call: "mmap", code: 2 });
            }
            let registered = check("cuMemHostRegister", (d.mem_host_register)(page, PAGE, REGISTER_FLAGS));
            let mapped = registered.and_then(|()| check("cuMemHostGetDevicePointer", (o.mem_host_get_device_pointer)(&mut lane.word_dev, page, 0)));
            if let Err(e) = mapped {
                if registered.is_ok() {
                    (d.mem_host_unregister)(page);
                }
                libc::munmap(page, PAGE);
                (d.mem_free)(lane.gate);
                (d.stream_destroy)(lane.inner);
                return Err(e);
            }
            lane.page = page;
        }
        drop(scope);
        if let Err(e) = super::copy::prepare_own_stream(ordinal) {
            lane.close();
            return Err(e);
        }
        Ok(lane)
    }

    fn word(&self) -> &AtomicU32 {
        // SAFETY: the first word of the lane's page, which lives as long as the lane.
        unsafe { &*(self.page as *const AtomicU32) }
    }

    fn ticket_word(&self) -> &AtomicU32 {
        // SAFETY: a word of the lane's page, which lives as long as the lane.
        unsafe { &*(self.page.cast::<u8>().add(TICKET_AT) as *const AtomicU32) }
    }

    /// Whether the word has reached `number` (cyclically, as the stream compares).
    pub fn reached(&self, number: u32) -> bool {
        (self.word().load(Ordering::Acquire).wrapping_sub(number) as i32) >= 0
    }

    /// Queues on the program's stream, after the work queued there before, the write of a new
    /// ticket, and returns it. Callers queue their marks in the order they take tickets (the
    /// stream's issuing lock), so that a ticket written says every earlier one was passed.
    pub fn mark(&self) -> Result<u32, CudaError> {
        let (_, o) = ordered()?;
        let _scope = InContext::enter(&self.dev)?;
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        // SAFETY: the device address of the lane's ticket word.
        check("cuStreamWriteValue32", unsafe { (o.stream_write_value32)(self.stream, self.word_dev + TICKET_AT as u64, ticket, 0) })?;
        Ok(ticket)
    }

    /// Whether the program's stream has passed the mark of `ticket`.
    pub fn passed(&self, ticket: u32) -> bool {
        (self.ticket_word().load(Ordering::Acquire).wrapping_sub(ticket) as i32) >= 0
    }

    /// Queues a copy of `len` bytes of device memory at `src` into host memory at `dst` on the
    /// program's stream, after the work queued there before.
    pub fn to_host(&self, dst: *mut c_void, src: *const c_void, len: usize) -> Result<(), CudaError> {
        let scope = InContext::enter(&self.dev)?;
        // SAFETY: the caller's device range and a host buffer of `len` bytes that lives until
        // the copy is done (the caller's operation owns it).
        check("cuMemcpyDtoHAsync", unsafe { (scope.driver().memcpy_dtoh_async)(dst, src as u64, len, self.stream) })
    }

    /// `len` bytes of device memory of the lane's GPU in the stream's order (`cuMemAllocAsync`):
    /// for work queued on the program's stream after this call.
    pub fn alloc(&self, len: usize) -> Result<*mut c_void, CudaError> {
        let (_, o) = ordered()?;
        let _scope = InContext::enter(&self.dev)?;
        let mut at: CUdeviceptr = 0;
        // SAFETY: a valid out-pointer and the program's stream, in its context.
        check("cuMemAllocAsync", unsafe { (o.mem_alloc_async)(&mut at, len.max(1), self.stream) })?;
        Ok(at as *mut c_void)
    }

    /// Gives memory of [`Lane::alloc`] back once the program's stream has passed the work
    /// queued there so far.
    pub fn free(&self, at: *mut c_void) -> Result<(), CudaError> {
        let (_, o) = ordered()?;
        let _scope = InContext::enter(&self.dev)?;
        // SAFETY: memory of `alloc`, given back once, after its last use on this stream.
        check("cuMemFreeAsync", unsafe { (o.mem_free_async)(at as CUdeviceptr, self.stream) })
    }

    /// Queues a copy of `len` bytes between device memory on the program's stream.
    pub fn copy(&self, dst: *mut c_void, src: *const c_void, len: usize) -> Result<(), CudaError> {
        let scope = InContext::enter(&self.dev)?;
        // SAFETY: device ranges of `len` bytes, live until the stream has passed the copy.
        check("cuMemcpyDtoDAsync", unsafe { (scope.driver().memcpy_dtod_async)(dst as u64, src as u64, len, self.stream) })
    }

    /// Copies `len` bytes of device memory at `src` into `dst`, host memory or device memory
    /// of any GPU, once the work queued on the program's stream before is done.
    pub fn fetch(&self, dst: *mut c_void, on_device: bool, src: *const c_void, len: usize) -> Result<(), CudaError> {
        self.synchronize()?;
        let scope = InContext::enter(&self.dev)?;
        let d = scope.driver();
        // SAFETY: the caller's ranges of `len` bytes; unified addressing finds another GPU's.
        unsafe {
            match on_device {
                true => check("cuMemcpyDtoD", (d.memcpy_dtod)(dst as u64, src as u64, len)),
                false => check("cuMemcpyDtoH", (d.memcpy_dtoh)(dst, src as u64, len)),
            }
        }
    }

    /// Makes later work on the program's stream wait until the word reaches `number`.
    pub fn wait_for(&self, number: u32) -> Result<(), CudaError> {
        let (_, o) = ordered()?;
        let _scope = InContext::enter(&self.dev)?;
        // SAFETY: the lane's word in device memory.
        check("cuStreamWaitValue32", unsafe { (o.stream_wait_value32)(self.stream, self.gate, number, WAIT_GEQ) })
    }

    /// On the lane's own stream: copies `len` bytes of host memory at `src` into device memory
    /// at `dst`. The caller keeps `src` until a later [`Lane::signal`]'s number is reached.
    pub fn to_device(&self, dst: *mut c_void, src: *const c_void, len: usize) -> Result<(), CudaError> {
        if len == 0 {
            return Ok(());
        }
        let scope = InContext::enter(&self.dev)?;
        // SAFETY: the program's device range of `len` bytes and a host buffer the caller keeps.
        check("cuMemcpyHtoDAsync", unsafe { (scope.driver().memcpy_htod_async)(dst as u64, src, len, self.inner) })
    }

    /// On the lane's own stream, after what was queued there before: writes `number` into the
    /// word the program's stream waits on, then into its host copy.
    pub fn signal(&self, number: u32) -> Result<(), CudaError> {
        let (_, o) = ordered()?;
        let _scope = InContext::enter(&self.dev)?;
        // SAFETY: the lane's word in device memory and the device address of its host copy.
        unsafe {
            check("cuStreamWriteValue32", (o.stream_write_value32)(self.inner, self.gate, number, 0))?;
            check("cuStreamWriteValue32", (o.stream_write_value32)(self.inner, self.word_dev, number, 0))
        }
    }

    /// Waits until the work queued on the program's stream so far is done.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        let scope = InContext::enter(&self.dev)?;
        // SAFETY: the program's stream, in its context.
        check("cuStreamSynchronize", unsafe { (scope.driver().stream_synchronize)(self.stream) })
    }

    /// Frees what the lane made, once; the program's stream stays the program's. The caller
    /// makes sure nothing uses the lane afterwards.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(scope) = InContext::enter(&self.dev) else { return };
        let d = scope.driver();
        // SAFETY: the lane's own stream and page, no longer used.
        unsafe {
            (d.stream_synchronize)(self.inner);
            (d.stream_destroy)(self.inner);
            (d.mem_free)(self.gate);
            (d.mem_host_unregister)(self.page);
            libc::munmap(self.page, PAGE);
        }
    }
}
