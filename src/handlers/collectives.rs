//! Collectives on device buffers: blocking, nonblocking, persistent and neighborhood.
//!
//! Each collective is described by a plan: for its (at most two) buffer arguments, which
//! bytes the call reads or writes on this rank. Buffers the standard calls insignificant here
//! (a non-root receive buffer, a send buffer replaced by `MPI_IN_PLACE`, everything on an
//! `MPI_PROC_NULL` root of an intercommunicator) get no plan entry and are never looked at.
//! A buffer's staging covers the span its counts, displacements and datatypes' true extents
//! reach. Where its blocks leave gaps and every datatype has strided blocks (`mpi::typemap`),
//! only those blocks are copied, each way; otherwise the span is copied once each way, and a
//! receive span that MPI writes only in part (gaps between blocks, derived datatypes,
//! `MPI_IN_PLACE`) is copied in first, so the bytes MPI leaves alone keep their device values.

use std::ffi::{c_int, c_void};

use crate::base::stats;
use crate::cuda::{self, Location, Strided};
use crate::engine;
pub use crate::engine::{Job, PerRank};
use crate::mpi::abi::{self, Handle};
pub use crate::mpi::counts::Ints;
use crate::mpi::comm::{group, neighbors};
use crate::mpi::datatype::{self, Span, TypeInfo};
use crate::mpi::errors;
use crate::mpi::typemap;
use crate::requests::on_gpu::Gpu;
use crate::requests::{self, Entry, Kind};
use crate::staging::stage::{self, Back, Runs, Staged};

/// How the blocks of one buffer are laid out, per peer.
#[derive(Clone, Copy)]
pub enum Blocks {
    /// The same count from or for every peer, packed in rank order.
    Same(i64),
    /// `MPI_...v`: counts and element displacements, one datatype.
    V(Ints, Ints),
    /// `MPI_...w`: counts, byte displacements and a datatype per block.
    W(Ints, Ints, *const c_void),
}

/// What the call does with a buffer on this rank.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    Read,
    Write,
    ReadWrite,
    /// Written with nothing the caller may rely on (the `MPI_Exscan` result on rank 0): the
    /// device buffer is left as it was.
    Scratch,
}

/// One significant buffer: its layout (`n` blocks) and use.
#[derive(Clone, Copy)]
pub struct Arg {
    blocks: Blocks,
    datatype: Handle,
    n: c_int,
    usage: Use,
}

/// The plan for the call's two buffer arguments (send, receive); single-buffer calls use
/// slot 0 for a buffer read and slot 1 for a buffer written.
pub type Plan = [Option<Arg>; 2];

impl Arg {
    /// Block `i`'s count and datatype.
    /// # Safety
    /// The count (and datatype) arrays hold an entry per peer, and `i` is a peer.
    unsafe fn block(&self, i: usize) -> (i64, Handle) {
        // SAFETY: as the caller guarantees.
        unsafe {
            match self.blocks {
                Blocks::Same(c) => (c, self.datatype),
                Blocks::V(counts, _) => (counts.at(i), self.datatype),
                Blocks::W(counts, _, types) => (counts.at(i), abi::get().request_at(types, i)),
            }
        }
    }

    /// Block `i`'s byte offset in the buffer, its datatype's extent being `extent`.
    /// # Safety
    /// As for [`Arg::block`].
    unsafe fn offset(&self, i: usize, extent: i64) -> i64 {
        // SAFETY: as the caller guarantees.
        unsafe {
            match self.blocks {
                Blocks::Same(c) => i as i64 * c * extent,
                Blocks::V(_, displs) => displs.at(i) * extent,
                Blocks::W(_, displs, _) => displs.at(i),
            }
        }
    }
}

fn arg(blocks: Blocks, datatype: Handle, n: c_int, usage: Use) -> Option<Arg> {
    Some(Arg { blocks, datatype, n, usage })
}

/// A single buffer of `count` elements.
fn one(count: i64, datatype: Handle, usage: Use) -> Option<Arg> {
    arg(Blocks::Same(count), datatype, 1, usage)
}

