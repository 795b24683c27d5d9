//! cudampi's own threads (one-sided progress, stream-ordered progress): where they run.

/// Moves the calling thread off the processors a launcher bound the rank to (Open MPI binds each
/// of two ranks to a core), onto any other the process may use, where there are others. On the
/// rank's own core the one-sided thread waited for the rank's main thread, spinning in one of
/// the library's blocking calls, to give the processor up: a scheduler tick (4 ms) per entry,
/// on an H200 host. Its sleeps are made exact (1 us of timer slack, not 50), so that an idle
/// thread answers within some 20 us.
pub fn unbind() {
    // SAFETY: zeroed sets filled by the libc macros, for the calling thread (0); prctl with a
    // value.
    unsafe {
        let bytes = std::mem::size_of::<libc::cpu_set_t>();
        let mut bound: libc::cpu_set_t = std::mem::zeroed();
        let mut others: libc::cpu_set_t = std::mem::zeroed();
        let n = libc::sysconf(libc::_SC_NPROCESSORS_CONF).clamp(1, libc::CPU_SETSIZE as libc::c_long) as usize;
        let known = libc::sched_getaffinity(0, bytes, &mut bound) == 0;
        let mut any = false;
        for cpu in 0..n {
            if !known || !libc::CPU_ISSET(cpu, &bound) {
                libc::CPU_SET(cpu, &mut others);
                any = true;
            }
        }
        if any {
            libc::sched_setaffinity(0, bytes, &others);
        }
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
    }
}
