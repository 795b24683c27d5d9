//! Converters from Fortran arguments (everything by reference, handles as `MPI_Fint`) to the C
//! call's arguments and back, one type per kind of argument. `kind!` in `mod.rs` picks them by
//! the argument's name in the table.
//!
//! Each converter follows what the libraries' own bindings do: out-values are written back only
//! when the call succeeded, indices become 1-based, `LOGICAL`s take the compiler's true value,
//! and statuses are the Fortran arrays themselves (the Fortran and C layouts are the same in
//! Open MPI and MPICH, which is how their bindings pass them).

use std::ffi::{c_int, c_void};
use std::marker::PhantomData;

use super::library::{self, Comm, Datatype, HandleKind, Request, View, Win};
use crate::cuda::pointer::surely_host;
use crate::mpi::abi::{self, Handle, Offset};

/// What the arguments say about who serves the call.
#[derive(Default)]
pub struct Gate {
    buffers: bool,
    device: bool,
    /// The call returns indices of requests.
    indices: bool,
    /// The call names a window.
    window: bool,
    /// A buffer only the library can describe (a non-contiguous array section).
    pub veto: bool,
    /// An attribute whose value the library's routine gives as cudampi would.
    attribute: bool,
    /// A collective call with a step of cudampi's own that every process must take, whatever
    /// its buffers (`MPI_Win_create`: `handlers::mapped::prepare`).
    collective: bool,
}

impl Gate {
    /// Whether cudampi serves the call instead of the library's routine. Calls that return
    /// indices always are: released bindings got them wrong (MPICH 4.0's `mpi_f08` returns
    /// 0-based indices, pmodels/mpich#6270; MPICH 4.1 returns `MPI_UNDEFINED + 1`, #6402), and
    /// a program must not see the convention change with where its buffers live.
    pub fn serve(&self) -> bool {
        if self.veto || self.attribute {
            false
        } else if self.indices || self.collective {
            true
        } else if self.buffers {
            // An operation on a window whose device parts cudampi carries out (mapped, served)
            // is cudampi's whatever its buffers: the library holds none of such a part, and
            // no address of attached device memory.
            self.device || (self.window && crate::handlers::windows::carried())
        } else {
            // A window's synchronisation moves bytes between a device window and its host copy
            // and completes staged operations, which the library's routine would not.
            crate::requests::any() || (self.window && crate::handlers::windows::tracked())
        }
    }
}

/// Values one argument's conversion leaves for another: the length of request arrays, the
/// communicator (read before anything is converted) and how long a `w` collective's datatype
/// arrays are on it, the number of completed requests, an error found while converting.
#[derive(Default)]
pub struct Ctx {
    count: usize,
    comm: Option<Handle>,
    keyval: c_int,
    pub type_arrays: TypeArrays,
    outcount: c_int,
    pub failed: Option<c_int>,
}

/// Whose datatypes a `w` collective's arrays hold: one per process of the (remote) group, or
/// one per neighbour of the topology (destinations for sending, sources for receiving).
#[derive(Default, Clone, Copy)]
pub enum TypeArrays {
    #[default]
    None,
    All,
    Neighbor,
}

pub trait Arg<V>: Sized {
    /// The argument's type in the C call.
    type C;
    /// # Safety
    /// `raw` is the caller's argument.
    unsafe fn gate(_raw: *mut c_void, _gate: &mut Gate) {}
    /// Runs for every argument before any is taken.
    ///
    /// # Safety
    /// `raw` is the caller's argument.
    unsafe fn prepare(_raw: *mut c_void, _ctx: &mut Ctx) {}
    /// # Safety
    /// `raw` is the caller's argument.
    unsafe fn take(raw: *mut c_void, ctx: &mut Ctx) -> Self;
    fn c(&mut self) -> Self::C;
    /// # Safety
    /// Runs after the C call, with its result.
    unsafe fn after(self, _rc: c_int, _ctx: &mut Ctx) {}
}

