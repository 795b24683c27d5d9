//! Counts the address-space mappings the CUDA driver creates.
//!
//! Plain host memory can only turn into device memory if its mapping goes away and the driver
//! maps a device range at the same address, and the driver creates its ranges with `mmap`,
//! `mmap64`, `mremap` or `syscall`, which libcuda imports from libc through its GOT. Pointing
//! those GOT entries at wrappers that bump [`generation`] before forwarding lets the shim
//! remember "this page is plain host memory" for as long as the generation is unchanged
//! (see `hostmem.rs`), instead of paying the driver's slow answer for unknown memory on every
//! call. The wrappers forward to whatever the GOT entry held before (another library's hook,
//! such as UCX's memory hooks, keeps working). Every lookup first checks that the wrappers are
//! still in place: if anyone has rewritten an entry since, mappings may have gone unseen, so
//! nothing is remembered from then on. If anything here cannot be done (unexpected ELF layout,
//! a GOT that cannot be made writable), nothing is remembered and every pointer is asked of the
//! driver as before.

use std::ffi::{c_char, c_int, c_long, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(1);
static WATCHING: AtomicBool = AtomicBool::new(false);

static REAL_MMAP: AtomicUsize = AtomicUsize::new(0);
static REAL_MMAP64: AtomicUsize = AtomicUsize::new(0);
static REAL_MREMAP: AtomicUsize = AtomicUsize::new(0);
static REAL_SYSCALL: AtomicUsize = AtomicUsize::new(0);

/// Bumped before every mapping libcuda creates. Only meaningful while [`watching`].
#[inline]
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// GOT entries holding our wrappers, checked by [`watching`].
const MAX_SLOTS: usize = 16;
static SLOTS: [AtomicUsize; MAX_SLOTS] = [const { AtomicUsize::new(0) }; MAX_SLOTS];
static SLOT_VALUES: [AtomicUsize; MAX_SLOTS] = [const { AtomicUsize::new(0) }; MAX_SLOTS];
static NSLOTS: AtomicUsize = AtomicUsize::new(0);

/// True while every mapping libcuda creates is counted: the wrappers are installed and still
/// in their GOT entries. Turns false for good the first time an entry was rewritten.
#[inline]
pub fn watching() -> bool {
    if !WATCHING.load(Ordering::Acquire) {
        return false;
    }
    for i in 0..NSLOTS.load(Ordering::Acquire) {
        let slot = SLOTS[i].load(Ordering::Relaxed) as *const usize;
        // SAFETY: a GOT entry of the loaded libcuda, which stays loaded (the driver holds it).
        if unsafe { std::ptr::read_volatile(slot) } != SLOT_VALUES[i].load(Ordering::Relaxed) {
            WATCHING.store(false, Ordering::Release);
            return false;
        }
    }
    true
}

fn bump() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

type MmapFn = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, i64) -> *mut c_void;
type MremapFn = unsafe extern "C" fn(*mut c_void, usize, usize, c_int, *mut c_void) -> *mut c_void;
type SyscallFn = unsafe extern "C" fn(c_long, c_long, c_long, c_long, c_long, c_long, c_long) -> c_long;

unsafe extern "C" fn watch_mmap(a: *mut c_void, l: usize, p: c_int, f: c_int, fd: c_int, o: i64) -> *mut c_void {
    bump();
    // SAFETY: REAL_MMAP holds what the GOT entry held (libc's mmap or another library's hook),
    // set before this wrapper was installed.
    unsafe { std::mem::transmute::<usize, MmapFn>(REAL_MMAP.load(Ordering::Acquire))(a, l, p, f, fd, o) }
}

unsafe extern "C" fn watch_mmap64(a: *mut c_void, l: usize, p: c_int, f: c_int, fd: c_int, o: i64) -> *mut c_void {
    bump();
    // SAFETY: as above, for mmap64.
    unsafe { std::mem::transmute::<usize, MmapFn>(REAL_MMAP64.load(Ordering::Acquire))(a, l, p, f, fd, o) }
}

