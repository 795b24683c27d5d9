//! cudampi's progress thread for the enqueued calls: it starts each job's transfers once the
//! program's stream has passed the job's mark, drives the library (`MPI_Test`) until they
//! complete, and lets the stream go on.
//!
//! It makes MPI calls while the program's threads make theirs, so the library must have been
//! initialised with `MPI_THREAD_MULTIPLE` (`CUDAMPI_THREAD_MULTIPLE=1` asks for it). While
//! anything is outstanding it polls: it spins a little, then yields the core between rounds,
//! and once only the GPU has been awaited for a while it naps between looks; with nothing
//! handed over it sleeps until a job comes.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use super::work::{Job, Statuses, Transfer, Work};
use super::stream::Stream;
use crate::base::{config, log, threads};
use crate::mpi::abi;
use crate::mpi::real;
use crate::staging::pool::Lease;

static THREAD: OnceLock<Thread> = OnceLock::new();
static HANDLE: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);
/// Jobs handed over and not yet taken by the thread.
static QUEUE: Mutex<Vec<Job>> = Mutex::new(Vec::new());
static STOP: AtomicBool = AtomicBool::new(false);
/// Set when `MPI_Finalize` gave up waiting: the thread leaves at once, whatever it holds.
static ABANDON: AtomicBool = AtomicBool::new(false);

/// Wakes the thread.
fn wake() {
    if let Some(t) = THREAD.get() {
        t.unpark();
    }
}

/// Starts the thread if it is not running. `Err`: the library cannot take calls from it.
pub fn ensure(name: &str) -> Result<(), c_int> {
    if THREAD.get().is_some() {
        return Ok(());
    }
    let mut handle = HANDLE.lock().unwrap_or_else(|e| e.into_inner());
    if THREAD.get().is_some() {
        return Ok(());
    }
    if real::thread_level() != Some(abi::get().thread_multiple) {
        log::error(format_args!(
            "{name}: with CUDAMPI_ENQUEUE=ordered the enqueue calls need MPI_THREAD_MULTIPLE, for cudampi's progress thread: call MPI_Init_thread with it, or set CUDAMPI_THREAD_MULTIPLE=1"
        ));
        return Err(abi::get().err_other);
    }
    log::warn(format_args!(
        "{name}: CUDAMPI_ENQUEUE=ordered is experimental: slower than the default on one GPU so far (docs/design.md)"
    ));
    STOP.store(false, Ordering::Release);
    let spawned = std::thread::Builder::new().name("cudampi-streams".into()).spawn(run);
    match spawned {
        Ok(h) => {
            let _ = THREAD.set(h.thread().clone());
            *handle = Some(h);
            Ok(())
        }
        Err(e) => {
            log::error(format_args!("{name}: cannot start the progress thread: {e}"));
            Err(abi::get().err_other)
        }
    }
}

/// Hands `job` to the thread (after its mark was queued).
pub fn submit(job: Job) {
    QUEUE.lock().unwrap_or_else(|e| e.into_inner()).push(job);
    wake();
}

/// Staging buffers of device receives, kept until the lane's word shows them landed.
struct Landing {
    stream: Arc<Stream>,
    number: u32,
    _leases: Vec<Lease>,
}

#[derive(Default)]
struct Pending {
    jobs: Vec<Job>,
    /// Started transfers not yet seen complete.
    active: Vec<Arc<Transfer>>,
    landing: Vec<Landing>,
}