/// An integer the C call takes by value: `int` or `MPI_Count`.
pub trait Scalar: Copy {
    fn wide(self) -> i64;
}
impl Scalar for c_int {
    fn wide(self) -> i64 {
        self.into()
    }
}
impl Scalar for i64 {
    fn wide(self) -> i64 {
        self
    }
}
/// `INTEGER(KIND=MPI_ADDRESS_KIND)`: a displacement or a size.
impl Scalar for isize {
    fn wide(self) -> i64 {
        self as i64
    }
}
/// `INTEGER(KIND=MPI_OFFSET_KIND)`.
impl Scalar for Offset {
    fn wide(self) -> i64 {
        self.0
    }
}

pub struct Val<T>(T);

impl<V, T: Scalar> Arg<V> for Val<T> {
    type C = T;
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        // SAFETY: an INTEGER of the C argument's width, by reference.
        Val(unsafe { raw.cast::<T>().read_unaligned() })
    }
    fn c(&mut self) -> T {
        self.0
    }
}

/// `MPI_Win_create`'s displacement unit, an INTEGER: the argument that marks the call whose
/// collective step every process takes through cudampi.
pub struct DispUnit<T>(T);

impl<V, T: Scalar> Arg<V> for DispUnit<T> {
    type C = T;
    unsafe fn gate(_raw: *mut c_void, gate: &mut Gate) {
        gate.collective = true;
    }
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        // SAFETY: an INTEGER of the C argument's width, by reference.
        DispUnit(unsafe { raw.cast::<T>().read_unaligned() })
    }
    fn c(&mut self) -> T {
        self.0
    }
}

/// A window attribute's key: cudampi answers `MPI_WIN_BASE`, `MPI_WIN_SIZE` and
/// `MPI_WIN_MODEL` of a device window itself; the library's routine gives every other attribute.
pub struct Keyval(c_int);

impl Keyval {
    /// MPICH's Fortran keys of the predefined window attributes are the C ones plus one
    /// (`mpif.h`: `MPI_WIN_BASE=1711276034`, C `0x66000001`).
    fn c_key(k: c_int) -> c_int {
        let a = abi::get();
        if a.family == abi::Family::Mpich && (k == a.win_base + 1 || k == a.win_size + 1 || k == a.win_model + 1) {
            k - 1
        } else {
            k
        }
    }

    fn served(k: c_int) -> bool {
        let a = abi::get();
        k == a.win_base || k == a.win_size || k == a.win_model
    }
}

impl<V> Arg<V> for Keyval {
    type C = c_int;
    unsafe fn gate(raw: *mut c_void, gate: &mut Gate) {
        // SAFETY: an INTEGER by reference.
        let k = Keyval::c_key(unsafe { raw.cast::<c_int>().read_unaligned() });
        gate.attribute |= !Keyval::served(k);
    }
    unsafe fn take(raw: *mut c_void, ctx: &mut Ctx) -> Self {
        // SAFETY: as in gate.
        ctx.keyval = Keyval::c_key(unsafe { raw.cast::<c_int>().read_unaligned() });
        Keyval(ctx.keyval)
    }
    fn c(&mut self) -> c_int {
        self.0
    }
}

/// An attribute's value, `INTEGER(KIND=MPI_ADDRESS_KIND)`: C gets a pointer to the value of a
/// predefined attribute but the address itself for `MPI_WIN_BASE` (and a user attribute's
/// value as it was set), Fortran the value (MPI-4.1 §7.7.5, §12.2.6).
pub struct Attribute(*mut isize, *mut c_void);