/// mremap's fifth argument exists only with MREMAP_FIXED; forwarding it always is harmless.
unsafe extern "C" fn watch_mremap(a: *mut c_void, old: usize, new: usize, f: c_int, na: *mut c_void) -> *mut c_void {
    bump();
    // SAFETY: as above, for mremap.
    unsafe { std::mem::transmute::<usize, MremapFn>(REAL_MREMAP.load(Ordering::Acquire))(a, old, new, f, na) }
}

/// `syscall(n, ...)`: the six argument registers are forwarded whatever the call uses (the C
/// calling conventions of x86-64 and aarch64 pass variadic integers like fixed ones).
unsafe extern "C" fn watch_syscall(n: c_long, a: c_long, b: c_long, c: c_long, d: c_long, e: c_long, f: c_long) -> c_long {
    if n == libc::SYS_mmap || n == libc::SYS_mremap || n == libc::SYS_remap_file_pages || n == libc::SYS_shmat {
        bump();
    }
    // SAFETY: as above, for syscall.
    unsafe { std::mem::transmute::<usize, SyscallFn>(REAL_SYSCALL.load(Ordering::Acquire))(n, a, b, c, d, e, f) }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    }
}

/// The PT_GNU_RELRO range of the object loaded at `base`.
fn relro_range(base: usize) -> Option<(usize, usize)> {
    let mut found: (usize, Option<(usize, usize)>) = (base, None);
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        // SAFETY: glibc passes a valid dl_phdr_info; data is the tuple below.
        let (info, found) = unsafe { (&*info, &mut *(data as *mut (usize, Option<(usize, usize)>))) };
        if info.dlpi_addr as usize != found.0 {
            return 0;
        }
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        // The loader protects whole pages only: [start, end) rounded down at both ends.
        let mask = !(page_size() - 1);
        found.1 = phdrs.iter().find(|ph| ph.p_type == libc::PT_GNU_RELRO).map(|ph| {
            let lo = found.0 + ph.p_vaddr as usize;
            (lo & mask, (lo + ph.p_memsz as usize) & mask)
        });
        1
    }
    // SAFETY: the callback only reads what glibc passes and writes `found`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut found as *mut (usize, Option<(usize, usize)>)).cast()) };
    found.1
}

#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

#[repr(C)]
struct Rela {
    offset: u64,
    info: u64,
    addend: i64,
}

#[repr(C)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const c_char,
    l_ld: *const Dyn,
}

const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_JMPREL: i64 = 23;

/// Redirects libcuda's imports of the mapping functions. `lib` is the handle of the loaded
/// libcuda. Called once, when the driver is found.
pub fn watch(lib: *mut c_void) {
    if crate::base::config::get().no_host_cache {
        return;
    }
    // SAFETY: reads the loaded object's own dynamic section and relocation tables, which the
    // loader has already validated and relocated; GOT writes are to slots of those relocations.
    if unsafe { install(lib) } {
        WATCHING.store(true, Ordering::Release);
    }
}

