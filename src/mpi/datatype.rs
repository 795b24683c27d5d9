//! How many bytes a (buffer, count, datatype) triple spans, from the library's own answers.

use std::ffi::c_int;

use crate::mpi::abi::{self, Handle};
use crate::mpi::real;

/// The bytes `count` elements of a datatype touch, relative to the buffer address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Offset of the first byte touched (the true lower bound; may be negative).
    pub offset: i64,
    /// Bytes from the first to one past the last byte touched.
    pub len: usize,
    /// Whether the datatype is predefined: its elements are packed in order, so a message of
    /// n bytes fills exactly the first n bytes of the span and there are no gaps.
    pub named: bool,
}

/// What the shim needs to know of a datatype.
#[derive(Clone, Copy, Debug)]
pub struct TypeInfo {
    pub size: i64,
    pub extent: i64,
    pub true_lb: i64,
    pub true_extent: i64,
    pub named: bool,
    /// What `MPI_Type_get_envelope` answers: integers, addresses, datatypes, combiner.
    pub envelope: [c_int; 4],
}

/// Predefined datatypes this thread asked about. Their handles stay valid and never name
/// another type, so their answers are kept: four library calls per device buffer add up for
/// small messages.
const NAMED_SLOTS: usize = 8;
type NamedCache = ([(Handle, TypeInfo); NAMED_SLOTS], usize);
thread_local! {
    static NAMED: std::cell::RefCell<NamedCache> = const {
        std::cell::RefCell::new(([(0, TypeInfo { size: 0, extent: 0, true_lb: 0, true_extent: 0, named: false, envelope: [0; 4] }); NAMED_SLOTS], 0))
    };
}

/// Asks the library about a datatype (once per thread for a predefined one). An `Err` is
/// `MPI_ERR_TYPE`, not yet raised: the library refused the handle, and the caller's call gets
/// the class the library gives a bad datatype, raised on the caller's communicator.
pub fn query(datatype: Handle) -> Result<TypeInfo, c_int> {
    if let Some(t) = known(datatype) {
        return Ok(t);
    }
    let t = ask(datatype).map_err(|_| abi::get().err_type)?;
    if t.named {
        NAMED.with_borrow_mut(|(slots, next)| {
            slots[*next % NAMED_SLOTS] = (datatype, t);
            *next += 1;
        });
        shared::learn(datatype, t);
    }
    Ok(t)
}

/// The size of a datatype, asking MPI only once per thread for a predefined one (and once
/// for the size alone of a derived one, whose handle is remembered as such).
#[inline]
pub fn size(datatype: Handle) -> Option<i64> {
    if let Some(t) = known(datatype) {
        return Some(t.size);
    }
    if DERIVED.with_borrow(|(slots, _)| slots.contains(&datatype)) {
        let p = real::pmpi()?;
        let mut size = 0i64;
        // SAFETY: valid out-pointer; the caller's datatype.
        return (unsafe { (p.type_size_x)(datatype, &mut size) } == 0).then_some(size);
    }
    let t = query(datatype).ok()?;
    if !t.named {
        // A derived datatype's handle names a derived one even after it is freed and reused.
        DERIVED.with_borrow_mut(|(slots, next)| {
            slots[*next % NAMED_SLOTS] = datatype;
            *next += 1;
        });
    }
    Some(t.size)
}

/// [`size`], and whether the datatype is predefined without gaps or offset, so that `n` of its
/// bytes lie at the buffer's address as they would packed.
#[inline(always)]
pub fn size_packed(datatype: Handle) -> Option<(i64, bool)> {
    if let Some(found) = shared::size_packed(datatype) {
        return Some(found);
    }
    size_packed_learnt(datatype)
}

/// The size of a predefined datatype some thread has asked [`size_packed`] about, from loads
/// alone; `None` for any other.
#[inline(always)]
pub fn size_known(datatype: Handle) -> Option<i64> {
    shared::size_packed(datatype).map(|(size, _)| size)
}

/// [`size_packed`] of a datatype not in the shared table.
#[inline(never)]
fn size_packed_learnt(datatype: Handle) -> Option<(i64, bool)> {
    let packed = |t: TypeInfo| (t.size, t.packed());
    if let Some(t) = known(datatype) {
        return Some(packed(t));
    }
    let size = size(datatype)?;
    Some(known(datatype).map_or((size, false), packed))
}

/// What this thread learnt of a predefined datatype before.
#[inline]
fn known(datatype: Handle) -> Option<TypeInfo> {
    NAMED.with_borrow(|(slots, _)| slots.iter().find(|(h, t)| *h == datatype && t.named).map(|&(_, t)| t))
}