fn in_place(p: *const c_void) -> bool {
    abi::get().is_in_place(p)
}

/// The plans, one per collective family. `sendbuf` is consulted only for `MPI_IN_PLACE`.
pub mod plan {
    use super::*;

    /// `MPI_Reduce_local`'s arguments.
    pub fn read(count: i64, datatype: Handle) -> Option<Arg> {
        one(count, datatype, Use::Read)
    }
    pub fn read_write(count: i64, datatype: Handle) -> Option<Arg> {
        one(count, datatype, Use::ReadWrite)
    }

    /// `MPI_Bcast`: the root reads the buffer, the others write it.
    pub fn bcast(comm: Handle, count: i64, datatype: Handle, root: c_int) -> Result<Plan, c_int> {
        let g = group(comm)?;
        let abi = abi::get();
        let reads = if g.inter { root == abi.root } else { root == g.rank };
        let writes = if g.inter { root != abi.root && root != abi.proc_null } else { root != g.rank };
        Ok([if reads { one(count, datatype, Use::Read) } else { None }, if writes { one(count, datatype, Use::Write) } else { None }])
    }

    /// `MPI_Reduce`: everyone contributes, the root receives.
    pub fn reduce(comm: Handle, sendbuf: *const c_void, count: i64, datatype: Handle, root: c_int) -> Result<Plan, c_int> {
        let g = group(comm)?;
        let abi = abi::get();
        if g.inter {
            return Ok(if root == abi.root {
                [None, one(count, datatype, Use::Write)]
            } else if root == abi.proc_null {
                [None, None]
            } else {
                [one(count, datatype, Use::Read), None]
            });
        }
        Ok(match (root == g.rank, in_place(sendbuf)) {
            (true, true) => [None, one(count, datatype, Use::ReadWrite)],
            (true, false) => [one(count, datatype, Use::Read), one(count, datatype, Use::Write)],
            (false, _) => [one(count, datatype, Use::Read), None],
        })
    }

    /// `MPI_Allreduce`, `MPI_Scan`, `MPI_Reduce_local`: in and out on every rank.
    pub fn allreduce(sendbuf: *const c_void, count: i64, datatype: Handle) -> Result<Plan, c_int> {
        Ok(if in_place(sendbuf) {
            [None, one(count, datatype, Use::ReadWrite)]
        } else {
            [one(count, datatype, Use::Read), one(count, datatype, Use::Write)]
        })
    }

    /// `MPI_Exscan`: rank 0's result is undefined, so its receive buffer is left alone.
    pub fn exscan(comm: Handle, sendbuf: *const c_void, count: i64, datatype: Handle) -> Result<Plan, c_int> {
        let first = group(comm)?.rank == 0;
        Ok(match (in_place(sendbuf), first) {
            (true, true) => [None, one(count, datatype, Use::Read)],
            (true, false) => [None, one(count, datatype, Use::ReadWrite)],
            (false, true) => [one(count, datatype, Use::Read), one(count, datatype, Use::Scratch)],
            (false, false) => [one(count, datatype, Use::Read), one(count, datatype, Use::Write)],
        })
    }

    /// `MPI_Gather(v)`: everyone sends one block, the root receives one per peer.
    pub fn gather(
        comm: Handle,
        sendbuf: *const c_void,
        sendcount: i64,
        sendtype: Handle,
        recv: Blocks,
        recvtype: Handle,
        root: c_int,
    ) -> Result<Plan, c_int> {
        let g = group(comm)?;
        let abi = abi::get();
        let send = one(sendcount, sendtype, Use::Read);
        let recv_as = |u| arg(recv, recvtype, g.peers, u);
        if g.inter {
            return Ok(if root == abi.root {
                [None, recv_as(Use::Write)]
            } else if root == abi.proc_null {
                [None, None]
            } else {
                [send, None]
            });
        }
        Ok(match (root == g.rank, in_place(sendbuf)) {
            // The root's own block is already in place: the rest is written around it.
            (true, true) => [None, recv_as(Use::ReadWrite)],
            (true, false) => [send, recv_as(Use::Write)],
            (false, _) => [send, None],
        })
    }

