//! A derived datatype's typemap as strided blocks (`cuda::Strided`): contiguous runs, rows of
//! runs, planes of rows, and whatever is irregular as a list of them, in the order MPI packs
//! the bytes. Staging (`staging::stage`) copies a device buffer's payload along these blocks,
//! one pitched copy per block, so that a column of a matrix crosses as its bytes and not as
//! the span of the matrix.
//!
//! A datatype is analysed once, from the library's own account of how it was built
//! (`MPI_Type_get_envelope` and `MPI_Type_get_contents`, recursively), and kept until the
//! program frees it (`forget`, from `MPI_Type_free`). MPI hands a freed handle out again, and
//! may free types inside its own calls, so an entry is used only while the handle still
//! answers the same size, extents and envelope as when it was analysed. A datatype that
//! cannot be described in at most `MAX_BLOCKS` blocks (or that `MPI_Type_create_darray`
//! built, or whose blocks overlap) has no form: the caller stages its span as before.
//!
//! A datatype whose every element is of one predefined type (the column of doubles, a face
//! of a cube of floats) also has a *base*: its payload, packed, is `size / size(base)`
//! elements of the base type, a type signature MPI matches against the datatype's own, so a
//! staged device buffer can go to MPI packed and contiguous (`staging::stage`), and the
//! library never packs the gaps on the host.
//!
//! Uses the library's `PMPI_` functions (`real`) and `cuda::Strided`; called by
//! `staging::stage` and by the `MPI_Type_free` handler.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{Arc, Mutex};

use crate::cuda::Strided;
use crate::mpi::abi::{self, Family, Handle};
use crate::mpi::datatype::{self, TypeInfo};
use crate::mpi::real;

/// Most blocks one element's, or one message's, form holds; beyond it a datatype is staged
/// by its span. The pack kernel copies any number in one launch; without it a staged send
/// of more than a few thousand blocks (one driver call each, ~2-5 us) copies its span
/// instead (`staging::stage`).
pub const MAX_BLOCKS: usize = 1 << 16;
/// Most blocks a repetition may look at while it merges them (a bound on analysis time).
const MAX_WORK: usize = 1 << 20;
/// Nesting depth analysed; deeper types are staged by their span.
const MAX_DEPTH: usize = 16;

/// One element's blocks, offsets from the element's address, in packing order.
pub type Form = Arc<[Strided]>;

/// What an entry was analysed for: a reused handle naming another datatype answers differently.
type Key = (i64, i64, i64, i64, [c_int; 4]);

fn key(t: &TypeInfo) -> Key {
    (t.size, t.extent, t.true_lb, t.true_extent, t.envelope)
}

/// What is known of a datatype.
#[derive(Clone, Default)]
pub struct Analysis {
    /// One element's blocks (`None`: no form, stage the span).
    pub form: Option<Form>,
    /// The one predefined type every element consists of, contiguous (size = extent, lower
    /// bound 0), and its size; `None` when the type mixes types or a base has gaps, or when
    /// the datatype is not committed (the library must see it, to refuse it).
    pub base: Option<(Handle, i64)>,
}

/// Per handle: what it was analysed for, what was found, and whether it was committed.
type Entries = HashMap<Handle, (Key, Analysis, bool)>;

/// Messages of a datatype's form made lately, per handle: ((count, origin, len), the element's
/// form they were made of, the message's form). A program sends the same message again and
/// again; giving it the same form spares a pass over its blocks per call, and lets the pack
/// kernel keep its table (`cuda::pack`).
type Messages = HashMap<Handle, Vec<((i64, i64, usize), Form, Form)>>;
static MESSAGES: Mutex<Option<Messages>> = Mutex::new(None);
/// Messages kept per datatype.
const KEPT_MESSAGES: usize = 4;

static CACHE: Mutex<Option<Entries>> = Mutex::new(None);

