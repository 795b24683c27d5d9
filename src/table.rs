//! The one table of interposed MPI functions.
//!
//! Each line names the C entry point and its profiling twin, the C signature (handles as opaque
//! machine words, buffers and statuses as `void*`), and how the call is served:
//!
//! ```text
//! NAME, PNAME (args) => handler [closure params] (handler args);
//! ```
//!
//! The handler (in `p2p.rs`, `lifecycle.rs`, ...) receives the handler args and a closure that
//! calls the real function; the closure's parameters replace the arguments of the same name, so
//! the handler can substitute a staging buffer or its own status. `export.rs` expands the table
//! into `#[no_mangle]` entry points and `real.rs` into the table of real function pointers, so a
//! new function is one line here.

/// Calls `$expand!` with the whole table.
#[macro_export]
#[doc(hidden)]
macro_rules! mpi_functions {
    ($expand:ident) => {
        $expand! {
            // Life cycle: note the rank, release CUDA resources, print statistics.
            MPI_Init, PMPI_Init (argc: *mut c_int, argv: *mut c_void) => init [] ();
            MPI_Init_thread, PMPI_Init_thread (argc: *mut c_int, argv: *mut c_void, required: c_int, provided: *mut c_int) => init [] ();
            MPI_Finalize, PMPI_Finalize () => finalize [] ();

            // CUDA support queries answer for the shim, not for the MPI below it.
            MPIX_Query_cuda_support, PMPIX_Query_cuda_support () => query_cuda_support [] ();
            MPIX_GPU_query_support, PMPIX_GPU_query_support (gpu_type: c_int, is_supported: *mut c_int)
                => gpu_query_support [] (gpu_type, is_supported);

            // Blocking point-to-point.
            MPI_Send, PMPI_Send (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf] (buf, count as i64, datatype, dest, comm);
            MPI_Ssend, PMPI_Ssend (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf] (buf, count as i64, datatype, dest, comm);
            MPI_Bsend, PMPI_Bsend (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf] (buf, count as i64, datatype, dest, comm);
            MPI_Rsend, PMPI_Rsend (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf] (buf, count as i64, datatype, dest, comm);
            MPI_Recv, PMPI_Recv (buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status: *mut c_void)
                => recv [buf, status] (buf, count as i64, datatype, source, Some(comm), status);
            MPI_Mrecv, PMPI_Mrecv (buf: *mut c_void, count: c_int, datatype: Handle, message: *mut c_void, status: *mut c_void)
                => recv [buf, status] (buf, count as i64, datatype, $crate::p2p::SOURCE_IN_MESSAGE, None, status);
            MPI_Sendrecv, PMPI_Sendrecv (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, dest: c_int, sendtag: c_int,
                                         recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, source: c_int, recvtag: c_int,
                                         comm: Handle, status: *mut c_void)
                => sendrecv [sendbuf, recvbuf, status] (sendbuf, sendcount as i64, sendtype, dest, recvbuf, recvcount as i64, recvtype, source, comm, status);
            MPI_Sendrecv_replace, PMPI_Sendrecv_replace (buf: *mut c_void, count: c_int, datatype: Handle, dest: c_int, sendtag: c_int,
                                                         source: c_int, recvtag: c_int, comm: Handle, status: *mut c_void)
                => sendrecv_replace [buf, status] (buf, count as i64, datatype, dest, source, comm, status);

            // MPI-4 large-count forms: the same calls with MPI_Count counts.
            MPI_Send_c, PMPI_Send_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf] (buf, count, datatype, dest, comm);
            MPI_Ssend_c, PMPI_Ssend_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf] (buf, count, datatype, dest, comm);
            MPI_Bsend_c, PMPI_Bsend_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf] (buf, count, datatype, dest, comm);
            MPI_Rsend_c, PMPI_Rsend_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf] (buf, count, datatype, dest, comm);
            MPI_Recv_c, PMPI_Recv_c (buf: *mut c_void, count: i64, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status: *mut c_void)
                => recv [buf, status] (buf, count, datatype, source, Some(comm), status);
            MPI_Mrecv_c, PMPI_Mrecv_c (buf: *mut c_void, count: i64, datatype: Handle, message: *mut c_void, status: *mut c_void)
                => recv [buf, status] (buf, count, datatype, $crate::p2p::SOURCE_IN_MESSAGE, None, status);
            MPI_Sendrecv_c, PMPI_Sendrecv_c (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, dest: c_int, sendtag: c_int,
                                             recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, source: c_int, recvtag: c_int,
                                             comm: Handle, status: *mut c_void)
                => sendrecv [sendbuf, recvbuf, status] (sendbuf, sendcount, sendtype, dest, recvbuf, recvcount, recvtype, source, comm, status);
            MPI_Sendrecv_replace_c, PMPI_Sendrecv_replace_c (buf: *mut c_void, count: i64, datatype: Handle, dest: c_int, sendtag: c_int,
                                                             source: c_int, recvtag: c_int, comm: Handle, status: *mut c_void)
                => sendrecv_replace [buf, status] (buf, count, datatype, dest, source, comm, status);
        }
    };
}
