//! The requests of nonblocking and persistent collectives that run on NCCL (`engine`).
//!
//! MPI has no operation for such a collective, yet the program must get a request that every
//! completion call of the library accepts, alone or in an array with its other requests. So
//! its request is a receive of no bytes from this process itself, on cudampi's own copy of
//! `MPI_COMM_SELF`, under a tag of its own: MPI completes it when cudampi sends the matching
//! empty message, which it does once the collective is done (`settle`). Until then MPI reports
//! the request pending wherever it looks, `MPI_Testany` and `MPI_Waitsome` included, and a
//! persistent collective's request is a persistent receive, started at each `MPI_Start`.
//!
//! The completion calls settle these requests first: the waiting calls wait for their
//! collectives, the others only look.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

use crate::engine::{InFlight, Planned};
use crate::mpi::abi;
use crate::mpi::{datatype, real};

/// Collectives started and not yet seen complete.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static TAGS: AtomicU32 = AtomicU32::new(0);
/// The receives' (empty) buffer.
static NOTHING: u8 = 0;

/// Whether any collective on NCCL awaits its completion: when not, the completion calls skip
/// this module.
#[inline(always)]
pub fn any() -> bool {
    IN_FLIGHT.load(Relaxed) != 0
}

/// What a request's entry holds of its collective.
pub struct Gpu {
    /// A persistent collective's operations, queued at each start.
    plan: Option<Planned>,
    flight: Option<InFlight>,
    tag: c_int,
}

impl Gpu {
    /// Posts the program's request (a receive, persistent for a persistent collective) into
    /// `request`.
    fn post(request: *mut c_void, persistent: bool) -> Result<c_int, c_int> {
        let abi = abi::get();
        let p = real::pmpi().ok_or(abi.err_intern)?;
        let comm = datatype::quiet::comm()?;
        // MPI guarantees tags up to 32767; collectives in flight at once are far fewer.
        let tag = (TAGS.fetch_add(1, Relaxed) % 32767) as c_int + 1;
        let post = if persistent { p.recv_init } else { p.irecv };
        // SAFETY: a zero-count receive into a valid address, and the caller's request slot.
        match unsafe { post(std::ptr::addr_of!(NOTHING).cast_mut().cast(), 0, abi.byte, 0, tag, comm, request.cast()) } {
            0 => Ok(tag),
            rc => Err(rc),
        }
    }

    /// A nonblocking collective started on NCCL, whose request is posted into `request`.
    pub fn started(request: *mut c_void, flight: InFlight) -> Result<Gpu, c_int> {
        let tag = Gpu::post(request, false)?;
        IN_FLIGHT.fetch_add(1, Relaxed);
        Ok(Gpu { plan: None, flight: Some(flight), tag })
    }

    /// A persistent collective planned on NCCL, whose request is created into `request`.
    pub fn planned(request: *mut c_void, plan: Planned) -> Result<Gpu, c_int> {
        let tag = Gpu::post(request, true)?;
        Ok(Gpu { plan: Some(plan), flight: None, tag })
    }

    /// One start of a persistent collective: its operations are queued (MPI's own start of
    /// the receive follows).
    pub fn start(&mut self) -> Result<(), c_int> {
        let Some(plan) = &self.plan else { return Ok(()) };
        let flight = plan.start()?;
        if self.flight.replace(flight).is_none() {
            IN_FLIGHT.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    /// Whether the collective is running.
    pub fn in_flight(&self) -> bool {
        self.flight.is_some()
    }

    fn take(&mut self) -> Option<InFlight> {
        self.flight.take()
    }

    /// The collective ended (done or failed): its request may complete.
    fn ended(&self) {
        IN_FLIGHT.fetch_sub(1, Relaxed);
        let abi = abi::get();
        let (Some(p), Ok(comm)) = (real::pmpi(), datatype::quiet::comm()) else { return };
        // SAFETY: an empty message to this process's own receive, posted under this tag.
        unsafe { (p.send)(std::ptr::addr_of!(NOTHING).cast(), 0, abi.byte, 0, self.tag, comm) };
    }

    /// Waits for the collective (`block`) or looks once; `Ok(true)` once it ended, its results
    /// in place and its request complete in MPI. A failure ends it too, with the error.
    pub fn settle(&mut self, block: bool) -> Result<bool, c_int> {
        let Some(mut f) = self.take() else { return Ok(true) };
        let r = if block { f.wait().map(|()| true) } else { f.poll() };
        match r {
            Ok(false) => {
                self.flight = Some(f);
                Ok(false)
            }
            done => {
                self.ended();
                done
            }
        }
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // Only at MPI_Finalize's clearing or a request MPI could not post: nobody is left
        // waiting, and the scratch memory goes once the GPU is done with it.
        if let Some(f) = self.flight.take() {
            IN_FLIGHT.fetch_sub(1, Relaxed);
            f.abandon();
        }
    }
}
