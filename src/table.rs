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

            // Nonblocking point-to-point: staged buffers live in the request table until completion.
            MPI_Isend, PMPI_Isend (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf] (buf, count as i64, datatype, dest, comm, request);
            MPI_Issend, PMPI_Issend (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf] (buf, count as i64, datatype, dest, comm, request);
            MPI_Ibsend, PMPI_Ibsend (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf] (buf, count as i64, datatype, dest, comm, request);
            MPI_Irsend, PMPI_Irsend (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf] (buf, count as i64, datatype, dest, comm, request);
            MPI_Irecv, PMPI_Irecv (buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => irecv [buf] (buf, count as i64, datatype, source, Some(comm), request);
            MPI_Imrecv, PMPI_Imrecv (buf: *mut c_void, count: c_int, datatype: Handle, message: *mut c_void, request: *mut c_void)
                => irecv [buf] (buf, count as i64, datatype, $crate::p2p::SOURCE_IN_MESSAGE, None, request);
            MPI_Isendrecv, PMPI_Isendrecv (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, dest: c_int, sendtag: c_int,
                                           recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, source: c_int, recvtag: c_int,
                                           comm: Handle, request: *mut c_void)
                => isendrecv [sendbuf, recvbuf] (sendbuf, sendcount as i64, sendtype, dest, recvbuf, recvcount as i64, recvtype, source, comm, request);
            MPI_Isendrecv_replace, PMPI_Isendrecv_replace (buf: *mut c_void, count: c_int, datatype: Handle, dest: c_int, sendtag: c_int,
                                                           source: c_int, recvtag: c_int, comm: Handle, request: *mut c_void)
                => isendrecv_replace [buf] (buf, count as i64, datatype, dest, source, comm, request);
            MPI_Isend_c, PMPI_Isend_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf] (buf, count, datatype, dest, comm, request);
            MPI_Issend_c, PMPI_Issend_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf] (buf, count, datatype, dest, comm, request);
            MPI_Ibsend_c, PMPI_Ibsend_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf] (buf, count, datatype, dest, comm, request);
            MPI_Irsend_c, PMPI_Irsend_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf] (buf, count, datatype, dest, comm, request);
            MPI_Irecv_c, PMPI_Irecv_c (buf: *mut c_void, count: i64, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => irecv [buf] (buf, count, datatype, source, Some(comm), request);
            MPI_Imrecv_c, PMPI_Imrecv_c (buf: *mut c_void, count: i64, datatype: Handle, message: *mut c_void, request: *mut c_void)
                => irecv [buf] (buf, count, datatype, $crate::p2p::SOURCE_IN_MESSAGE, None, request);
            MPI_Isendrecv_c, PMPI_Isendrecv_c (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, dest: c_int, sendtag: c_int,
                                               recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, source: c_int, recvtag: c_int,
                                               comm: Handle, request: *mut c_void)
                => isendrecv [sendbuf, recvbuf] (sendbuf, sendcount, sendtype, dest, recvbuf, recvcount, recvtype, source, comm, request);
            MPI_Isendrecv_replace_c, PMPI_Isendrecv_replace_c (buf: *mut c_void, count: i64, datatype: Handle, dest: c_int, sendtag: c_int,
                                                               source: c_int, recvtag: c_int, comm: Handle, request: *mut c_void)
                => isendrecv_replace [buf] (buf, count, datatype, dest, source, comm, request);

            // Persistent point-to-point: staged at every start, copied back at every completion.
            MPI_Send_init, PMPI_Send_init (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => send_init [buf] (buf, count as i64, datatype, dest, comm, request);
            MPI_Ssend_init, PMPI_Ssend_init (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => send_init [buf] (buf, count as i64, datatype, dest, comm, request);
            MPI_Bsend_init, PMPI_Bsend_init (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => send_init [buf] (buf, count as i64, datatype, dest, comm, request);
            MPI_Rsend_init, PMPI_Rsend_init (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => send_init [buf] (buf, count as i64, datatype, dest, comm, request);
            MPI_Recv_init, PMPI_Recv_init (buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => recv_init [buf] (buf, count as i64, datatype, source, comm, request);
            MPI_Send_init_c, PMPI_Send_init_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => send_init [buf] (buf, count, datatype, dest, comm, request);
            MPI_Ssend_init_c, PMPI_Ssend_init_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => send_init [buf] (buf, count, datatype, dest, comm, request);
            MPI_Bsend_init_c, PMPI_Bsend_init_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => send_init [buf] (buf, count, datatype, dest, comm, request);
            MPI_Rsend_init_c, PMPI_Rsend_init_c (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => send_init [buf] (buf, count, datatype, dest, comm, request);
            MPI_Recv_init_c, PMPI_Recv_init_c (buf: *mut c_void, count: i64, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => recv_init [buf] (buf, count, datatype, source, comm, request);

            // MPI-4 partitioned point-to-point: send partitions are staged as they are marked
            // ready, receive partitions copied back as they are seen to arrive.
            MPI_Psend_init, PMPI_Psend_init (buf: *const c_void, partitions: c_int, count: i64, datatype: Handle, dest: c_int, tag: c_int,
                                             comm: Handle, info: Handle, request: *mut c_void)
                => partitioned_init [buf] (buf as *mut c_void, partitions, count, datatype, dest, comm, request, true);
            MPI_Precv_init, PMPI_Precv_init (buf: *mut c_void, partitions: c_int, count: i64, datatype: Handle, source: c_int, tag: c_int,
                                             comm: Handle, info: Handle, request: *mut c_void)
                => partitioned_init [buf] (buf, partitions, count, datatype, source, comm, request, false);
            MPI_Pready, PMPI_Pready (partition: c_int, request: Handle) => pready [] (partition, request);
            MPI_Pready_range, PMPI_Pready_range (partition_low: c_int, partition_high: c_int, request: Handle)
                => pready_range [] (partition_low, partition_high, request);
            MPI_Pready_list, PMPI_Pready_list (length: c_int, partitions: *const c_int, request: Handle)
                => pready_list [] (length, partitions, request);
            MPI_Parrived, PMPI_Parrived (request: Handle, partition: c_int, flag: *mut c_int) => parrived [] (request, partition, flag);

            // Starting, completing, inspecting and freeing requests.
            MPI_Start, PMPI_Start (request: *mut c_void) => start [] (request);
            MPI_Startall, PMPI_Startall (count: c_int, requests: *mut c_void) => startall [] (count, requests);
            MPI_Wait, PMPI_Wait (request: *mut c_void, status: *mut c_void) => wait [status] (request, status);
            MPI_Test, PMPI_Test (request: *mut c_void, flag: *mut c_int, status: *mut c_void) => test [status] (request, flag, status);
            MPI_Waitany, PMPI_Waitany (count: c_int, requests: *mut c_void, index: *mut c_int, status: *mut c_void)
                => waitany [status] (count, requests, index, status);
            MPI_Testany, PMPI_Testany (count: c_int, requests: *mut c_void, index: *mut c_int, flag: *mut c_int, status: *mut c_void)
                => testany [status] (count, requests, index, flag, status);
            MPI_Waitall, PMPI_Waitall (count: c_int, requests: *mut c_void, statuses: *mut c_void)
                => waitall [statuses] (count, requests, statuses);
            MPI_Testall, PMPI_Testall (count: c_int, requests: *mut c_void, flag: *mut c_int, statuses: *mut c_void)
                => testall [statuses] (count, requests, flag, statuses);
            MPI_Waitsome, PMPI_Waitsome (incount: c_int, requests: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void)
                => some [statuses] (incount, requests, outcount, indices, statuses);
            MPI_Testsome, PMPI_Testsome (incount: c_int, requests: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void)
                => some [statuses] (incount, requests, outcount, indices, statuses);
            MPI_Request_get_status, PMPI_Request_get_status (request: Handle, flag: *mut c_int, status: *mut c_void)
                => request_get_status [status] (request, flag, status);
            MPI_Request_free, PMPI_Request_free (request: *mut c_void) => request_free [] (request);
        }
    };
}