impl<V> Arg<V> for Attribute {
    type C = *mut c_void;
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        Attribute(raw.cast(), std::ptr::null_mut())
    }
    fn c(&mut self) -> *mut c_void {
        (&mut self.1 as *mut *mut c_void).cast()
    }
    unsafe fn after(self, rc: c_int, ctx: &mut Ctx) {
        // A null value: no attribute was found, and the Fortran one stays as it was.
        if rc != 0 || self.1.is_null() {
            return;
        }
        let a = abi::get();
        let v = if ctx.keyval == a.win_model {
            // SAFETY: MPI_WIN_MODEL's value is a pointer to an int.
            unsafe { self.1.cast::<c_int>().read() as isize }
        } else if ctx.keyval == a.win_size {
            // SAFETY: MPI_WIN_SIZE's value is a pointer to an MPI_Aint.
            unsafe { self.1.cast::<isize>().read() }
        } else {
            self.1 as isize
        };
        // SAFETY: the caller's INTEGER(KIND=MPI_ADDRESS_KIND).
        unsafe { self.0.write_unaligned(v) };
    }
}

/// A count that also sizes the request and status arrays after it.
pub struct Count<T>(T);

impl<V, T: Scalar> Arg<V> for Count<T> {
    type C = T;
    unsafe fn take(raw: *mut c_void, ctx: &mut Ctx) -> Self {
        // SAFETY: as for Val.
        let n = unsafe { raw.cast::<T>().read_unaligned() };
        ctx.count = n.wide().max(0) as usize;
        Count(n)
    }
    fn c(&mut self) -> T {
        self.0
    }
}

/// A choice buffer: device memory decides who serves the call; the Fortran `MPI_IN_PLACE` and
/// `MPI_BOTTOM` become the C ones.
pub struct Buf<V>(*mut c_void, PhantomData<V>);

impl<V: View> Arg<V> for Buf<V> {
    type C = *mut c_void;
    unsafe fn gate(raw: *mut c_void, gate: &mut Gate) {
        gate.buffers = true;
        // SAFETY: per the trait.
        match unsafe { V::base(raw) } {
            Some(p) => gate.device |= !surely_host(p),
            None => gate.veto = true,
        }
    }
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        // SAFETY: per the trait; a vetoed buffer never gets here.
        let p = unsafe { V::base(raw) }.unwrap_or(raw);
        let s = library::sentinels();
        let c = if s.in_place.is(p) {
            abi::get().in_place as *mut c_void
        } else if s.bottom.is(p) {
            std::ptr::null_mut()
        } else {
            p
        };
        Buf(c, PhantomData)
    }
    fn c(&mut self) -> *mut c_void {
        self.0
    }
}

/// An array of counts or displacements: Fortran `INTEGER` is C `int`, so the array is the C one.
pub struct Array(*mut c_void);

impl<V> Arg<V> for Array {
    type C = *mut c_void;
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        Array(raw)
    }
    fn c(&mut self) -> *mut c_void {
        self.0
    }
}

/// A handle the call only reads.
pub struct In<K>(Handle, PhantomData<K>);

impl<V, K: HandleKind> Arg<V> for In<K> {
    type C = Handle;
    unsafe fn gate(_raw: *mut c_void, gate: &mut Gate) {
        gate.window |= K::SLOT == Win::SLOT;
    }
    unsafe fn prepare(raw: *mut c_void, ctx: &mut Ctx) {
        if K::SLOT == Comm::SLOT {
            // SAFETY: an MPI_Fint by reference.
            ctx.comm = Some(K::f2c(unsafe { raw.cast::<c_int>().read_unaligned() }));
        }
    }
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        // SAFETY: an MPI_Fint by reference.
        In(K::f2c(unsafe { raw.cast::<c_int>().read_unaligned() }), PhantomData)
    }
    fn c(&mut self) -> Handle {
        self.0
    }
}

/// A handle the call writes (a new request) or reads and updates (a completed or freed one).
pub struct InOut<K>(*mut c_int, Handle, PhantomData<K>);

