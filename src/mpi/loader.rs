//! How the MPI library is found in the process: made visible to global lookups when it was
//! loaded locally, and each of its functions looked up past cudampi's own definition of the
//! same name. cudampi's entry points are defined by the layer on top (`entry`); the address
//! this search must skip is handed down at start-up ([`start`]), so nothing here reaches up
//! for it.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// cudampi's own `PMPI_Init`, which the search for the library skips: 0 until handed down.
static OWN_PMPI_INIT: AtomicUsize = AtomicUsize::new(0);

/// Takes the address of cudampi's own `PMPI_Init`.
pub fn start(own_pmpi_init: usize) {
    OWN_PMPI_INIT.store(own_pmpi_init, Relaxed);
}

/// Makes the MPI library visible to `RTLD_NEXT` and `RTLD_DEFAULT` lookups when it was loaded
/// without `RTLD_GLOBAL`, as a Python extension module loads its libmpi: the loaded objects are
/// searched once for the one defining `PMPI_Init`, which is then opened again with
/// `RTLD_GLOBAL`. Called before any real function or family symbol is looked up.
pub fn make_mpi_global() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: dlsym with a NUL-terminated name.
        if !unsafe { libc::dlsym(libc::RTLD_NEXT, c"PMPI_Init".as_ptr()) }.is_null() {
            return;
        }
        let ours = OWN_PMPI_INIT.load(Relaxed);
        for name in loaded_objects() {
            // SAFETY: RTLD_NOLOAD only returns objects already loaded; dladdr reads loader data.
            unsafe {
                let h = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
                if h.is_null() {
                    continue;
                }
                let f = libc::dlsym(h, c"PMPI_Init".as_ptr());
                let mut info: libc::Dl_info = std::mem::zeroed();
                let found = !f.is_null() && f as usize != ours && libc::dladdr(f, &mut info) != 0 && !info.dli_fname.is_null();
                if found {
                    // Kept open: the library was loaded anyway, and now stays in the global scope.
                    libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL);
                }
                if found && crate::base::config::get().debug {
                    crate::base::log::debug(format_args!(
                        "the MPI library {} was loaded locally; made it global",
                        std::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy()
                    ));
                }
                libc::dlclose(h);
                if found {
                    return;
                }
            }
        }
    });
}

/// The file names of the loaded shared objects, collected first: dlopen must not run inside
/// `dl_iterate_phdr`, which holds the loader's lock.
fn loaded_objects() -> Vec<std::ffi::CString> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: libc::size_t, out: *mut c_void) -> c_int {
        // SAFETY: glibc passes a valid info; out is the Vec below.
        let name = unsafe { (*info).dlpi_name };
        if !name.is_null() && unsafe { *name } != 0 {
            let out = unsafe { &mut *out.cast::<Vec<std::ffi::CString>>() };
            out.push(unsafe { std::ffi::CStr::from_ptr(name) }.to_owned());
        }
        0
    }
    let mut out: Vec<std::ffi::CString> = Vec::new();
    // SAFETY: the callback only reads the headers and appends to `out`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut out as *mut Vec<std::ffi::CString>).cast()) };
    out
}

/// The next definition of `name` (ending in NUL) after cudampi: 0 where there is none, or
/// where it is `ours`, cudampi's own.
pub fn next(name: &str, ours: usize) -> usize {
    debug_assert!(name.ends_with('\0'));
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT searches the objects after this one.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    // Never hand back our own entry point: that would recurse forever.
    if f == ours { 0 } else { f }
}