/// The size of each predefined datatype any thread asked about, and whether it is packed, for
/// every host receive of a process whose peers may send envelopes (`fastpath::may_land`): read
/// without the thread-local cache's lookup, which cost about as many instructions as the rest
/// of the watch's note of a receive. A slot is written once, its handle last, and never changes.
mod shared {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::{Acquire, Relaxed, Release}};

    use super::{Handle, TypeInfo};

    const SLOTS: usize = 8;

    /// `!handle` (so that 0 marks an empty slot: no handle has every bit set), then the size
    /// shifted left by one with the packed flag in the lowest bit.
    static KEYS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
    static VALUES: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
    static NEXT: AtomicUsize = AtomicUsize::new(0);

    #[inline(always)]
    pub fn size_packed(datatype: Handle) -> Option<(i64, bool)> {
        let key = !(datatype as u64);
        for (k, v) in KEYS.iter().zip(&VALUES) {
            match k.load(Acquire) {
                0 => return None,
                found if found == key => {
                    let v = v.load(Relaxed);
                    return Some(((v >> 1) as i64, v & 1 == 1));
                }
                _ => {}
            }
        }
        None
    }

    /// Keeps a predefined datatype's answer while slots are free; threads that learn the same
    /// type at once may each take a slot, which costs only the slot.
    pub fn learn(datatype: Handle, t: TypeInfo) {
        if t.size < 0 || size_packed(datatype).is_some() {
            return;
        }
        let i = NEXT.fetch_add(1, Relaxed);
        if i >= SLOTS {
            NEXT.store(SLOTS, Relaxed);
            return;
        }
        VALUES[i].store((t.size as u64) << 1 | t.packed() as u64, Relaxed);
        KEYS[i].store(!(datatype as u64), Release);
    }
}

thread_local! {
    static DERIVED: std::cell::RefCell<([Handle; NAMED_SLOTS], usize)> = const { std::cell::RefCell::new(([0; NAMED_SLOTS], 0)) };
}

/// `MPI_Type_get_envelope_c` (MPI-4), where the library has it.
type EnvelopeC = unsafe extern "C" fn(Handle, *mut i64, *mut i64, *mut i64, *mut i64, *mut c_int) -> c_int;

fn envelope_c() -> Option<EnvelopeC> {
    static F: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: a symbol name; the library's function of that C signature when found.
    let f = *F.get_or_init(|| unsafe { libc::dlsym(libc::RTLD_NEXT, c"PMPI_Type_get_envelope_c".as_ptr()) } as usize);
    // SAFETY: non-null: the library's MPI_Type_get_envelope_c.
    (f != 0).then(|| unsafe { std::mem::transmute::<usize, EnvelopeC>(f) })
}

/// What `MPI_Type_get_envelope` answers (integers, addresses, datatypes, combiner), and whether
/// the datatype was built with large counts. A library with `MPI_Type_get_envelope_c` is asked
/// through it: MPICH 5 refuses the `int` form for a datatype built with large counts, as an
/// error its default handler makes fatal, and its ROMIO builds such datatypes for the messages
/// of collective file access, which pass through cudampi's entry points.
pub fn envelope(datatype: Handle) -> Result<([c_int; 4], bool), c_int> {
    let p = real::pmpi().ok_or(abi::get().err_intern)?;
    let mut combiner = 0;
    if let Some(f) = envelope_c() {
        let (mut ints, mut addrs, mut large, mut types) = (0i64, 0i64, 0i64, 0i64);
        // SAFETY: valid out-pointers; the datatype handle as the caller gave it.
        check(unsafe { f(datatype, &mut ints, &mut addrs, &mut large, &mut types, &mut combiner) })?;
        let narrow = |n: i64| c_int::try_from(n).unwrap_or(c_int::MAX);
        return Ok(([narrow(ints), narrow(addrs), narrow(types), combiner], large != 0));
    }
    let (mut ints, mut addrs, mut types) = (0, 0, 0);
    // SAFETY: as above.
    check(unsafe { (p.type_get_envelope)(datatype, &mut ints, &mut addrs, &mut types, &mut combiner) })?;
    Ok(([ints, addrs, types, combiner], false))
}

