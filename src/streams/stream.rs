//! One `MPIX_Stream`: the CUDA stream it stands for, and the numbers of the waits queued on it.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::cuda::ordered::Lane;

/// One `MPIX_Stream`.
pub struct Stream {
    /// The CUDA stream it stands for; `None` for a stream without one (an info without a
    /// `cudaStream_t`), which enqueue calls refuse as MPICH does.
    pub lane: Option<Lane>,
    /// The last wait number issued on the lane; held while a number's work is queued, so that
    /// numbers reach the stream in order.
    pub issued: Mutex<u32>,
    /// The last number whose work finished (the progress thread's).
    pub done: AtomicU32,
    /// Communicators made over it that are not freed.
    pub comms: AtomicUsize,
}

impl Stream {
    pub fn issuing(&self) -> MutexGuard<'_, u32> {
        self.issued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `number` is the next to finish: the lane's waits are released in order.
    pub fn next_to_finish(&self, number: u32) -> bool {
        self.done.load(Ordering::Acquire).wrapping_add(1) == number
    }

    pub fn finished(&self, number: u32) {
        self.done.store(number, Ordering::Release);
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // The last reference may go in the progress thread, where freeing device memory, which
        // waits for the GPU, could wait for a program stream that waits for that very thread.
        if let Some(lane) = self.lane.take() {
            CLOSING.lock().unwrap_or_else(|e| e.into_inner()).push(lane);
        }
    }
}

/// Lanes of streams that are gone, closed by [`close_gone`] in the program's threads.
static CLOSING: Mutex<Vec<Lane>> = Mutex::new(Vec::new());

/// Closes the lanes of streams that are gone (`MPIX_Stream_create`, `MPIX_Stream_free`,
/// `MPI_Finalize`).
pub fn close_gone() {
    let gone = std::mem::take(&mut *CLOSING.lock().unwrap_or_else(|e| e.into_inner()));
    for lane in gone {
        lane.close();
    }
}