    /// `MPI_Scatter(v)`: the root sends one block per peer, everyone receives one.
    pub fn scatter(
        comm: Handle,
        send: Blocks,
        sendtype: Handle,
        recvbuf: *const c_void,
        recvcount: i64,
        recvtype: Handle,
        root: c_int,
    ) -> Result<Plan, c_int> {
        let g = group(comm)?;
        let abi = abi::get();
        let send_arg = arg(send, sendtype, g.peers, Use::Read);
        let recv = one(recvcount, recvtype, Use::Write);
        if g.inter {
            return Ok(if root == abi.root {
                [send_arg, None]
            } else if root == abi.proc_null {
                [None, None]
            } else {
                [None, recv]
            });
        }
        Ok(match (root == g.rank, in_place(recvbuf)) {
            (true, true) => [send_arg, None],
            (true, false) => [send_arg, recv],
            (false, _) => [None, recv],
        })
    }

    /// `MPI_Allgather(v)`: one block out, one block in per peer.
    pub fn allgather(comm: Handle, sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recv: Blocks, recvtype: Handle) -> Result<Plan, c_int> {
        let g = group(comm)?;
        Ok(if in_place(sendbuf) {
            [None, arg(recv, recvtype, g.peers, Use::ReadWrite)]
        } else {
            [one(sendcount, sendtype, Use::Read), arg(recv, recvtype, g.peers, Use::Write)]
        })
    }

    /// `MPI_Alltoall(v,w)`: one block out and one in per peer.
    pub fn alltoall(comm: Handle, sendbuf: *const c_void, send: Blocks, sendtype: Handle, recv: Blocks, recvtype: Handle) -> Result<Plan, c_int> {
        let g = group(comm)?;
        Ok(if in_place(sendbuf) {
            [None, arg(recv, recvtype, g.peers, Use::ReadWrite)]
        } else {
            [arg(send, sendtype, g.peers, Use::Read), arg(recv, recvtype, g.peers, Use::Write)]
        })
    }

    /// `MPI_Reduce_scatter`: the input is the sum of all counts, the result this rank's count.
    pub fn reduce_scatter(comm: Handle, sendbuf: *const c_void, recvcounts: Ints, datatype: Handle) -> Result<Plan, c_int> {
        let g = group(comm)?;
        if recvcounts.is_null() {
            return Ok([None, None]);
        }
        // SAFETY: the caller passes one count per process of the (local) group.
        let total: i64 = (0..g.size.max(0) as usize).map(|i| unsafe { recvcounts.at(i) }.max(0)).sum();
        // SAFETY: as above; rank < size.
        let mine = unsafe { recvcounts.at(g.rank as usize) };
        Ok(if in_place(sendbuf) {
            [None, one(total, datatype, Use::ReadWrite)]
        } else {
            [one(total, datatype, Use::Read), one(mine, datatype, Use::Write)]
        })
    }

    /// `MPI_Reduce_scatter_block`.
    pub fn reduce_scatter_block(comm: Handle, sendbuf: *const c_void, recvcount: i64, datatype: Handle) -> Result<Plan, c_int> {
        let g = group(comm)?;
        let total = recvcount.saturating_mul(g.size as i64);
        Ok(if in_place(sendbuf) {
            [None, one(total, datatype, Use::ReadWrite)]
        } else {
            [one(total, datatype, Use::Read), one(recvcount, datatype, Use::Write)]
        })
    }

    /// `MPI_Neighbor_allgather(v)`: one block to every destination, one from every source.
    /// A source may be `MPI_PROC_NULL` (the edge of a non-periodic Cartesian grid), whose block
    /// MPI leaves alone, so the receive span is copied in first.
    pub fn neighbor_allgather(comm: Handle, sendcount: i64, sendtype: Handle, recv: Blocks, recvtype: Handle) -> Result<Plan, c_int> {
        let (sources, _) = neighbors(comm)?;
        Ok([one(sendcount, sendtype, Use::Read), arg(recv, recvtype, sources, Use::ReadWrite)])
    }