/// A derived datatype's analysis, from the cache or made now.
pub fn analysis(datatype: Handle, t: &TypeInfo) -> Analysis {
    let h = abi::get().key(datatype);
    let k = key(t);
    if let Some(Some((seen, a, committed))) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|m| m.get(&h)) {
        if *seen == k && *committed {
            return a.clone();
        }
    }
    let form: Option<Form> = flatten(datatype, 0).filter(|f| f.len() <= MAX_BLOCKS && bytes(f) as i64 == t.size).map(Into::into);
    let base = form.as_ref().and_then(|_| base(datatype, 0)).filter(|&(_, size)| size > 0 && t.size % size == 0);
    // A commit is for good, until the handle is freed (`forget`): only an uncommitted type is
    // asked about again.
    let committed = committed(datatype);
    let a = Analysis { form, base: base.filter(|_| committed) };
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert(h, (k, a.clone(), committed));
    a
}

/// Whether the library takes `dt` for communication: a send of one element to
/// `MPI_PROC_NULL`, which transfers nothing, on a communicator whose errors return.
pub fn committed(dt: Handle) -> bool {
    static BYTE: u64 = 0;
    let (Some(p), Ok(comm)) = (real::pmpi(), datatype::quiet::comm()) else { return false };
    // SAFETY: a send to MPI_PROC_NULL reads nothing; the buffer is a readable address.
    unsafe { (p.send)(std::ptr::addr_of!(BYTE).cast(), 1, dt, abi::get().proc_null, 0, comm) == 0 }
}

/// One element's form (see [`analysis`]).
pub fn element(datatype: Handle, t: &TypeInfo) -> Option<Form> {
    analysis(datatype, t).form
}

/// Drops what is known of a datatype the program frees.
pub fn forget(datatype: Handle) {
    let h = abi::get().key(datatype);
    if let Some(m) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        m.remove(&h);
    }
    if let Some(m) = MESSAGES.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        m.remove(&h);
    }
}