fn run() {
    threads::unbind();
    let mut t = Pending::default();
    let mut quiet_since = Instant::now();
    loop {
        if ABANDON.load(Ordering::Acquire) {
            // What the jobs hold stays allocated: the program's streams may still reach them.
            std::mem::forget(t);
            return;
        }
        t.jobs.append(&mut QUEUE.lock().unwrap_or_else(|e| e.into_inner()));
        let mut moved = false;
        t.active.retain(|x| {
            let done = x.test();
            moved |= done;
            !done
        });
        let mut jobs = std::mem::take(&mut t.jobs);
        for job in jobs.iter_mut() {
            moved |= step(job, &mut t);
        }
        jobs.retain(|j| j.next < j.works.len());
        t.jobs = jobs;
        t.landing.retain(|l| !l.stream.lane.as_ref().map_or(true, |lane| lane.reached(l.number)));
        let empty = t.jobs.is_empty() && t.active.is_empty() && t.landing.is_empty();
        if empty && QUEUE.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            if STOP.load(Ordering::Acquire) {
                return;
            }
            std::thread::park();
            quiet_since = Instant::now();
            continue;
        }
        if moved {
            quiet_since = Instant::now();
            continue;
        }
        // Nothing moved: spin a little, then give the core away between rounds, and once only
        // the GPU has been awaited for a millisecond (a long kernel), nap between looks at the
        // lanes' words.
        let quiet = quiet_since.elapsed();
        if t.active.is_empty() && quiet > Duration::from_millis(1) {
            std::thread::park_timeout(Duration::from_micros(50));
        } else if quiet > Duration::from_micros(50) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Does what `job` can do now; true if anything moved.
fn step(job: &mut Job, t: &mut Pending) -> bool {
    if !job.fired() {
        return false;
    }
    let mut moved = false;
    while job.next < job.works.len() {
        match &job.works[job.next] {
            Work::Start(x) => {
                x.start();
                if !x.state().done {
                    t.active.push(x.clone());
                }
            }
            Work::Finish { transfers, statuses, number } => {
                if !transfers.iter().all(|x| x.state().done) {
                    break;
                }
                let stream = &transfers[0].stream;
                if !stream.next_to_finish(*number) {
                    break;
                }
                finish(transfers, *statuses, *number, stream, t);
            }
            Work::Release { stream, number } => {
                if !stream.next_to_finish(*number) {
                    break;
                }
                release(stream, *number, "an enqueued operation");
            }
        }
        job.next += 1;
        moved = true;
    }
    moved
}

/// The transfers of a finishing job are done: statuses, device landings, the stream's word.
fn finish(transfers: &[Arc<Transfer>], statuses: Statuses, number: u32, stream: &Arc<Stream>, t: &mut Pending) {
    let abi = abi::get();
    let mut leases = Vec::new();
    for (i, x) in transfers.iter().enumerate() {
        let mut st = x.state();
        let target = match statuses {
            Statuses::Ignore => None,
            Statuses::One(s) => Some(s),
            // SAFETY: the program's array of statuses, one per request.
            Statuses::Array(s) => Some(unsafe { s.cast::<u8>().add(i * abi.status_size) }.cast()),
        };
        if let (Some(to), Some(s)) = (target.filter(|&s| !abi.is_status_ignore(s)), st.status) {
            // SAFETY: the program's status, of the library's size.
            unsafe { std::ptr::copy_nonoverlapping(s.0.as_ptr(), to.cast::<u8>(), abi.status_size) };
        }
        if let (Some((dst, _)), Some(lane)) = (x.device, stream.lane.as_ref()) {
            let n = x.arrived(&st);
            if let Err(e) = lane.to_device(dst, x.buf, n) {
                log::error(format_args!("{}: the copy of the {n} bytes received to the device failed: {} ({})", x.name, e.name(), e.call));
            }
        }
        leases.append(&mut st.leases);
        if let (Some(mut g), Some(p)) = (st.grequest.take(), real::pmpi()) {
            // SAFETY: the generalized request the transfer made, complete, freed once.
            unsafe { (p.request_free)((&mut g as *mut crate::mpi::abi::Handle).cast()) };
        }
    }
    release(stream, number, transfers[0].name);
    if !leases.is_empty() {
        t.landing.push(Landing { stream: stream.clone(), number, _leases: leases });
    }
}

/// Lets the program's stream go on past wait number `number`.
fn release(stream: &Stream, number: u32, name: &str) {
    if let Some(lane) = stream.lane.as_ref() {
        if let Err(e) = lane.signal(number) {
            // The program's stream waits for this word: without it, it would wait forever.
            log::error(format_args!("{name}: the stream cannot be released ({} in {}); it stays blocked", e.name(), e.call));
        }
    }
    stream.finished(number);
}

/// Waits until every job handed over has finished, then stops the thread (`MPI_Finalize`).
pub fn stop() {
    let Some(h) = HANDLE.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
    STOP.store(true, Ordering::Release);
    wake();
    let patience = Duration::from_secs(config::get().handshake_wait_s);
    let start = Instant::now();
    while !h.is_finished() {
        if start.elapsed() > patience {
            log::warn(format_args!("MPI_Finalize: enqueued operations still wait for their streams after {} s; they are abandoned", patience.as_secs()));
            ABANDON.store(true, Ordering::Release);
            wake();
            return;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let _ = h.join();
}