    /// `MPI_Neighbor_alltoall(v,w)`; sources as for `neighbor_allgather`.
    pub fn neighbor_alltoall(comm: Handle, send: Blocks, sendtype: Handle, recv: Blocks, recvtype: Handle) -> Result<Plan, c_int> {
        let (sources, destinations) = neighbors(comm)?;
        Ok([arg(send, sendtype, destinations, Use::Read), arg(recv, recvtype, sources, Use::ReadWrite)])
    }
}

/// The byte span an argument covers, and whether its blocks leave no gap in it.
fn span_of(a: &Arg) -> Result<(Span, bool), c_int> {
    let n = a.n.max(0) as usize;
    let mut ranges: Vec<(i64, usize)> = Vec::new();
    let mut named = true;
    match a.blocks {
        Blocks::Same(count) => {
            let t = datatype::query(a.datatype)?;
            let s = t.span(count.saturating_mul(n as i64))?;
            return Ok((s, t.named));
        }
        Blocks::V(counts, displs) => {
            if counts.is_null() || displs.is_null() {
                return Ok((Span { offset: 0, len: 0, named: true }, true));
            }
            let t = datatype::query(a.datatype)?;
            named = t.named;
            for i in 0..n {
                // SAFETY: the caller passes one count and displacement per peer.
                let (c, d) = unsafe { (counts.at(i), displs.at(i)) };
                if c > 0 {
                    let s = t.span(c)?;
                    ranges.push((d.saturating_mul(t.extent).saturating_add(s.offset), s.len));
                }
            }
        }
        Blocks::W(counts, displs, types) => {
            if counts.is_null() || displs.is_null() || types.is_null() {
                return Ok((Span { offset: 0, len: 0, named: true }, true));
            }
            let abi = abi::get();
            let mut last: Option<(Handle, TypeInfo)> = None;
            for i in 0..n {
                // SAFETY: one count, byte displacement and datatype per peer.
                let (c, d, dt) = unsafe { (counts.at(i), displs.at(i), abi.request_at(types, i)) };
                if c <= 0 {
                    continue;
                }
                let t = match last {
                    Some((h, t)) if abi.same(h, dt) => t,
                    _ => datatype::query(dt)?,
                };
                last = Some((dt, t));
                named &= t.named;
                let s = t.span(c)?;
                ranges.push((d.saturating_add(s.offset), s.len));
            }
        }
    }
    Ok(match datatype::union(&mut ranges) {
        Some((offset, len, gapless)) => (Span { offset, len, named }, gapless && named),
        None => (Span { offset: 0, len: 0, named }, true),
    })
}

/// The byte runs an argument's blocks consist of, within its span; `None` when there are too
/// many to copy one by one.
fn runs_of(a: &Arg, span: Span) -> Result<Option<Runs>, c_int> {
    let n = a.n.max(0) as usize;
    let abi = abi::get();
    let mut runs: Vec<(i64, usize)> = Vec::new();
    // The last block's datatype, its description and one element's runs.
    type Element = (Handle, TypeInfo, Vec<(i64, usize)>);
    let mut last: Option<Element> = None;
    for i in 0..n {
        // SAFETY: the caller passes one count, displacement (and datatype) per peer.
        let (count, dt) = unsafe { a.block(i) };
        if count <= 0 {
            continue;
        }
        if !matches!(&last, Some((h, _, _)) if abi.same(*h, dt)) {
            let t = datatype::query(dt)?;
            last = Some((dt, t, datatype::element_runs(dt, &t)?));
        }
        let Some((_, t, element)) = &last else { unreachable!() };
        // SAFETY: as above.
        let base = unsafe { a.offset(i, t.extent) };
        if (runs.len() as i64).saturating_add((element.len() as i64).saturating_mul(count)) > stage::MAX_RUNS {
            return Ok(None);
        }
        datatype::push_runs(&mut runs, element, t.extent, base, count);
    }
    Ok(stage::span_runs(runs, span))
}