/// Before the library's `MPI_Finalize`: every handle is gone after it.
pub fn clear() {
    *CACHE.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *MESSAGES.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// [`message`] of `datatype`'s form `element` (its [`analysis`]), the same form again for the
/// same count, origin and span as one of the last few calls.
pub fn message_of(datatype: Handle, element: &Form, count: i64, extent: i64, origin: i64, len: usize) -> Option<Form> {
    let h = abi::get().key(datatype);
    let k = (count, origin, len);
    {
        let mut messages = MESSAGES.lock().unwrap_or_else(|e| e.into_inner());
        let recent = messages.get_or_insert_with(HashMap::new).entry(h).or_default();
        // Made of the same element form: the handle still names the datatype it did then.
        if let Some((_, _, m)) = recent.iter().find(|(key, e, _)| *key == k && Arc::ptr_eq(e, element)) {
            return Some(m.clone());
        }
    }
    let form: Form = message(element, count, extent, origin, len)?.into();
    let mut messages = MESSAGES.lock().unwrap_or_else(|e| e.into_inner());
    let recent = messages.get_or_insert_with(HashMap::new).entry(h).or_default();
    if recent.len() >= KEPT_MESSAGES {
        recent.remove(0);
    }
    recent.push((k, element.clone(), form.clone()));
    Some(form)
}

/// The blocks of `count` elements `extent` apart, offsets from `origin` (the span's first
/// byte), all within `[0, len)`; `None` when they are more than `MAX_BLOCKS` or leave the span.
pub fn message(element: &[Strided], count: i64, extent: i64, origin: i64, len: usize) -> Option<Vec<Strided>> {
    let n = usize::try_from(count).ok()?;
    let mut out = repeat(element, n, extent)?;
    if out.len() > MAX_BLOCKS {
        return None;
    }
    for b in out.iter_mut() {
        b.at -= origin;
        let a = b.ascending();
        let end = a.at + (a.planes as i64 - 1) * a.plane_pitch + (a.rows as i64 - 1) * a.pitch + a.len as i64;
        if a.at < 0 || end > len as i64 {
            return None;
        }
    }
    Some(out)
}

/// The first `bytes` bytes of the packed message, as blocks: what a receive that got that
/// many bytes wrote; the same form when they are all of it.
pub fn prefix(blocks: &Form, mut bytes: usize) -> Form {
    if bytes >= crate::cuda::strided::summary(blocks).bytes {
        return blocks.clone();
    }
    let mut out = Vec::new();
    for b in blocks.iter() {
        if bytes == 0 {
            break;
        }
        if b.bytes() <= bytes {
            out.push(simplify(*b));
            bytes -= b.bytes();
            continue;
        }
        let plane = b.len * b.rows;
        let planes = bytes / plane;
        if planes > 0 {
            out.push(simplify(Strided { planes, ..*b }));
        }
        let base = b.at + planes as i64 * b.plane_pitch;
        let rest = bytes - planes * plane;
        let rows = rest / b.len;
        if rows > 0 {
            out.push(simplify(Strided { at: base, rows, planes: 1, plane_pitch: 0, ..*b }));
        }
        if rest > rows * b.len {
            out.push(Strided::run(base + rows as i64 * b.pitch, rest - rows * b.len));
        }
        break;
    }
    out.into()
}

/// [`copies`] of a shared form, the same blocks again for the same form (so that the pack
/// kernel keeps its table of them: `cuda::strided::Derived`).
pub fn copies_of(form: &Form) -> Form {
    static COPIES: crate::cuda::strided::Derived<Form> = crate::cuda::strided::Derived::new();
    COPIES.get(form, |b| copies(b).into())
}

/// The same bytes as `blocks`, in whatever order takes the fewest driver calls: first byte
/// lowest, and planes that interleave (or are not a whole number of rows apart) exchanged with
/// the rows where that makes one pitched copy of what would be one per plane.
pub fn copies(blocks: &[Strided]) -> Vec<Strided> {
    blocks
        .iter()
        .map(|b| {
            let a = simplify(b.ascending());
            if a.calls() <= 1 {
                return a;
            }
            let t = simplify(Strided { rows: a.planes, pitch: a.plane_pitch, planes: a.rows, plane_pitch: a.pitch, ..a }.ascending());
            if (t.rows <= 1 || t.pitch >= t.len as i64) && t.calls() < a.calls() {
                t
            } else {
                a
            }
        })
        .collect()
}

/// Payload bytes of blocks.
pub fn bytes(blocks: &[Strided]) -> usize {
    blocks.iter().map(Strided::bytes).sum()
}

/// Byte runs `(offset, len)` of blocks, in packing order, at most `max` of them (`None` past it).
pub fn runs(blocks: &[Strided], max: usize) -> Option<Vec<(i64, usize)>> {
    let total: usize = blocks.iter().map(|b| b.rows * b.planes).sum();
    if total > max {
        return None;
    }
    let mut out = Vec::with_capacity(total);
    for b in blocks {
        for k in 0..b.planes {
            for r in 0..b.rows {
                out.push((b.at + k as i64 * b.plane_pitch + r as i64 * b.pitch, b.len));
            }
        }
    }
    Some(out)
}

/// The family's combiner, by the MPI standard's name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Combiner {
    Named,
    Dup,
    Contiguous,
    Vector,
    Hvector,
    Indexed,
    Hindexed,
    IndexedBlock,
    HindexedBlock,
    Struct,
    Subarray,
    Resized,
    /// Darray, the F90 types, the deprecated integer forms, value-index pairs: not analysed.
    Other,
}

fn combiner(c: c_int) -> Combiner {
    use Combiner::*;
    match abi::get().family {
        // Open MPI numbers them from 0, the MPICH family from 1, in the same order (with the
        // MPI-1 integer forms in between).
        Family::OpenMpi | Family::Mpich => {
            let first = if abi::get().family == Family::OpenMpi { 0 } else { 1 };
            match c - first {
                0 => Named,
                1 => Dup,
                2 => Contiguous,
                3 => Vector,
                5 => Hvector,
                6 => Indexed,
                8 => Hindexed,
                9 => IndexedBlock,
                11 => Struct,
                12 => Subarray,
                17 => Resized,
                18 => HindexedBlock,
                _ => Other,
            }
        }
        // `mpi_abi.h`.
        Family::StandardAbi => match c {
            101 => Named,
            102 => Dup,
            103 => Contiguous,
            104 => Vector,
            105 => Hvector,
            106 => Indexed,
            107 => Hindexed,
            108 => IndexedBlock,
            109 => HindexedBlock,
            110 => Struct,
            111 => Subarray,
            116 => Resized,
            _ => Other,
        },
    }
}

