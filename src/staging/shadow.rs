//! The public copy of a window over device memory.
//!
//! The MPI library cannot touch device memory, so a window created over it is given a host
//! buffer instead: the window's *public copy* in MPI's separate memory model, which the library
//! reads and writes for remote operations, while the device memory the program gave is the
//! *private copy*, which the program reads and writes. At the synchronisation points of the
//! separate model the two are brought together (`handlers/windows.rs` says where), by a merge
//! that knows which side changed each byte: a third buffer, the *snapshot*, holds what both
//! copies held after the last synchronisation.
//!
//! - [`Shadow::publish`] (private to public): the device bytes that differ from the snapshot
//!   were stored by the program since; they go to the public copy and the snapshot. No other
//!   byte of the public copy is written, so a remote update to other bytes, even one in flight,
//!   is never overwritten.
//! - [`Shadow::absorb`] (public to private): the public bytes that differ from the snapshot
//!   were written by remote operations since; they go to the snapshot and from there to the
//!   device. No other device byte is written, so the program's stores to other bytes stay.
//!
//! A byte that both sides changed between two synchronisations is a conflicting access, which
//! MPI makes erroneous; every other byte ends with the value of the side that changed it.
//!
//! It may use `cuda`, `mpi` (errors) and `base`, and the pool and copies of `staging`; the
//! window handlers use it.

use std::ffi::{c_int, c_void};

use crate::cuda::{Device, InContext};
use crate::mpi::abi::Handle;
use crate::mpi::errors;
use crate::staging::pool::{self, Lease};
use crate::staging::stage::Window;

pub struct Shadow {
    dev: Device,
    /// The program's device memory (the private copy), `len` bytes.
    device: *mut c_void,
    len: usize,
    /// The buffer the library is given as the window (the public copy).
    public: Lease,
    /// Both copies as of the last synchronisation.
    snapshot: Lease,
}

// SAFETY: device and host addresses usable from any thread; a shadow is used under its lock.
unsafe impl Send for Shadow {}

impl Shadow {
    /// A public copy of `len` bytes of device memory at `device`, filled from it. `Err` is the
    /// MPI error code, raised on `errh`.
    pub fn new(name: &'static str, errh: Option<Handle>, dev: Device, device: *mut c_void, len: usize) -> Result<Shadow, c_int> {
        let ctx = InContext::enter(&dev).map_err(|e| errors::cuda(name, errh, e, device, len, &dev))?;
        let public = pool::lease(len, &ctx).ok_or_else(|| errors::no_mem(name, errh, len))?;
        let snapshot = pool::lease(len, &ctx).ok_or_else(|| errors::no_mem(name, errh, len))?;
        drop(ctx);
        let s = Shadow { dev, device, len, public, snapshot };
        s.window(s.public.ptr(), s.public.is_pinned()).to_host(name, errh, 0, len)?;
        // SAFETY: both buffers hold len bytes.
        unsafe { std::ptr::copy_nonoverlapping(s.public.ptr().cast::<u8>(), s.snapshot.ptr().cast::<u8>(), len) };
        Ok(s)
    }

    /// What the library is given as the window's base.
    pub fn public(&self) -> *mut c_void {
        self.public.ptr()
    }

    /// The device memory the program gave.
    pub fn device(&self) -> *mut c_void {
        self.device
    }

    fn window(&self, host: *mut c_void, pinned: bool) -> Window {
        Window { dev: self.dev, user: self.device, host, len: self.len, pinned, packed: std::ptr::null_mut(), payload: false }
    }

    /// Makes the program's stores to device memory since the last synchronisation visible in
    /// the public copy (see the module comment).
    pub fn publish(&mut self, name: &'static str, errh: Option<Handle>) -> Result<(), c_int> {
        if self.len == 0 {
            return Ok(());
        }
        let ctx = InContext::enter(&self.dev).map_err(|e| errors::cuda(name, errh, e, self.device, self.len, &self.dev))?;
        let now = pool::lease(self.len, &ctx).ok_or_else(|| errors::no_mem(name, errh, self.len))?;
        drop(ctx);
        self.window(now.ptr(), now.is_pinned()).to_host(name, errh, 0, self.len)?;
        // SAFETY: both buffers hold len bytes.
        let runs = differences(unsafe { bytes(now.ptr(), self.len) }, unsafe { bytes(self.snapshot.ptr(), self.len) });
        let (from, public, snap) = (now.ptr().cast::<u8>(), self.public.ptr().cast::<u8>(), self.snapshot.ptr().cast::<u8>());
        for (at, len) in runs {
            // SAFETY: the run lies within all three buffers. The library may write the public
            // copy meanwhile (a remote update), but only at bytes the runs leave alone.
            unsafe {
                std::ptr::copy_nonoverlapping(from.add(at), public.add(at), len);
                std::ptr::copy_nonoverlapping(from.add(at), snap.add(at), len);
            }
        }
        Ok(())
    }