/// The strided blocks of an argument's blocks within its span, peer by peer; `None` when a
/// datatype has none, or there are more than `typemap::MAX_BLOCKS`.
fn form_of(a: &Arg, span: Span) -> Option<Vec<Strided>> {
    let n = a.n.max(0) as usize;
    let abi = abi::get();
    let mut out: Vec<Strided> = Vec::new();
    let mut last: Option<(Handle, TypeInfo, typemap::Form)> = None;
    for i in 0..n {
        // SAFETY: the caller passes one count, displacement (and datatype) per peer.
        let (count, dt) = unsafe { a.block(i) };
        if count <= 0 {
            continue;
        }
        if !matches!(&last, Some((h, _, _)) if abi.same(*h, dt)) {
            let t = datatype::query(dt).ok()?;
            last = Some((dt, t, typemap::element(dt, &t)?));
        }
        let (_, t, element) = last.as_ref()?;
        // SAFETY: as above.
        let base = unsafe { a.offset(i, t.extent) };
        out.extend(typemap::message(element, count, t.extent, span.offset - base, span.len)?);
        if out.len() > typemap::MAX_BLOCKS {
            return None;
        }
    }
    Some(out)
}

/// How the call's request, if any, is created.
#[derive(Clone, Copy)]
pub enum Mode {
    Blocking,
    /// `MPI_I...`: the request completes the operation.
    Nonblocking(*mut c_void),
    /// `MPI_..._init`: staged afresh at every `MPI_Start`.
    Persistent(*mut c_void),
}

/// The two buffer arguments as MPI will see them.
struct Staging {
    ptrs: [*mut c_void; 2],
    staged: [Option<Staged>; 2],
}

fn stage_plan(
    name: &'static str,
    comm: Option<Handle>,
    mode: Mode,
    bufs: [*const c_void; 2],
    locs: [Location; 2],
    plan: Plan,
) -> Result<Staging, c_int> {
    let mut out = Staging { ptrs: [bufs[0] as *mut c_void, bufs[1] as *mut c_void], staged: [None, None] };
    let abi = abi::get();
    for i in 0..2 {
        let Some(a) = plan[i] else { continue };
        if matches!(locs[i], Location::Host) {
            continue;
        }
        if abi.same(a.datatype, abi.datatype_null) && !matches!(a.blocks, Blocks::W(..)) {
            // The library rejects the call before it looks at a buffer, with its own class.
            out.ptrs[i] = stage::placeholder();
            continue;
        }
        let Ok((span, gapless)) = span_of(&a) else {
            // A datatype the library refuses: it answers the call itself, each library with
            // the class its own order of checks gives (Open MPI's checks the operation first).
            out.ptrs[i] = stage::placeholder();
            continue;
        };
        let dev = match locs[i] {
            Location::Device(d) => d,
            // MPI touches nothing: the pointer goes as given.
            _ if span.len == 0 => continue,
            _ => return Err(errors::unreadable(name, comm, bufs[i])),
        };
        let writes = matches!(a.usage, Use::Write | Use::ReadWrite);
        // A buffer read for nothing gets a harmless address; one written gets an empty staging
        // buffer, whose untouched tail takes what a library writes past the counts.
        if span.len == 0 && !writes {
            out.ptrs[i] = stage::placeholder();
            continue;
        }
        // A datatype the library will not unpack (an uncommitted one) is copied whole, gaps
        // included: the library answers the call itself, with the class its own order of
        // checks gives (an operation undefined for the datatype comes first, in every MPI).
        // One device buffer given as both the send and the receive buffer (not MPI_IN_PLACE):
        // the library is shown one staging buffer for both, as it would be shown one host
        // buffer, and answers as it would there (every library refuses the aliasing).
        let aliased = i == 1
            && std::ptr::eq(bufs[0], bufs[1])
            && out.staged[0].as_ref().is_some_and(|s| s.span.offset >= span.offset && s.span.offset + s.span.len as i64 <= span.offset + span.len as i64);
        // Blocks with gaps move their payload only: nothing is copied in for a buffer MPI
        // writes whole, and only the blocks go back.
        let form = if !gapless && !aliased && span.len > 0 { form_of(&a, span) } else { None };
        if let Some(form) = form {
            let (fill, back) = match a.usage {
                Use::Read => (true, Back::Nothing),
                Use::Write => (false, Back::Span),
                Use::ReadWrite => (true, Back::Span),
                Use::Scratch => (false, Back::Nothing),
            };
            let s = stage::lease_form(name, bufs[i], dev, span, comm, fill, back, form.into())?;
            if !matches!(mode, Mode::Persistent(_)) {
                s.fill(name, comm)?;
            }
            out.ptrs[i] = s.mpi_ptr();
            out.staged[i] = Some(s);
            continue;
        }
        let runs = if writes && !gapless { runs_of(&a, span).unwrap_or(None) } else { None };
        let (fill, back) = match a.usage {
            _ if aliased => (true, Back::Span),
            _ if span.len == 0 => (false, Back::Nothing),
            Use::Read => (true, Back::Nothing),
            // MPI writes every byte of every block; without the runs the gaps come along.
            Use::Write => (!gapless && runs.is_none(), Back::Span),
            Use::ReadWrite => (true, Back::Span),
            Use::Scratch => (false, Back::Nothing),
        };
        let mut s = stage::lease_for(name, bufs[i], dev, span, comm, fill, back)?;
        s.runs = runs;
        if !matches!(mode, Mode::Persistent(_)) {
            s.fill(name, comm)?;
        }
        out.ptrs[i] = s.mpi_ptr();
        if aliased {
            out.ptrs[0] = out.ptrs[1];
            out.staged[0] = None;
        }
        out.staged[i] = Some(s);
    }
    Ok(out)
}