unsafe fn install(lib: *mut c_void) -> bool {
    let wanted: [(&CStr, &AtomicUsize, usize); 4] = [
        (c"mmap", &REAL_MMAP, watch_mmap as *const () as usize),
        (c"mmap64", &REAL_MMAP64, watch_mmap64 as *const () as usize),
        (c"mremap", &REAL_MREMAP, watch_mremap as *const () as usize),
        (c"syscall", &REAL_SYSCALL, watch_syscall as *const () as usize),
    ];
    let mut map: *const LinkMap = std::ptr::null();
    // SAFETY: RTLD_DI_LINKMAP writes the object's link_map pointer.
    if unsafe { libc::dlinfo(lib, libc::RTLD_DI_LINKMAP, (&mut map as *mut *const LinkMap).cast()) } != 0 || map.is_null() {
        return false;
    }
    // SAFETY: a live link_map from the loader.
    let (base, mut d) = unsafe { ((*map).l_addr, (*map).l_ld) };
    // The loader has relocated these entries to addresses on x86-64 and aarch64; an entry still
    // below the load base is an offset.
    let addr = |v: u64| if (v as usize) < base { base + v as usize } else { v as usize };
    let (mut strtab, mut symtab, mut rela, mut relasz, mut jmprel, mut pltrelsz) = (0, 0, 0, 0, 0, 0);
    // SAFETY: the dynamic section is an array terminated by DT_NULL.
    unsafe {
        while (*d).tag != DT_NULL {
            match (*d).tag {
                DT_STRTAB => strtab = addr((*d).val),
                DT_SYMTAB => symtab = addr((*d).val),
                DT_RELA => rela = addr((*d).val),
                DT_RELASZ => relasz = (*d).val as usize,
                DT_JMPREL => jmprel = addr((*d).val),
                DT_PLTRELSZ => pltrelsz = (*d).val as usize,
                _ => {}
            }
            d = d.add(1);
        }
    }
    if strtab == 0 || symtab == 0 {
        return false;
    }
    let mut slots: Vec<(*mut usize, usize, &CStr)> = Vec::new();
    for (table, size) in [(jmprel, pltrelsz), (rela, relasz)] {
        if table == 0 {
            continue;
        }
        let n = size / std::mem::size_of::<Rela>();
        // SAFETY: the relocation table of the loaded object, n entries long.
        let relocs = unsafe { std::slice::from_raw_parts(table as *const Rela, n) };
        for r in relocs {
            let sym = (r.info >> 32) as usize;
            if sym == 0 {
                continue;
            }
            // SAFETY: sym indexes the object's symbol table; st_name indexes its string table.
            let name = unsafe { CStr::from_ptr((strtab + (*(symtab as *const Sym).add(sym)).name as usize) as *const c_char) };
            if let Some((w, _, hook)) = wanted.iter().find(|(w, _, _)| *w == name) {
                slots.push(((base + r.offset as usize) as *mut usize, *hook, *w));
            }
        }
    }
    if slots.is_empty() || slots.len() > MAX_SLOTS {
        return false;
    }
    // Forward to what each entry holds now: libc's function once the loader bound it, or a hook
    // another library installed. An entry still pointing into libcuda (a lazy-binding stub)
    // is bound to libc's definition instead, since calling the stub would rebind the entry.
    // SAFETY: dladdr only reads the loader's tables.
    let mut own: libc::Dl_info = unsafe { std::mem::zeroed() };
    unsafe { libc::dladdr((*map).l_ld.cast(), &mut own) };
    for (slot, hook, name) in &slots {
        // SAFETY: a GOT entry of the object.
        let current = unsafe { std::ptr::read_volatile(*slot) };
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only reads the loader's tables.
        let in_libcuda = unsafe { libc::dladdr(current as *const c_void, &mut info) } != 0 && info.dli_fbase == own.dli_fbase;
        let target = if current == 0 || in_libcuda {
            // SAFETY: looking up libc's definition by name.
            unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
        } else {
            current
        };
        let Some((_, real, _)) = wanted.iter().find(|(w, _, h)| w == name && h == hook) else { return false };
        if target == 0 {
            return false;
        }
        match real.load(Ordering::Acquire) {
            0 => real.store(target, Ordering::Release),
            // The same function imported through two entries (PLT and GLOB_DAT) must forward
            // to one place.
            t if t != target => return false,
            _ => {}
        }
    }
    let relro = relro_range(base);
    let page_size = page_size();
    for (i, (slot, hook, _)) in slots.iter().enumerate() {
        let at = *slot as usize;
        let protected = relro.is_some_and(|(lo, hi)| at >= lo && at < hi);
        // SAFETY: slot is a GOT entry of the object. Entries in the RELRO segment are read-only
        // after relocation: that one page is made writable for the store and read-only again.
        unsafe {
            let page = (at & !(page_size - 1)) as *mut c_void;
            if protected && libc::mprotect(page, page_size, libc::PROT_READ | libc::PROT_WRITE) != 0 {
                return false;
            }
            std::ptr::write_volatile(*slot, *hook);
            if protected {
                libc::mprotect(page, page_size, libc::PROT_READ);
            }
        }
        SLOTS[i].store(at, Ordering::Relaxed);
        SLOT_VALUES[i].store(*hook, Ordering::Relaxed);
        NSLOTS.store(i + 1, Ordering::Release);
    }
    true
}
