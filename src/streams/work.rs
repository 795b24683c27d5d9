//! What the progress thread does for the enqueued calls: [`Transfer`]s (one MPI operation each,
//! started where the program's stream has reached) and the [`Job`]s that the stream releases.
//!
//! The progress thread calls cudampi's own entry points (`own`), on host memory: a device buffer
//! was copied into a staging buffer on the program's stream before the job's mark, or is
//! filled from one on the lane's own stream afterwards (`cuda::ordered`).

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

use super::own::{self, entry};
use super::stream::Stream;
use crate::base::log;
use crate::mpi::abi::{self, Handle, Status};
use crate::mpi::real;
use crate::staging::pool::Lease;

/// The MPI operation of a transfer.
#[derive(Clone, Copy)]
pub enum Op {
    Send { dest: c_int },
    Recv { source: c_int },
    /// `MPI_Iallreduce` from `send` (a host address, or `MPI_IN_PLACE`) into the buffer.
    Allreduce { send: *const c_void, op: Handle },
}

/// One MPI operation the progress thread starts when its job fires.
pub struct Transfer {
    pub op: Op,
    /// Host memory MPI reads or writes: the program's own, or the staging buffer's.
    pub buf: *mut c_void,
    pub count: c_int,
    pub datatype: Handle,
    pub tag: c_int,
    pub comm: Handle,
    /// Where the received bytes go on the GPU (from the start of `buf`), and at most how many.
    pub device: Option<(*mut c_void, usize)>,
    /// The stream whose order the transfer joins: its lane lands device receives.
    pub stream: Arc<Stream>,
    pub name: &'static str,
    state: Mutex<State>,
}

// SAFETY: the pointers are the program's buffers and cudampi's staging buffers, handed from the
// thread that enqueued the transfer to the progress thread, which alone uses them afterwards;
// the state is behind a lock.
unsafe impl Send for Transfer {}
unsafe impl Sync for Transfer {}

#[derive(Default)]
pub struct State {
    /// The library's request, once started.
    pub request: Option<Handle>,
    pub done: bool,
    /// The library's error, from starting or completing the operation (0: none).
    pub rc: c_int,
    pub status: Option<Status>,
    /// Staging buffers the transfer owns: the send's copy, the receive's landing.
    pub leases: Vec<Lease>,
    /// The request the program holds (`MPIX_Isend_enqueue`, `MPIX_Irecv_enqueue`): a generalized
    /// request, completed when the transfer is.
    pub grequest: Option<Handle>,
}

impl Transfer {
    pub fn new(op: Op, buf: *mut c_void, count: c_int, datatype: Handle, tag: c_int, comm: Handle, stream: Arc<Stream>, name: &'static str) -> Transfer {
        Transfer { op, buf, count, datatype, tag, comm, device: None, stream, name, state: Mutex::new(State::default()) }
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the operation with cudampi's own nonblocking call.
    pub fn start(&self) {
        let mut request: Handle = abi::get().request_null;
        let rq: *mut c_void = (&mut request as *mut Handle).cast();
        // SAFETY: cudampi's entry points with host buffers that live until the transfer
        // completes, the program's handles, and an out-pointer that holds every family's request.
        let rc = unsafe {
            match self.op {
                Op::Send { dest } => entry::<own::Isend>(|o| o.PMPI_Isend).map_or_else(|rc| rc, |f| f(self.buf, self.count, self.datatype, dest, self.tag, self.comm, rq)),
                Op::Recv { source } => entry::<own::Irecv>(|o| o.PMPI_Irecv).map_or_else(|rc| rc, |f| f(self.buf, self.count, self.datatype, source, self.tag, self.comm, rq)),
                Op::Allreduce { send, op } => entry::<own::Iallreduce>(|o| o.PMPI_Iallreduce).map_or_else(|rc| rc, |f| f(send, self.buf, self.count, self.datatype, op, self.comm, rq)),
            }
        };
        let mut st = self.state();
        if rc == 0 {
            st.request = Some(request);
        } else {
            log::error(format_args!("{}: the nonblocking call failed with error {rc}", self.name));
            st.rc = rc;
            self.complete(&mut st);
        }
    }

    /// Tests a started operation; true once it is done.
    pub fn test(&self) -> bool {
        let mut st = self.state();
        if st.done {
            return true;
        }
        let Some(mut request) = st.request else { return false };
        let mut flag: c_int = 0;
        let mut status = Status::zeroed();
        // SAFETY: cudampi's MPI_Test on its own request, a valid flag and a status of every
        // family's size.
        let rc = unsafe { entry::<own::Test>(|o| o.PMPI_Test).map_or_else(|rc| rc, |f| f((&mut request as *mut Handle).cast(), &mut flag, status.as_mut_ptr())) };
        if rc != 0 {
            log::error(format_args!("{}: the operation failed with error {rc}", self.name));
            st.rc = rc;
        } else if flag == 0 {
            st.request = Some(request);
            return false;
        }
        st.status = Some(status);
        self.complete(&mut st);
        true
    }

    fn complete(&self, st: &mut State) {
        st.done = true;
        st.request = None;
        if let (Some(g), Some(p)) = (st.grequest, real::pmpi()) {
            // SAFETY: the generalized request this transfer made, completed once.
            unsafe { (p.grequest_complete)(g) };
        }
    }

    /// The bytes a device receive lands: what arrived, at most the buffer's.
    pub fn arrived(&self, st: &State) -> usize {
        let Some((_, cap)) = self.device else { return 0 };
        if let Op::Allreduce { .. } = self.op {
            return cap;
        }
        let (Some(p), Some(mut status)) = (real::pmpi(), st.status) else { return 0 };
        let mut n: i64 = 0;
        // SAFETY: a status the library filled, and a valid out-pointer.
        if st.rc != 0 || unsafe { (p.get_elements_x)(status.as_mut_ptr(), abi::get().byte, &mut n) } != 0 {
            return 0;
        }
        (n.max(0) as usize).min(cap)
    }
}

/// Where a finishing job writes its transfers' statuses.
#[derive(Clone, Copy)]
pub enum Statuses {
    Ignore,
    One(*mut c_void),
    Array(*mut c_void),
}

/// One step of a job.
pub enum Work {
    Start(Arc<Transfer>),
    /// Waits for the transfers, writes their statuses, lands device receives, and lets the
    /// program's stream go on past wait number `number`.
    Finish { transfers: Vec<Arc<Transfer>>, statuses: Statuses, number: u32 },
    /// Lets the program's stream go on past wait number `number` once the steps before it are
    /// done: a transfer started is in the library's hands, so the program may then free the
    /// communicator, as after an `MPI_Isend`.
    Release { stream: Arc<Stream>, number: u32 },
}

/// The steps the program's stream releases, in order, once it has passed the job's mark.
pub struct Job {
    stream: Arc<Stream>,
    ticket: u32,
    pub works: Vec<Work>,
    pub next: usize,
}

// SAFETY: the status pointers are the program's, written only by the progress thread.
unsafe impl Send for Job {}

impl Job {
    /// `ticket`: the lane's mark ([`crate::cuda::ordered::Lane::mark`]) queued before the job.
    pub fn new(stream: Arc<Stream>, ticket: u32, works: Vec<Work>) -> Job {
        Job { stream, ticket, works, next: 0 }
    }

    pub fn fired(&self) -> bool {
        self.stream.lane.as_ref().is_some_and(|lane| lane.passed(self.ticket))
    }
}