fn ask(datatype: Handle) -> Result<TypeInfo, c_int> {
    let p = real::pmpi().ok_or(abi::get().err_intern)?;
    let (mut size, mut lb, mut extent, mut true_lb, mut true_extent) = (0i64, 0i64, 0i64, 0i64, 0i64);
    // SAFETY: valid out-pointers; the datatype handle is forwarded as the caller gave it.
    unsafe {
        check((p.type_size_x)(datatype, &mut size))?;
        check((p.type_get_extent_x)(datatype, &mut lb, &mut extent))?;
        check((p.type_get_true_extent_x)(datatype, &mut true_lb, &mut true_extent))?;
    }
    let ([ints, addrs, types, combiner], _) = envelope(datatype)?;
    let named = combiner == abi::get().combiner_named;
    Ok(TypeInfo { size, extent, true_lb, true_extent, named, envelope: [ints, addrs, types, combiner] })
}

impl TypeInfo {
    /// Without gaps or offset, so that `n` bytes of a predefined datatype's elements lie at the
    /// buffer's address as they would packed.
    pub fn packed(&self) -> bool {
        self.size == self.extent && self.true_lb == 0
    }

    /// The bytes `count` elements touch.
    pub fn span(&self, count: i64) -> Result<Span, c_int> {
        layout(count, self.size, self.extent, self.true_lb, self.true_extent, self.named).ok_or(abi::get().err_no_mem)
    }
}

/// Byte runs `(offset from the element's address, len)` that one element of a datatype
/// consists of, found by unpacking marked bytes with the library's own `MPI_Unpack`. An `Err`
/// is the library's code (an uncommitted datatype, say), not yet raised.
pub fn element_runs(datatype: Handle, t: &TypeInfo) -> Result<Vec<(i64, usize)>, c_int> {
    if t.named {
        return Ok(vec![(0, t.size as usize)]);
    }
    let abi = abi::get();
    let p = real::pmpi().ok_or(abi.err_intern)?;
    let (size, width) = match (c_int::try_from(t.size), usize::try_from(t.true_extent)) {
        (Ok(s), Ok(w)) => (s, w),
        _ => return Err(abi.err_no_mem),
    };
    let packed = vec![0xffu8; size as usize];
    let mut element = vec![0u8; width];
    let mut position: c_int = 0;
    let out = element.as_mut_ptr().wrapping_offset(-t.true_lb as isize);
    // SAFETY: unpacking one element writes only within its true extent, which `element` holds
    // at `out + true_lb`; `packed` holds one element's packed bytes.
    check(unsafe { (p.unpack)(packed.as_ptr().cast(), size, &mut position, out.cast(), 1, datatype, quiet::comm()?) })?;
    let mut runs: Vec<(i64, usize)> = Vec::new();
    let mut i = 0;
    while i < width {
        if element[i] == 0 {
            i += 1;
            continue;
        }
        let start = i;
        while i < width && element[i] != 0 {
            i += 1;
        }
        runs.push((t.true_lb + start as i64, i - start));
    }
    Ok(runs)
}

/// The communicator of the library calls cudampi makes on its own behalf.
pub mod quiet {
    use std::ffi::c_int;
    use std::sync::Mutex;

    use crate::mpi::abi::{self, Handle};
    use crate::mpi::real;

    static COMM: Mutex<Option<Handle>> = Mutex::new(None);

    /// A duplicate of `MPI_COMM_SELF` whose errors return. A call the program made must fail
    /// through the handler of the program's communicator only: `MPI_COMM_SELF`'s is fatal by
    /// default, and the program may have chosen `MPI_ERRORS_RETURN` elsewhere.
    pub fn comm() -> Result<Handle, c_int> {
        let abi = abi::get();
        let p = real::pmpi().ok_or(abi.err_intern)?;
        let mut held = COMM.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = *held {
            return Ok(c);
        }
        let mut c: Handle = 0;
        // SAFETY: MPI is initialised (a call the program made is in progress); valid out-pointer.
        let rc = unsafe { (p.comm_dup)(abi.comm_self, &mut c) };
        if rc != 0 {
            return Err(rc);
        }
        // SAFETY: the communicator just made and a predefined error handler.
        unsafe { (p.comm_set_errhandler)(c, abi.errors_return) };
        *held = Some(c);
        Ok(c)
    }

    /// Before the library's `MPI_Finalize`.
    pub fn release() {
        let mut held = COMM.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(mut c), Some(p)) = (held.take(), real::pmpi()) {
            // SAFETY: the communicator made by `comm`, no longer handed out.
            unsafe { (p.comm_free)(&mut c) };
        }
    }
}

/// Appends the runs of `count` elements placed from byte offset `base`.
pub fn push_runs(out: &mut Vec<(i64, usize)>, element: &[(i64, usize)], extent: i64, base: i64, count: i64) {
    for j in 0..count.max(0) {
        let at = base + j * extent;
        out.extend(element.iter().map(|&(o, l)| (at + o, l)));
    }
}

