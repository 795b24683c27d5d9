//! cudampi's own PTX modules (the pack kernel, the reduction kernels): each compiled once per
//! context on first use, for the first target the driver takes, and unloaded in
//! `MPI_Finalize`. A driver that refuses every target is said once, and the module is not
//! tried again: its callers then do the work another way.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::driver::{CUcontext, CuResult, Driver, Kernels, CUDA_SUCCESS};
use crate::base::log;

/// The targets tried in turn: the newest whose instructions the kernels use first.
const TARGETS: [&str; 2] = ["sm_75", "sm_52"];

/// One module: its PTX, its entry points and where it is loaded.
pub struct Module {
    /// The PTX for a target, NUL-terminated.
    ptx: fn(&str) -> String,
    /// Its entry points, NUL-terminated, in the order [`Module::function`] indexes them.
    entries: fn() -> Vec<String>,
    /// What a refusal means for the program, after "the GPU driver refused cudampi's ".
    refusal: &'static str,
    /// Per context: (context, module, its functions in `entries` order).
    loaded: Mutex<Vec<(usize, usize, Vec<usize>)>>,
    refused: AtomicBool,
}

impl Module {
    pub const fn new(ptx: fn(&str) -> String, entries: fn() -> Vec<String>, refusal: &'static str) -> Module {
        Module { ptx, entries, refusal, loaded: Mutex::new(Vec::new()), refused: AtomicBool::new(false) }
    }

    /// Whether a driver refused the PTX.
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// The current context and entry `index` in it, loaded on first use; `None` where no
    /// context is current or the driver refused the PTX.
    pub fn function(&self, d: &Driver, k: &Kernels, index: usize) -> Option<(usize, *mut c_void)> {
        if self.refused() {
            return None;
        }
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: an out-pointer.
        if unsafe { (d.ctx_get_current)(&mut ctx) } != CUDA_SUCCESS || ctx.is_null() {
            return None;
        }
        // Loading compiles the PTX, once per context: a few milliseconds, under the lock so
        // that two threads do not both pay it.
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, fs)) = loaded.iter().find(|m| m.0 == ctx as usize) {
            return fs.get(index).map(|&f| (ctx as usize, f as *mut c_void));
        }
        let mut last = CUDA_SUCCESS;
        for target in TARGETS {
            match self.load(k, target) {
                Ok((m, fs)) => {
                    let f = fs.get(index).map(|&f| (ctx as usize, f as *mut c_void));
                    loaded.push((ctx as usize, m, fs));
                    return f;
                }
                Err(code) => last = code,
            }
        }
        if !self.refused.swap(true, Ordering::Relaxed) {
            log::warn(format_args!("the GPU driver refused cudampi's {} ({})", self.refusal, d.error_name(last)));
        }
        None
    }

    /// Loads the module for `target` in the current context and looks up every entry point.
    fn load(&self, k: &Kernels, target: &str) -> Result<(usize, Vec<usize>), CuResult> {
        let image = (self.ptx)(target);
        let mut m = std::ptr::null_mut();
        // SAFETY: a NUL-terminated PTX image; an out-pointer.
        let rc = unsafe { (k.module_load_data)(&mut m, image.as_ptr().cast()) };
        if rc != CUDA_SUCCESS {
            return Err(rc);
        }
        let mut fs = Vec::new();
        for name in (self.entries)() {
            let mut f = std::ptr::null_mut();
            // SAFETY: the module just loaded; a NUL-terminated name.
            let rc = unsafe { (k.module_get_function)(&mut f, m, name.as_ptr().cast()) };
            if rc != CUDA_SUCCESS {
                // SAFETY: the module just loaded, of no use.
                unsafe { (k.module_unload)(m) };
                return Err(rc);
            }
            fs.push(f as usize);
        }
        Ok((m as usize, fs))
    }

    /// Unloads the module in every context it was loaded in (`MPI_Finalize`, after its last
    /// launch); a later launch loads it again. A context the program destroyed refuses the
    /// push, and the module went with it.
    pub fn release(&self, d: &Driver, k: &Kernels) {
        let loaded = std::mem::take(&mut *self.loaded.lock().unwrap_or_else(|e| e.into_inner()));
        for (ctx, m, _) in loaded {
            let mut popped: CUcontext = std::ptr::null_mut();
            // SAFETY: a context cudampi saw current; balanced push and pop; the module loaded there.
            unsafe {
                if (d.ctx_push_current)(ctx as CUcontext) == CUDA_SUCCESS {
                    (k.module_unload)(m as *mut c_void);
                    (d.ctx_pop_current)(&mut popped);
                }
            }
        }
    }
}