impl<V, K: HandleKind> Arg<V> for InOut<K> {
    type C = *mut c_void;
    unsafe fn gate(_raw: *mut c_void, gate: &mut Gate) {
        gate.window |= K::SLOT == Win::SLOT;
    }
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        let raw = raw.cast::<c_int>();
        // SAFETY: an MPI_Fint by reference. For an output it holds anything; every family's
        // `_f2c` maps an unknown value to an invalid handle, which the call then overwrites.
        InOut(raw, K::f2c(unsafe { raw.read_unaligned() }), PhantomData)
    }
    fn c(&mut self) -> *mut c_void {
        (&mut self.1 as *mut Handle).cast()
    }
    unsafe fn after(self, rc: c_int, _ctx: &mut Ctx) {
        if rc == 0 {
            // SAFETY: the caller's MPI_Fint.
            unsafe { self.0.write_unaligned(K::c2f(self.1)) };
        }
    }
}

/// A handle argument by the C parameter's type: a handle the call reads, or a pointer to one
/// it writes (`MPI_Win_create`) or reads and updates (`MPI_Win_free`).
pub trait Passed<K> {
    type Arg;
}
impl<K> Passed<K> for Handle {
    type Arg = In<K>;
}
impl<K> Passed<K> for *mut c_void {
    type Arg = InOut<K>;
}

/// An array of requests, converted both ways: completed ones come back as `MPI_REQUEST_NULL`.
pub enum Requests {
    /// The Fortran array is the C one (MPICH: a request is an `int` in both).
    Same(*mut c_void),
    Converted(*mut c_int, Vec<Handle>),
}

impl<V> Arg<V> for Requests {
    type C = *mut c_void;
    unsafe fn take(raw: *mut c_void, ctx: &mut Ctx) -> Self {
        if library::handles_are_fints::<Request>() {
            return Requests::Same(raw);
        }
        let raw = raw.cast::<c_int>();
        // SAFETY: `count` MPI_Fints.
        let c = (0..ctx.count).map(|i| Request::f2c(unsafe { raw.add(i).read_unaligned() })).collect();
        Requests::Converted(raw, c)
    }
    fn c(&mut self) -> *mut c_void {
        match self {
            Requests::Same(p) => *p,
            Requests::Converted(_, v) => v.as_mut_ptr().cast(),
        }
    }
    unsafe fn after(self, _rc: c_int, _ctx: &mut Ctx) {
        // Every element, whatever the result: requests completed before an error are freed and
        // their old Fortran values would name nothing.
        if let Requests::Converted(raw, v) = self {
            for (i, h) in v.into_iter().enumerate() {
                // SAFETY: as in take.
                unsafe { raw.add(i).write_unaligned(Request::c2f(h)) };
            }
        }
    }
}

/// A `w` collective's datatypes, one per peer (`SEND`: the send side's).
pub enum Types<const SEND: bool> {
    /// The Fortran array is the C one (MPICH: a datatype is an `int` in both).
    Same(*mut c_void),
    Converted(Vec<Handle>),
}

impl<V, const SEND: bool> Arg<V> for Types<SEND> {
    type C = *mut c_void;
    unsafe fn take(raw: *mut c_void, ctx: &mut Ctx) -> Self {
        if library::handles_are_fints::<Datatype>() {
            return Types::Same(raw);
        }
        let peers = match (ctx.type_arrays, ctx.comm) {
            (TypeArrays::All, Some(comm)) => crate::mpi::comm::group(comm).map(|g| g.peers),
            (TypeArrays::Neighbor, Some(comm)) => crate::mpi::comm::neighbors(comm).map(|(sources, destinations)| if SEND { destinations } else { sources }),
            _ => Err(abi::get().err_intern),
        };
        match peers {
            Ok(n) => {
                let raw = raw.cast::<c_int>();
                // SAFETY: one MPI_Fint per peer.
                Types::Converted((0..n.max(0) as usize).map(|i| Datatype::f2c(unsafe { raw.add(i).read_unaligned() })).collect())
            }
            Err(rc) => {
                ctx.failed = Some(rc);
                Types::Converted(Vec::new())
            }
        }
    }
    fn c(&mut self) -> *mut c_void {
        match self {
            Types::Same(p) => *p,
            Types::Converted(v) => v.as_mut_ptr().cast(),
        }
    }
}