/// Sorts and merges runs, relative to `origin` (the span's first byte).
pub fn normalize(mut runs: Vec<(i64, usize)>, origin: i64) -> Vec<(usize, usize)> {
    runs.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(runs.len());
    for (at, len) in runs {
        let at = (at - origin) as usize;
        match out.last_mut() {
            Some(last) if at <= last.0 + last.1 => last.1 = last.1.max(at + len - last.0),
            _ => out.push((at, len)),
        }
    }
    out
}

/// The smallest span covering byte ranges `(offset, len)` relative to one buffer, and whether
/// the ranges cover it without gaps. `None` for no non-empty range.
pub fn union(ranges: &mut [(i64, usize)]) -> Option<(i64, usize, bool)> {
    ranges.sort_unstable();
    let mut it = ranges.iter().filter(|r| r.1 > 0);
    let &(lo, len) = it.next()?;
    let mut hi = lo + len as i64;
    let mut gapless = true;
    for &(at, len) in it {
        gapless &= at <= hi;
        hi = hi.max(at + len as i64);
    }
    Some((lo, (hi - lo) as usize, gapless))
}

fn check(rc: c_int) -> Result<(), c_int> {
    if rc == 0 {
        Ok(())
    } else {
        Err(rc)
    }
}

/// Element i occupies [true_lb + i*extent, true_lb + i*extent + true_extent); extents may be
/// negative. `None` when the span does not fit the address space.
pub fn layout(count: i64, size: i64, extent: i64, true_lb: i64, true_extent: i64, named: bool) -> Option<Span> {
    if count <= 0 || size <= 0 {
        return Some(Span { offset: 0, len: 0, named });
    }
    let last_start = true_lb.checked_add((count - 1).checked_mul(extent)?)?;
    let lo = true_lb.min(last_start);
    let hi = true_lb.max(last_start).checked_add(true_extent)?;
    let len = usize::try_from(hi.checked_sub(lo)?).ok()?;
    Some(Span { offset: lo, len, named })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous() {
        assert_eq!(layout(10, 4, 4, 0, 4, true), Some(Span { offset: 0, len: 40, named: true }));
    }

    #[test]
    fn vector_with_gaps() {
        // 3 blocks of 2 ints, stride 4 ints: extent 40 bytes, true extent 40 - 8 = 32... per element.
        // One element: blocks at 0, 16, 32 of 8 bytes -> true extent 40, extent 40.
        let s = layout(2, 24, 40, 0, 40, false).unwrap();
        assert_eq!((s.offset, s.len), (0, 80));
    }

    #[test]
    fn negative_lower_bound_and_resized() {
        // true_lb -8, true extent 16, extent 32 (resized): elements at -8, 24, 56.
        let s = layout(3, 16, 32, -8, 16, false).unwrap();
        assert_eq!((s.offset, s.len), (-8, 80));
    }

    #[test]
    fn negative_extent() {
        // elements walk downwards: starts at 0, -16, -32; each 8 bytes.
        let s = layout(3, 8, -16, 0, 8, false).unwrap();
        assert_eq!((s.offset, s.len), (-32, 40));
    }

    #[test]
    fn runs_merge_and_expand() {
        let mut r = Vec::new();
        // A column: one 8-byte block per element, elements 32 bytes apart, from offset 8.
        push_runs(&mut r, &[(0, 8)], 32, 8, 3);
        assert_eq!(normalize(r, 8), vec![(0, 8), (32, 8), (64, 8)]);
        let mut r = Vec::new();
        push_runs(&mut r, &[(0, 4), (4, 4)], 8, 0, 2);
        assert_eq!(normalize(r, 0), vec![(0, 16)]);
    }

    #[test]
    fn unions() {
        assert_eq!(union(&mut [(8, 8), (0, 8)]), Some((0, 16, true)));
        assert_eq!(union(&mut [(0, 4), (12, 4), (4, 0)]), Some((0, 16, false)));
        assert_eq!(union(&mut [(-8, 4), (-4, 4)]), Some((-8, 8, true)));
        assert_eq!(union(&mut [(0, 0)]), None);
    }

    #[test]
    fn empty_and_overflow() {
        assert_eq!(layout(0, 4, 4, 0, 4, true).unwrap().len, 0);
        assert_eq!(layout(5, 0, 0, 0, 0, false).unwrap().len, 0);
        assert_eq!(layout(i64::MAX, 1 << 30, 1 << 30, 0, 1 << 30, false), None);
    }
}