/// After the real call: a blocking call copies results back, the others hand their staging
/// buffers to the request.
fn finish(name: &'static str, comm: Option<Handle>, mode: Mode, staging: Staging, rc: c_int) -> c_int {
    let [send, recv] = staging.staged;
    if rc != 0 || (send.is_none() && recv.is_none()) {
        return rc;
    }
    match mode {
        Mode::Blocking => {
            for s in [&send, &recv].into_iter().flatten() {
                if let Err(e) = s.deliver(name, comm, std::ptr::null_mut()) {
                    return e;
                }
            }
            rc
        }
        Mode::Nonblocking(request) => match requests::insert(request, Entry::collective(name, comm, send, recv, Kind::Once)) {
            Ok(()) => rc,
            Err(e) => e,
        },
        Mode::Persistent(request) => match requests::insert(request, Entry::collective(name, comm, send, recv, Kind::Persistent)) {
            Ok(()) => rc,
            Err(e) => e,
        },
    }
}

/// Where buffer `i` of a call lives. `MPI_BOTTOM` (null) is located by its datatype's absolute
/// addresses, from the plan made first for it.
fn locate(buf: *const c_void, plan: Option<&Result<Plan, c_int>>, i: usize) -> Location {
    if !buf.is_null() {
        return cuda::locate(buf);
    }
    match plan {
        Some(Ok(p)) => match p[i] {
            Some(Arg { blocks: Blocks::Same(count), datatype, n, .. }) if count > 0 && n > 0 => cuda::locate(stage::absolute(datatype)),
            _ => Location::Host,
        },
        _ => Location::Host,
    }
}