/// `MPI_ORDER_C` of the family.
fn order_c() -> c_int {
    match abi::get().family {
        Family::OpenMpi => 0,
        Family::Mpich => 56,
        Family::StandardAbi => 0xC,
    }
}

/// What `MPI_Type_get_contents` returned, with the derived datatypes it handed out freed
/// when dropped (the library counts them as references the caller holds).
struct Contents {
    ints: Vec<c_int>,
    addrs: Vec<i64>,
    types: Vec<Handle>,
    derived: Vec<Handle>,
}

impl Drop for Contents {
    fn drop(&mut self) {
        let Some(p) = real::pmpi() else { return };
        for &t in &self.derived {
            let mut t = t;
            // SAFETY: a derived datatype handle the library handed out for this caller.
            unsafe { (p.type_free)(&mut t) };
        }
    }
}

/// How a datatype was built: its combiner and how many integers, addresses and datatypes
/// `MPI_Type_get_contents` gives; `None` past `MAX_DEPTH` or when the library refuses.
fn envelope(dt: Handle, depth: usize) -> Option<(Combiner, c_int, c_int, c_int)> {
    if depth > MAX_DEPTH {
        return None;
    }
    // A datatype of large counts has no `int` contents: it is staged by its span.
    let ([ni, na, nt, c], large) = datatype::envelope(dt).ok()?;
    if large {
        return None;
    }
    Some((combiner(c), ni, na, nt))
}

/// A predefined datatype's size and true lower bound and extent.
fn named_layout(dt: Handle) -> Option<(i64, i64, i64)> {
    let p = real::pmpi()?;
    let (mut size, mut lb, mut extent) = (0i64, 0i64, 0i64);
    // SAFETY: valid out-pointers.
    unsafe {
        if (p.type_size_x)(dt, &mut size) != 0 || (p.type_get_true_extent_x)(dt, &mut lb, &mut extent) != 0 {
            return None;
        }
    }
    Some((size, lb, extent))
}

/// One datatype's blocks, offsets from its address, in packing order.
fn flatten(dt: Handle, depth: usize) -> Option<Vec<Strided>> {
    let (kind, ni, na, nt) = envelope(dt, depth)?;
    if kind == Combiner::Named {
        let (size, lb, extent) = named_layout(dt)?;
        // A predefined pair type with padding inside (MPI_SHORT_INT) is not one run.
        return (size == extent).then(|| if size > 0 { vec![Strided::run(lb, size as usize)] } else { Vec::new() });
    }
    if kind == Combiner::Other {
        return None;
    }
    let p = real::pmpi()?;
    let contents = contents(dt, ni, na, nt)?;
    let (ints, addrs, types) = (&contents.ints, &contents.addrs, &contents.types);
    let int = |i: usize| ints.get(i).copied();
    let addr = |i: usize| addrs.get(i).copied();
    // The inner datatype's blocks and extent.
    let inner = |t: Handle| -> Option<(Vec<Strided>, i64)> {
        let f = flatten(t, depth + 1)?;
        let (mut lb, mut extent) = (0i64, 0i64);
        // SAFETY: valid out-pointers.
        (unsafe { (p.type_get_extent_x)(t, &mut lb, &mut extent) } == 0).then_some((f, extent))
    };
    let count = |v: c_int| usize::try_from(v).ok();
    match kind {
        Combiner::Dup | Combiner::Resized => Some(inner(*types.first()?)?.0),
        Combiner::Contiguous => {
            let (f, e) = inner(*types.first()?)?;
            repeat(&f, count(int(0)?)?, e)
        }
        Combiner::Vector | Combiner::Hvector => {
            let (f, e) = inner(*types.first()?)?;
            let stride = if kind == Combiner::Vector { (int(2)? as i64).checked_mul(e)? } else { addr(0)? };
            let block = repeat(&f, count(int(1)?)?, e)?;
            repeat(&block, count(int(0)?)?, stride)
        }
        Combiner::Indexed | Combiner::Hindexed | Combiner::IndexedBlock | Combiner::HindexedBlock | Combiner::Struct => {
            let n = count(int(0)?)?;
            let mut out = Vec::new();
            let mut last: Option<(Handle, Vec<Strided>, i64)> = None;
            for i in 0..n {
                let t = if kind == Combiner::Struct { *types.get(i)? } else { *types.first()? };
                if !matches!(&last, Some((h, _, _)) if *h == t) {
                    let (f, e) = inner(t)?;
                    last = Some((t, f, e));
                }
                let (_, f, e) = last.as_ref()?;
                let blocklen = match kind {
                    Combiner::IndexedBlock | Combiner::HindexedBlock => int(1)?,
                    _ => int(1 + i)?,
                };
                let displ = match kind {
                    Combiner::Indexed => (int(1 + n + i)? as i64).checked_mul(*e)?,
                    Combiner::IndexedBlock => (int(2 + i)? as i64).checked_mul(*e)?,
                    _ => addr(i)?,
                };
                for b in repeat(f, count(blocklen)?, *e)? {
                    push(&mut out, Strided { at: b.at.checked_add(displ)?, ..b })?;
                }
            }
            Some(out)
        }
        Combiner::Subarray => {
            let nd = count(int(0)?)?;
            let (sizes, subsizes, starts) = (&ints.get(1..1 + nd)?, &ints.get(1 + nd..1 + 2 * nd)?, &ints.get(1 + 2 * nd..1 + 3 * nd)?);
            let order = int(1 + 3 * nd)?;
            let (f, e) = inner(*types.first()?)?;
            // Dimensions from the fastest-varying one: the last in C order, the first in Fortran's.
            let dims: Vec<usize> = if order == order_c() { (0..nd).rev().collect() } else { (0..nd).collect() };
            let mut out = f;
            let mut stride = e;
            for d in dims {
                let placed: Vec<Strided> = repeat(&out, count(subsizes[d])?, stride)?;
                let shift = (starts[d] as i64).checked_mul(stride)?;
                out = placed.into_iter().map(|b| Strided { at: b.at + shift, ..b }).collect();
                stride = stride.checked_mul(sizes[d] as i64)?;
            }
            Some(out)
        }
        _ => None,
    }
}

