//! `cudampi[rank]: ...` lines on stderr. Formatting goes into a stack buffer and out with one
//! `write(2)`, so reporting an error never allocates and lines from threads do not interleave.

use std::fmt::{self, Write};
use std::sync::atomic::{AtomicI32, Ordering};

static RANK: AtomicI32 = AtomicI32::new(-1);

/// Recorded once `MPI_Init` has returned, so later lines say which rank wrote them.
pub fn set_rank(rank: i32) {
    RANK.store(rank, Ordering::Relaxed);
}

pub fn rank() -> i32 {
    RANK.load(Ordering::Relaxed)
}

struct Line {
    buf: [u8; 1024],
    len: usize,
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Keep room for the newline; a longer message is cut rather than lost.
        let room = self.buf.len() - 1 - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

fn emit(tag: &str, args: fmt::Arguments) {
    let mut line = Line { buf: [0; 1024], len: 0 };
    let rank = rank();
    let _ = if rank >= 0 {
        write!(line, "cudampi[{rank}]: {tag}{args}")
    } else {
        write!(line, "cudampi: {tag}{args}")
    };
    line.buf[line.len] = b'\n';
    line.len += 1;
    // SAFETY: writing an initialised byte range to fd 2.
    unsafe { libc::write(2, line.buf.as_ptr().cast(), line.len) };
}

/// An error the user can act on: one line, prefixed `cudampi:`.
pub fn error(args: fmt::Arguments) {
    emit("error: ", args);
}

pub fn warn(args: fmt::Arguments) {
    emit("warning: ", args);
}

/// `CUDAMPI_DEBUG=1` traces; callers check `config::get().debug` first.
pub fn debug(args: fmt::Arguments) {
    emit("", args);
}

/// Unconditional report lines (statistics at `MPI_Finalize`).
pub fn info(args: fmt::Arguments) {
    emit("", args);
}