/// A status: the Fortran array, or the C `MPI_STATUS_IGNORE`.
pub struct Status(*mut c_void);

impl<V> Arg<V> for Status {
    type C = *mut c_void;
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        let ignore = library::sentinels().status_ignore.is(raw);
        Status(if ignore { abi::get().status_ignore as *mut c_void } else { raw })
    }
    fn c(&mut self) -> *mut c_void {
        self.0
    }
}

pub struct Statuses(*mut c_void);

impl<V> Arg<V> for Statuses {
    type C = *mut c_void;
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        let ignore = library::sentinels().statuses_ignore.is(raw);
        Statuses(if ignore { abi::get().statuses_ignore as *mut c_void } else { raw })
    }
    fn c(&mut self) -> *mut c_void {
        self.0
    }
}

/// A `LOGICAL` result.
pub struct Flag(*mut c_int, c_int);

impl<V> Arg<V> for Flag {
    type C = *mut c_int;
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        Flag(raw.cast(), 0)
    }
    fn c(&mut self) -> *mut c_int {
        &mut self.1
    }
    unsafe fn after(self, rc: c_int, _ctx: &mut Ctx) {
        if rc == 0 {
            let v = if self.1 != 0 { library::logical_true() } else { 0 };
            // SAFETY: the caller's LOGICAL.
            unsafe { self.0.write_unaligned(v) };
        }
    }
}

/// The index of a completed request: 1-based in Fortran, `MPI_UNDEFINED` unchanged.
pub struct Index(*mut c_int, c_int);

impl<V> Arg<V> for Index {
    type C = *mut c_int;
    unsafe fn gate(_raw: *mut c_void, gate: &mut Gate) {
        gate.indices = true;
    }
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        Index(raw.cast(), abi::UNDEFINED)
    }
    fn c(&mut self) -> *mut c_int {
        &mut self.1
    }
    unsafe fn after(self, rc: c_int, _ctx: &mut Ctx) {
        if rc == 0 {
            let v = if self.1 >= 0 { self.1 + 1 } else { self.1 };
            // SAFETY: the caller's INTEGER.
            unsafe { self.0.write_unaligned(v) };
        }
    }
}

/// How many requests completed, for the indices after it.
pub struct Outcount(*mut c_int);

impl<V> Arg<V> for Outcount {
    type C = *mut c_int;
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        Outcount(raw.cast())
    }
    fn c(&mut self) -> *mut c_int {
        self.0
    }
    unsafe fn after(self, rc: c_int, ctx: &mut Ctx) {
        // SAFETY: the caller's INTEGER, written by the call.
        ctx.outcount = if rc == 0 { unsafe { self.0.read_unaligned() } } else { abi::UNDEFINED };
    }
}

/// Indices of completed requests, made 1-based in place.
pub struct Indices(*mut c_int);

impl<V> Arg<V> for Indices {
    type C = *mut c_int;
    unsafe fn gate(_raw: *mut c_void, gate: &mut Gate) {
        gate.indices = true;
    }
    unsafe fn take(raw: *mut c_void, _ctx: &mut Ctx) -> Self {
        Indices(raw.cast())
    }
    fn c(&mut self) -> *mut c_int {
        self.0
    }
    unsafe fn after(self, rc: c_int, ctx: &mut Ctx) {
        if rc != 0 || ctx.outcount == abi::UNDEFINED {
            return;
        }
        for i in 0..ctx.outcount.max(0) as usize {
            // SAFETY: the call wrote `outcount` indices.
            unsafe {
                let p = self.0.add(i);
                p.write_unaligned(p.read_unaligned() + 1);
            }
        }
    }
}