/// The predefined type every basic element of `dt` is, with its size, if there is one and it
/// is contiguous (`MPI_DOUBLE_INT` is not: a message of n of them packed is not n of them
/// side by side).
fn base(dt: Handle, depth: usize) -> Option<(Handle, i64)> {
    let (kind, ni, na, nt) = envelope(dt, depth)?;
    match kind {
        Combiner::Named => {
            let (size, lb, extent) = named_layout(dt)?;
            (size > 0 && lb == 0 && extent == size).then_some((dt, size))
        }
        Combiner::Other => None,
        _ => {
            let contents = contents(dt, ni, na, nt)?;
            let abi = abi::get();
            let mut found: Option<(Handle, i64)> = None;
            for &t in &contents.types {
                let b = base(t, depth + 1)?;
                match found {
                    Some(f) if !abi.same(f.0, b.0) => return None,
                    _ => found = Some(b),
                }
            }
            found
        }
    }
}

fn contents(dt: Handle, ni: c_int, na: c_int, nt: c_int) -> Option<Contents> {
    let p = real::pmpi()?;
    let abi = abi::get();
    let mut ints = vec![0 as c_int; ni.max(0) as usize];
    let mut addrs = vec![0i64; na.max(0) as usize];
    // Handles are as wide as the family's (4 bytes in MPICH's), which 8 bytes hold either way.
    let mut raw = vec![0usize; nt.max(0) as usize];
    // SAFETY: arrays of the sizes the envelope gave.
    let rc = unsafe { (p.type_get_contents)(dt, ni, na, nt, ints.as_mut_ptr(), addrs.as_mut_ptr(), raw.as_mut_ptr().cast()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: `raw` holds nt handles of the family's width.
    let types: Vec<Handle> = (0..raw.len()).map(|i| unsafe { abi.request_at(raw.as_ptr().cast(), i) }).collect();
    let mut derived = Vec::new();
    for &t in &types {
        if datatype::envelope(t).is_ok_and(|(e, _)| combiner(e[3]) != Combiner::Named) {
            derived.push(t);
        }
    }
    Some(Contents { ints, addrs, types, derived })
}

/// `n` copies of `f`, `stride` bytes apart.
fn repeat(f: &[Strided], n: usize, stride: i64) -> Option<Vec<Strided>> {
    let mut out = Vec::new();
    if n == 0 || f.is_empty() {
        return Some(out);
    }
    if let [b] = f {
        let b = simplify(*b);
        if b.planes == 1 {
            let r = if b.rows == 1 {
                Strided { rows: n, pitch: stride, ..b }
            } else {
                Strided { planes: n, plane_pitch: stride, ..b }
            };
            push(&mut out, r)?;
            return Some(out);
        }
    }
    if n.saturating_mul(f.len()) > MAX_WORK {
        return None;
    }
    for j in 0..n as i64 {
        let shift = j.checked_mul(stride)?;
        for b in f {
            push(&mut out, Strided { at: b.at.checked_add(shift)?, ..*b })?;
        }
    }
    Some(out)
}

/// The same block in its fewest dimensions: rows that touch are one run, planes that follow
/// on from each other's rows are more rows.
fn simplify(mut b: Strided) -> Strided {
    loop {
        if b.rows == 1 && b.planes > 1 {
            (b.rows, b.pitch, b.planes, b.plane_pitch) = (b.planes, b.plane_pitch, 1, 0);
        } else if b.rows > 1 && b.pitch == b.len as i64 {
            (b.len, b.rows, b.pitch) = (b.len * b.rows, 1, 0);
        } else if b.rows > 1 && b.planes > 1 && b.plane_pitch == b.rows as i64 * b.pitch {
            (b.rows, b.planes, b.plane_pitch) = (b.rows * b.planes, 1, 0);
        } else {
            break;
        }
    }
    if b.rows == 1 {
        b.pitch = 0;
    }
    if b.planes == 1 {
        b.plane_pitch = 0;
    }
    b
}

/// Appends a block, merged into the last one where the packing order allows. `None` when the
/// form grows past `MAX_BLOCKS` or a block's own bytes overlap (a receive into them is
/// erroneous, and a copy of them cannot be one pitched copy).
fn push(out: &mut Vec<Strided>, b: Strided) -> Option<()> {
    if b.bytes() == 0 {
        return Some(());
    }
    let b = simplify(b);
    if b.rows > 1 && b.pitch.unsigned_abs() < b.len as u64 {
        return None;
    }
    if let Some(last) = out.last_mut() {
        if let Some(merged) = merge(*last, b) {
            *last = simplify(merged);
            // A block just completed may continue the one before it (the fourth row of a
            // plane whose predecessor has four).
            while let [.., a, b] = out[..] {
                let Some(m) = merge(a, b) else { break };
                out.pop();
                *out.last_mut()? = simplify(m);
            }
            return Some(());
        }
    }
    if out.len() >= MAX_BLOCKS {
        return None;
    }
    out.push(b);
    Some(())
}

/// `a` followed by `b` as one block, where that keeps the packing order. Planes may interleave
/// (columns one element apart): [`copies`] then turns them into rows.
fn merge(a: Strided, b: Strided) -> Option<Strided> {
    let single = |s: &Strided| s.rows == 1 && s.planes == 1;
    if single(&a) && single(&b) {
        if b.at == a.at + a.len as i64 {
            return Some(Strided { len: a.len + b.len, ..a });
        }
        let pitch = b.at - a.at;
        return (b.len == a.len && pitch.unsigned_abs() >= a.len as u64).then_some(Strided { rows: 2, pitch, ..a });
    }
    if a.planes == 1 && single(&b) && b.len == a.len && b.at == a.at + a.rows as i64 * a.pitch {
        return Some(Strided { rows: a.rows + 1, ..a });
    }
    if b.planes == 1 && b.len == a.len && b.rows == a.rows && b.pitch == a.pitch && b.rows > 1 {
        if a.planes == 1 {
            return Some(Strided { planes: 2, plane_pitch: b.at - a.at, ..a });
        }
        if b.at == a.at + a.planes as i64 * a.plane_pitch {
            return Some(Strided { planes: a.planes + 1, ..a });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(at: i64, len: usize) -> Strided {
        Strided::run(at, len)
    }

    #[test]
    fn column_is_one_block() {
        // MPI_Type_vector(4096, 1, 4096, MPI_DOUBLE)
        let col = repeat(&repeat(&[run(0, 8)], 1, 8).unwrap(), 4096, 4096 * 8).unwrap();
        assert_eq!(col, vec![Strided { at: 0, len: 8, rows: 4096, pitch: 32768, planes: 1, plane_pitch: 0 }]);
        // Two of it resized to one double: two interleaved planes, which copy as one block
        // of 16-byte rows.
        let m = message(&col, 2, 8, 0, 4096 * 4096 * 8).unwrap();
        assert_eq!(m, vec![Strided { planes: 2, plane_pitch: 8, ..col[0] }]);
        assert_eq!(copies(&m), vec![Strided { len: 16, ..col[0] }]);
        assert_eq!(*prefix(&m.into(), 4096 * 8 + 8), [col[0], run(8, 8)]);
    }

    #[test]
    fn contiguous_runs_merge() {
        let f = repeat(&[run(0, 4)], 10, 4).unwrap();
        assert_eq!(f, vec![run(0, 40)]);
        let mut out = Vec::new();
        push(&mut out, run(0, 8)).unwrap();
        push(&mut out, run(8, 8)).unwrap();
        push(&mut out, run(32, 16)).unwrap();
        assert_eq!(out, vec![Strided { at: 0, len: 16, rows: 2, pitch: 32, planes: 1, plane_pitch: 0 }]);
    }

    #[test]
    fn rows_and_planes() {
        let mut out = Vec::new();
        for k in 0..3 {
            for r in 0..4 {
                push(&mut out, run(k * 1000 + r * 100, 8)).unwrap();
            }
        }
        assert_eq!(out, vec![Strided { at: 0, len: 8, rows: 4, pitch: 100, planes: 3, plane_pitch: 1000 }]);
        assert_eq!(runs(&out, 100).unwrap().len(), 12);
    }

    #[test]
    fn prefixes_follow_packing_order() {
        let b: Form = [Strided { at: 0, len: 8, rows: 4, pitch: 100, planes: 3, plane_pitch: 1000 }].into();
        // One plane, two rows and 3 bytes: 32 + 16 + 3.
        let p = prefix(&b, 51);
        assert_eq!(*p, [
            Strided { planes: 1, plane_pitch: 0, ..b[0] },
            Strided { at: 1000, len: 8, rows: 2, pitch: 100, planes: 1, plane_pitch: 0 },
            run(1200, 3)
        ]);
        assert_eq!(bytes(&p), 51);
        // All of it: the same form.
        assert!(Arc::ptr_eq(&prefix(&b, 96), &b));
        assert_eq!(*prefix(&b, 1000), *b);
    }

    #[test]
    fn negative_strides_and_bounds() {
        // Three 8-byte runs walking down from 32.
        let f = repeat(&[run(32, 8)], 3, -16).unwrap();
        assert_eq!(f, vec![Strided { at: 32, len: 8, rows: 3, pitch: -16, planes: 1, plane_pitch: 0 }]);
        assert_eq!(f[0].ascending().at, 0);
        assert!(message(&f, 1, 40, 0, 40).is_some());
        assert!(message(&f, 1, 40, 8, 40).is_none());
    }

    #[test]
    fn planes_not_whole_rows_apart_turn() {
        // struct {double at 0, double at 16}, extent 24, three of them.
        let f = [Strided { at: 0, len: 8, rows: 2, pitch: 16, planes: 3, plane_pitch: 24 }];
        assert_eq!(f[0].calls(), 3);
        let c = copies(&f);
        assert_eq!(c, vec![Strided { at: 0, len: 8, rows: 3, pitch: 24, planes: 2, plane_pitch: 16 }]);
        assert_eq!(c[0].calls(), 2);
    }

    #[test]
    fn overlapping_rows_have_no_form() {
        assert!(repeat(&[run(0, 8)], 3, 4).is_none());
    }

    #[test]
    fn irregular_runs_stay_in_order() {
        let mut out = Vec::new();
        for at in [40, 0, 16] {
            push(&mut out, run(at, 4)).unwrap();
        }
        assert_eq!(runs(&out, 10).unwrap(), vec![(40, 4), (0, 4), (16, 4)]);
    }
}