/// A collective with a send and a receive buffer.
pub fn coll(
    name: &'static str,
    comm: Option<Handle>,
    mode: Mode,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    plan: impl FnOnce() -> Result<Plan, c_int>,
    call: impl FnOnce(*const c_void, *mut c_void) -> c_int,
) -> c_int {
    let bufs = [sendbuf, recvbuf.cast_const()];
    let mut plan = Some(plan);
    let mut made = None;
    if bufs.iter().any(|b| b.is_null()) {
        made = plan.take().map(|f| f());
    }
    let locs = [0, 1].map(|i| locate(bufs[i], made.as_ref(), i));
    if locs.iter().all(|l| matches!(l, Location::Host)) {
        stats::host_call();
        return call(sendbuf, recvbuf);
    }
    let plan = made.or_else(|| plan.take().map(|f| f())).unwrap_or(Err(abi::get().err_intern));
    let staging = match plan.and_then(|p| stage_plan(name, comm, mode, bufs, locs, p)) {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    let rc = call(staging.ptrs[0], staging.ptrs[1]);
    finish(name, comm, mode, staging, rc)
}

/// A collective with one buffer (`MPI_Bcast`): the plan puts it in slot 0 where it is read,
/// slot 1 where it is written.
pub fn coll1(
    name: &'static str,
    comm: Option<Handle>,
    mode: Mode,
    buffer: *mut c_void,
    plan: impl FnOnce() -> Result<Plan, c_int>,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    let mut plan = Some(plan);
    let made = if buffer.is_null() { plan.take().map(|f| f()) } else { None };
    let locs = match made {
        Some(_) => [0, 1].map(|i| locate(buffer, made.as_ref(), i)),
        None => [cuda::locate(buffer); 2],
    };
    if locs.iter().all(|l| matches!(l, Location::Host)) {
        stats::host_call();
        return call(buffer);
    }
    let plan = made.or_else(|| plan.take().map(|f| f())).unwrap_or(Err(abi::get().err_intern));
    let staging = match plan.and_then(|p| stage_plan(name, comm, mode, [buffer; 2], locs, p)) {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    let ptr = if staging.ptrs[1] != buffer { staging.ptrs[1] } else { staging.ptrs[0] };
    let rc = call(ptr);
    finish(name, comm, mode, staging, rc)
}

/// The collective on NCCL (`engine`) if it runs there, in any mode: `Some(rc)` when served.
/// A nonblocking or persistent one leaves its request to `requests::on_gpu`.
fn on_nccl(name: &'static str, comm: Handle, mode: Mode, job: impl FnOnce() -> Job) -> Option<c_int> {
    let (request, gpu, kind) = match mode {
        Mode::Blocking => return engine::run(name, comm, &job()),
        Mode::Nonblocking(request) => {
            let started = engine::start(name, comm, &job())?;
            (request, started.and_then(|f| Gpu::started(request, f)), Kind::Once)
        }
        Mode::Persistent(request) => {
            let planned = engine::plan(name, comm, &job())?;
            (request, planned.and_then(|p| Gpu::planned(request, p)), Kind::Persistent)
        }
    };
    Some(match gpu.and_then(|g| requests::insert(request, Entry::on_gpu(name, Some(comm), g, kind))) {
        Ok(()) => 0,
        Err(rc) => rc,
    })
}

/// A collective NCCL may run (`engine`): asked first, then staged as [`coll`] does when the
/// ranks did not choose NCCL.
pub fn ncoll(
    name: &'static str,
    comm: Option<Handle>,
    mode: Mode,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    job: impl FnOnce() -> Job,
    plan: impl FnOnce() -> Result<Plan, c_int>,
    call: impl FnOnce(*const c_void, *mut c_void) -> c_int,
) -> c_int {
    if let Some(rc) = comm.filter(|_| engine::on()).and_then(|c| on_nccl(name, c, mode, job)) {
        return rc;
    }
    // Host buffers that only had to tick the agreements' schedule go to MPI at once.
    if cuda::plainly_host(sendbuf) && cuda::plainly_host(recvbuf) {
        stats::host_call();
        return call(sendbuf, recvbuf);
    }
    coll(name, comm, mode, sendbuf, recvbuf, plan, call)
}

/// [`ncoll`] for `MPI_Bcast`.
pub fn ncoll1(
    name: &'static str,
    comm: Option<Handle>,
    mode: Mode,
    buffer: *mut c_void,
    job: impl FnOnce() -> Job,
    plan: impl FnOnce() -> Result<Plan, c_int>,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    if let Some(rc) = comm.filter(|_| engine::on()).and_then(|c| on_nccl(name, c, mode, job)) {
        return rc;
    }
    if cuda::plainly_host(buffer) {
        stats::host_call();
        return call(buffer);
    }
    coll1(name, comm, mode, buffer, plan, call)
}