    /// Makes the remote updates of the public copy since the last synchronisation visible in
    /// device memory (see the module comment). `fresh`: [`Shadow::publish`] ran since the
    /// program last could store, so the device memory equals the snapshot.
    pub fn absorb(&mut self, name: &'static str, errh: Option<Handle>, fresh: bool) -> Result<(), c_int> {
        if self.len == 0 {
            return Ok(());
        }
        // SAFETY: both buffers hold len bytes. The library may still write the public copy (a
        // remote update of a later epoch): a byte it changes after this comparison differs
        // from the snapshot afterwards and comes with the next synchronisation.
        let runs = differences(unsafe { bytes(self.public.ptr(), self.len) }, unsafe { bytes(self.snapshot.ptr(), self.len) });
        let (Some(&(first, _)), Some(&(at, len))) = (runs.first(), runs.last()) else { return Ok(()) };
        let (public, snap) = (self.public.ptr().cast::<u8>(), self.snapshot.ptr().cast::<u8>());
        for &(at, len) in &runs {
            // SAFETY: within both buffers. The device gets the snapshot's bytes, so that the
            // two agree even if the public copy changes again meanwhile.
            unsafe { std::ptr::copy_nonoverlapping(public.add(at), snap.add(at), len) };
        }
        let span = [(first, at + len - first)];
        if runs.len() <= FEW_RUNS {
            return self.window(self.snapshot.ptr(), self.snapshot.is_pinned()).runs_to_device(name, errh, &runs);
        }
        // Many runs (an update rewrites values with some bytes unchanged, as floats' exponents
        // often are) go as one copy of the span that covers them, one copy per run being far
        // slower. The bytes between the runs must then be the device's own: the snapshot's when
        // the device equals it, else read from the device first.
        if fresh {
            return self.window(self.snapshot.ptr(), self.snapshot.is_pinned()).runs_to_device(name, errh, &span);
        }
        let ctx = InContext::enter(&self.dev).map_err(|e| errors::cuda(name, errh, e, self.device, self.len, &self.dev))?;
        let merged = pool::lease(self.len, &ctx).ok_or_else(|| errors::no_mem(name, errh, self.len))?;
        drop(ctx);
        let w = self.window(merged.ptr(), merged.is_pinned());
        w.to_host(name, errh, span[0].0, span[0].1)?;
        let to = merged.ptr().cast::<u8>();
        for &(at, len) in &runs {
            // SAFETY: within both buffers.
            unsafe { std::ptr::copy_nonoverlapping(snap.add(at), to.add(at), len) };
        }
        w.runs_to_device(name, errh, &span)
    }
}

/// Runs of changed bytes an absorb copies one by one; beyond, it copies the span covering them.
const FEW_RUNS: usize = 16;

/// `len` bytes at `p`.
///
/// # Safety
/// `p` holds `len` readable bytes for the lifetime the caller picks.
unsafe fn bytes<'a>(p: *mut c_void, len: usize) -> &'a [u8] {
    // SAFETY: per the caller.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
}

/// The byte runs `(offset, len)` where `a` and `b` differ, exactly, in order.
pub fn differences(a: &[u8], b: &[u8]) -> Vec<(usize, usize)> {
    // Blocks that agree are skipped with one comparison; only differing blocks are walked.
    const BLOCK: usize = 256;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let n = a.len().min(b.len());
    let mut block = 0;
    while block < n {
        let end = (block + BLOCK).min(n);
        if a[block..end] != b[block..end] {
            for i in block..end {
                if a[i] == b[i] {
                    continue;
                }
                match runs.last_mut() {
                    Some(last) if last.0 + last.1 == i => last.1 += 1,
                    _ => runs.push((i, 1)),
                }
            }
        }
        block = end;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::differences;

    #[test]
    fn exact_runs() {
        let a = vec![0u8; 1000];
        let mut b = a.clone();
        assert!(differences(&a, &b).is_empty());
        b[3] = 1;
        b[255] = 1;
        b[256] = 1;
        b[257] = 1;
        b[999] = 7;
        assert_eq!(differences(&a, &b), vec![(3, 1), (255, 3), (999, 1)]);
    }
}
