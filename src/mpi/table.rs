//! The one table of interposed MPI functions.
//!
//! Each line names the C entry point and its profiling twin, the C signature (handles as opaque
//! machine words, buffers and statuses as `void*`), and how the call is served:
//!
//! ```text
//! NAME, PNAME [or BASE, PBASE [via FAMILY]] [starts START] [fortran(stem, STEM[, ts])] (args) => handler [closure params] (handler args);
//! ```
//!
//! The handler (in `p2p.rs`, `lifecycle.rs`, ...) receives the handler args and a closure that
//! calls the real function; the closure's parameters replace the arguments of the same name, so
//! the handler can substitute a staging buffer or its own status. The real function is the
//! library's, or, where the library lacks it, one `compat` builds from what it has: `or BASE,
//! PBASE` names the int-count function that serves a large-count `_c` function, `via FAMILY`
//! the function of `compat/narrow.rs` that narrows its count arrays, and `starts START` the
//! nonblocking collective that each start of a persistent one posts. `fortran(stem, STEM)` gives
//! the function Fortran entry points (`mpi_stem_`, `MPI_STEM`, `mpi_stem_f08_`, ...; `ts` where
//! MPICH's `mpi_f08` passes its buffers as array descriptors; `all` or `neighbor` says how long
//! a `w` collective's datatype arrays are), whose arguments are converted by their names
//! (`fortran/args.rs`). `export.rs` expands the table into `#[no_mangle]` entry
//! points, `fortran/mod.rs` into the Fortran ones and `real.rs` into the table of real function
//! pointers, so a new function is one line here.

/// Calls `$expand!` with the whole table.
#[macro_export]
#[doc(hidden)]
macro_rules! mpi_functions {
    ($expand:ident) => {
        $expand! {
            // Life cycle: note the rank, release CUDA resources, print statistics.
            MPI_Init, PMPI_Init (argc: *mut c_int, argv: *mut c_void) => init [] (argc, argv);
            MPI_Init_thread, PMPI_Init_thread (argc: *mut c_int, argv: *mut c_void, required: c_int, provided: *mut c_int) => init_thread [required] (required);
            MPI_Finalize, PMPI_Finalize () => finalize [] ();

            // CUDA support queries answer for the shim, not for the MPI below it.
            MPIX_Query_cuda_support, PMPIX_Query_cuda_support () => query_cuda_support [] ();
            MPIX_GPU_query_support, PMPIX_GPU_query_support (gpu_type: c_int, is_supported: *mut c_int)
                => gpu_query_support [] (gpu_type, is_supported);
            // MPICH's stream-ordered calls, served by cudampi on every library (`streams`).
            MPIX_Stream_create, PMPIX_Stream_create (info: Handle, stream: *mut c_int) => stream_create [] (info, stream);
            MPIX_Stream_free, PMPIX_Stream_free (stream: *mut c_int) => stream_free [] (stream);
            MPIX_Stream_comm_create, PMPIX_Stream_comm_create (comm: Handle, stream: c_int, newcomm: *mut c_void) => stream_comm_create [] (comm, stream, newcomm);
            MPIX_Info_set_hex, PMPIX_Info_set_hex (info: Handle, key: *const c_void, value: *const c_void, value_size: c_int)
                => info_set_hex [] (info, key, value, value_size);
            MPIX_Send_enqueue, PMPIX_Send_enqueue (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send_enqueue [] (buf, count, datatype, dest, tag, comm, None);
            MPIX_Isend_enqueue, PMPIX_Isend_enqueue (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => send_enqueue [] (buf, count, datatype, dest, tag, comm, Some(request));
            MPIX_Recv_enqueue, PMPIX_Recv_enqueue (buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status: *mut c_void)
                => recv_enqueue [] (buf, count, datatype, source, tag, comm, status, None);
            MPIX_Irecv_enqueue, PMPIX_Irecv_enqueue (buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => recv_enqueue [] (buf, count, datatype, source, tag, comm, std::ptr::null_mut(), Some(request));
            MPIX_Wait_enqueue, PMPIX_Wait_enqueue (request: *mut c_void, status: *mut c_void) => wait_enqueue [] (1, request, status, false);
            MPIX_Waitall_enqueue, PMPIX_Waitall_enqueue (count: c_int, array_of_requests: *mut c_void, array_of_statuses: *mut c_void)
                => wait_enqueue [] (count, array_of_requests, array_of_statuses, true);
            MPIX_Allreduce_enqueue, PMPIX_Allreduce_enqueue (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle)
                => allreduce_enqueue [] (sendbuf, recvbuf, count, datatype, op, comm);
            // MPI 4.1's `mpi_memory_alloc_kinds` lists the CUDA kinds too (lifecycle.rs; on
            // MPI_INFO_ENV from MPI_Init).
            MPI_Comm_get_info, PMPI_Comm_get_info (comm: Handle, info_used: *mut c_void) => get_info [] (info_used);
            MPI_Win_get_info, PMPI_Win_get_info (win: Handle, info_used: *mut c_void) => get_info [] (info_used);
            MPI_File_get_info, PMPI_File_get_info (fh: Handle, info_used: *mut c_void) => get_info [] (info_used);
            // MPI_INFO_ENV is read-only (MPICH 5 refuses MPI_Info_set on it): these read a copy
            // that lists the CUDA kinds instead (lifecycle.rs).
            MPI_Info_get, PMPI_Info_get (info: Handle, key: *const c_void, valuelen: c_int, value: *mut c_void, flag: *mut c_int)
                => info_env [info] (info);
            MPI_Info_get_string, PMPI_Info_get_string (info: Handle, key: *const c_void, buflen: *mut c_int, value: *mut c_void, flag: *mut c_int)
                => info_env [info] (info);
            MPI_Info_get_valuelen, PMPI_Info_get_valuelen (info: Handle, key: *const c_void, valuelen: *mut c_int, flag: *mut c_int)
                => info_env [info] (info);
            MPI_Info_get_nkeys, PMPI_Info_get_nkeys (info: Handle, nkeys: *mut c_int) => info_env [info] (info);
            MPI_Info_get_nthkey, PMPI_Info_get_nthkey (info: Handle, n: c_int, key: *mut c_void) => info_env [info] (info);
            MPI_Info_dup, PMPI_Info_dup (info: Handle, newinfo: *mut c_void) => info_env [info] (info);

            // Blocking point-to-point.
            MPI_Send, PMPI_Send fortran(send, SEND, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf, count, datatype] (buf, count as i64, datatype, dest, tag, comm);
            MPI_Ssend, PMPI_Ssend fortran(ssend, SSEND, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf, count, datatype] (buf, count as i64, datatype, dest, tag, comm);
            MPI_Bsend, PMPI_Bsend fortran(bsend, BSEND, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf, count, datatype] (buf, count as i64, datatype, dest, tag, comm);
            MPI_Rsend, PMPI_Rsend fortran(rsend, RSEND, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf, count, datatype] (buf, count as i64, datatype, dest, tag, comm);
            MPI_Recv, PMPI_Recv fortran(recv, RECV, ts) (buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status: *mut c_void)
                => recv [buf, count, datatype, status] (buf, count as i64, datatype, $crate::mpi::matching::Matching::Tag(source, tag, comm), status);
            MPI_Mrecv, PMPI_Mrecv fortran(mrecv, MRECV, ts) (buf: *mut c_void, count: c_int, datatype: Handle, message: *mut c_void, status: *mut c_void)
                => recv [buf, count, datatype, status] (buf, count as i64, datatype, $crate::mpi::matching::Matching::Message(message), status);
            MPI_Sendrecv, PMPI_Sendrecv fortran(sendrecv, SENDRECV, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, dest: c_int, sendtag: c_int,
                                         recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, source: c_int, recvtag: c_int,
                                         comm: Handle, status: *mut c_void)
                => sendrecv [sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, status] (sendbuf, sendcount as i64, sendtype, dest, recvbuf, recvcount as i64, recvtype, source, (sendtag, recvtag), comm, status);
            MPI_Sendrecv_replace, PMPI_Sendrecv_replace fortran(sendrecv_replace, SENDRECV_REPLACE, ts) (buf: *mut c_void, count: c_int, datatype: Handle, dest: c_int, sendtag: c_int,
                                                         source: c_int, recvtag: c_int, comm: Handle, status: *mut c_void)
                => sendrecv_replace [buf, count, datatype, status] (buf, count as i64, datatype, dest, source, (sendtag, recvtag), comm, status);

            // Probes report the true size of a message that crossed over CUDA IPC.
            MPI_Probe, PMPI_Probe (source: c_int, tag: c_int, comm: Handle, status: *mut c_void)
                => probe [status] (source, tag, comm, status);
            MPI_Iprobe, PMPI_Iprobe (source: c_int, tag: c_int, comm: Handle, flag: *mut c_int, status: *mut c_void)
                => iprobe [flag, status] (source, tag, comm, flag, status);
            MPI_Mprobe, PMPI_Mprobe (source: c_int, tag: c_int, comm: Handle, message: *mut c_void, status: *mut c_void)
                => mprobe [status] (source, tag, comm, message, status);
            MPI_Improbe, PMPI_Improbe (source: c_int, tag: c_int, comm: Handle, flag: *mut c_int, message: *mut c_void, status: *mut c_void)
                => improbe [flag, status] (source, tag, comm, flag, message, status);

            // MPI-4 large-count forms: the same calls with MPI_Count counts.
            MPI_Send_c, PMPI_Send_c or MPI_Send, PMPI_Send (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf, count, datatype] (buf, count, datatype, dest, tag, comm);
            MPI_Ssend_c, PMPI_Ssend_c or MPI_Ssend, PMPI_Ssend (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf, count, datatype] (buf, count, datatype, dest, tag, comm);
            MPI_Bsend_c, PMPI_Bsend_c or MPI_Bsend, PMPI_Bsend (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf, count, datatype] (buf, count, datatype, dest, tag, comm);
            MPI_Rsend_c, PMPI_Rsend_c or MPI_Rsend, PMPI_Rsend (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle)
                => send [buf, count, datatype] (buf, count, datatype, dest, tag, comm);
            MPI_Recv_c, PMPI_Recv_c or MPI_Recv, PMPI_Recv (buf: *mut c_void, count: i64, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status: *mut c_void)
                => recv [buf, count, datatype, status] (buf, count, datatype, $crate::mpi::matching::Matching::Tag(source, tag, comm), status);
            MPI_Mrecv_c, PMPI_Mrecv_c or MPI_Mrecv, PMPI_Mrecv (buf: *mut c_void, count: i64, datatype: Handle, message: *mut c_void, status: *mut c_void)
                => recv [buf, count, datatype, status] (buf, count, datatype, $crate::mpi::matching::Matching::Message(message), status);
            MPI_Sendrecv_c, PMPI_Sendrecv_c or MPI_Sendrecv, PMPI_Sendrecv (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, dest: c_int, sendtag: c_int,
                                             recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, source: c_int, recvtag: c_int,
                                             comm: Handle, status: *mut c_void)
                => sendrecv [sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, status] (sendbuf, sendcount, sendtype, dest, recvbuf, recvcount, recvtype, source, (sendtag, recvtag), comm, status);
            MPI_Sendrecv_replace_c, PMPI_Sendrecv_replace_c or MPI_Sendrecv_replace, PMPI_Sendrecv_replace (buf: *mut c_void, count: i64, datatype: Handle, dest: c_int, sendtag: c_int,
                                                             source: c_int, recvtag: c_int, comm: Handle, status: *mut c_void)
                => sendrecv_replace [buf, count, datatype, status] (buf, count, datatype, dest, source, (sendtag, recvtag), comm, status);

            // Nonblocking point-to-point: staged buffers live in the request table until completion.
            MPI_Isend, PMPI_Isend fortran(isend, ISEND, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf, count, datatype] (buf, count as i64, datatype, dest, tag, comm, request);
            MPI_Issend, PMPI_Issend fortran(issend, ISSEND, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf, count, datatype] (buf, count as i64, datatype, dest, tag, comm, request);
            MPI_Ibsend, PMPI_Ibsend fortran(ibsend, IBSEND, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf, count, datatype] (buf, count as i64, datatype, dest, tag, comm, request);
            MPI_Irsend, PMPI_Irsend fortran(irsend, IRSEND, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf, count, datatype] (buf, count as i64, datatype, dest, tag, comm, request);
            MPI_Irecv, PMPI_Irecv fortran(irecv, IRECV, ts) (buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => irecv [buf, count, datatype] (buf, count as i64, datatype, $crate::mpi::matching::Matching::Tag(source, tag, comm), request);
            MPI_Imrecv, PMPI_Imrecv fortran(imrecv, IMRECV, ts) (buf: *mut c_void, count: c_int, datatype: Handle, message: *mut c_void, request: *mut c_void)
                => irecv [buf, count, datatype] (buf, count as i64, datatype, $crate::mpi::matching::Matching::Message(message), request);
            MPI_Isendrecv, PMPI_Isendrecv fortran(isendrecv, ISENDRECV, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, dest: c_int, sendtag: c_int,
                                           recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, source: c_int, recvtag: c_int,
                                           comm: Handle, request: *mut c_void)
                => isendrecv [sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype] (sendbuf, sendcount as i64, sendtype, dest, recvbuf, recvcount as i64, recvtype, source, (sendtag, recvtag), comm, request);
            MPI_Isendrecv_replace, PMPI_Isendrecv_replace fortran(isendrecv_replace, ISENDRECV_REPLACE, ts) (buf: *mut c_void, count: c_int, datatype: Handle, dest: c_int, sendtag: c_int,
                                                           source: c_int, recvtag: c_int, comm: Handle, request: *mut c_void)
                => isendrecv_replace [buf, count, datatype] (buf, count as i64, datatype, dest, source, (sendtag, recvtag), comm, request);
            MPI_Isend_c, PMPI_Isend_c or MPI_Isend, PMPI_Isend (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf, count, datatype] (buf, count, datatype, dest, tag, comm, request);
            MPI_Issend_c, PMPI_Issend_c or MPI_Issend, PMPI_Issend (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf, count, datatype] (buf, count, datatype, dest, tag, comm, request);
            MPI_Ibsend_c, PMPI_Ibsend_c or MPI_Ibsend, PMPI_Ibsend (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf, count, datatype] (buf, count, datatype, dest, tag, comm, request);
            MPI_Irsend_c, PMPI_Irsend_c or MPI_Irsend, PMPI_Irsend (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => isend [buf, count, datatype] (buf, count, datatype, dest, tag, comm, request);
            MPI_Irecv_c, PMPI_Irecv_c or MPI_Irecv, PMPI_Irecv (buf: *mut c_void, count: i64, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => irecv [buf, count, datatype] (buf, count, datatype, $crate::mpi::matching::Matching::Tag(source, tag, comm), request);
            MPI_Imrecv_c, PMPI_Imrecv_c or MPI_Imrecv, PMPI_Imrecv (buf: *mut c_void, count: i64, datatype: Handle, message: *mut c_void, request: *mut c_void)
                => irecv [buf, count, datatype] (buf, count, datatype, $crate::mpi::matching::Matching::Message(message), request);
            MPI_Isendrecv_c, PMPI_Isendrecv_c or MPI_Isendrecv, PMPI_Isendrecv (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, dest: c_int, sendtag: c_int,
                                               recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, source: c_int, recvtag: c_int,
                                               comm: Handle, request: *mut c_void)
                => isendrecv [sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype] (sendbuf, sendcount, sendtype, dest, recvbuf, recvcount, recvtype, source, (sendtag, recvtag), comm, request);
            MPI_Isendrecv_replace_c, PMPI_Isendrecv_replace_c or MPI_Isendrecv_replace, PMPI_Isendrecv_replace (buf: *mut c_void, count: i64, datatype: Handle, dest: c_int, sendtag: c_int,
                                                               source: c_int, recvtag: c_int, comm: Handle, request: *mut c_void)
                => isendrecv_replace [buf, count, datatype] (buf, count, datatype, dest, source, (sendtag, recvtag), comm, request);

            // Persistent point-to-point: staged at every start, copied back at every completion.
            MPI_Send_init, PMPI_Send_init fortran(send_init, SEND_INIT, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf as *mut c_void, count as i64, datatype, dest, tag, comm, request, true);
            MPI_Ssend_init, PMPI_Ssend_init fortran(ssend_init, SSEND_INIT, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf as *mut c_void, count as i64, datatype, dest, tag, comm, request, true);
            MPI_Bsend_init, PMPI_Bsend_init fortran(bsend_init, BSEND_INIT, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf as *mut c_void, count as i64, datatype, dest, tag, comm, request, true);
            MPI_Rsend_init, PMPI_Rsend_init fortran(rsend_init, RSEND_INIT, ts) (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf as *mut c_void, count as i64, datatype, dest, tag, comm, request, true);
            MPI_Recv_init, PMPI_Recv_init fortran(recv_init, RECV_INIT, ts) (buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf, count as i64, datatype, source, tag, comm, request, false);
            MPI_Send_init_c, PMPI_Send_init_c or MPI_Send_init, PMPI_Send_init (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf as *mut c_void, count, datatype, dest, tag, comm, request, true);
            MPI_Ssend_init_c, PMPI_Ssend_init_c or MPI_Ssend_init, PMPI_Ssend_init (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf as *mut c_void, count, datatype, dest, tag, comm, request, true);
            MPI_Bsend_init_c, PMPI_Bsend_init_c or MPI_Bsend_init, PMPI_Bsend_init (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf as *mut c_void, count, datatype, dest, tag, comm, request, true);
            MPI_Rsend_init_c, PMPI_Rsend_init_c or MPI_Rsend_init, PMPI_Rsend_init (buf: *const c_void, count: i64, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf as *mut c_void, count, datatype, dest, tag, comm, request, true);
            MPI_Recv_init_c, PMPI_Recv_init_c or MPI_Recv_init, PMPI_Recv_init (buf: *mut c_void, count: i64, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut c_void)
                => persistent_init [buf, count, datatype] (buf, count, datatype, source, tag, comm, request, false);

            // MPI-4 partitioned point-to-point: send partitions are staged as they are marked
            // ready, receive partitions copied back as they are seen to arrive.
            MPI_Psend_init, PMPI_Psend_init fortran(psend_init, PSEND_INIT, ts) (buf: *const c_void, partitions: c_int, count: i64, datatype: Handle, dest: c_int, tag: c_int,
                                             comm: Handle, info: Handle, request: *mut c_void)
                => partitioned_init [buf] (buf as *mut c_void, partitions, count, datatype, dest, comm, request, true);
            MPI_Precv_init, PMPI_Precv_init fortran(precv_init, PRECV_INIT, ts) (buf: *mut c_void, partitions: c_int, count: i64, datatype: Handle, source: c_int, tag: c_int,
                                             comm: Handle, info: Handle, request: *mut c_void)
                => partitioned_init [buf] (buf, partitions, count, datatype, source, comm, request, false);
            MPI_Pready, PMPI_Pready fortran(pready, PREADY) (partition: c_int, req: Handle) => pready [] (partition, req);
            MPI_Pready_range, PMPI_Pready_range fortran(pready_range, PREADY_RANGE) (partition_low: c_int, partition_high: c_int, req: Handle)
                => pready_range [] (partition_low, partition_high, req);
            MPI_Pready_list, PMPI_Pready_list fortran(pready_list, PREADY_LIST) (length: c_int, array_of_partitions: *const c_int, req: Handle)
                => pready_list [] (length, array_of_partitions, req);
            MPI_Parrived, PMPI_Parrived fortran(parrived, PARRIVED) (req: Handle, partition: c_int, flag: *mut c_int) => parrived [] (req, partition, flag);

            // Starting, completing, inspecting and freeing requests.
            MPI_Start, PMPI_Start fortran(start, START) (request: *mut c_void) => start [] (request);
            MPI_Startall, PMPI_Startall fortran(startall, STARTALL) (count: c_int, requests: *mut c_void) => startall [] (count, requests);
            MPI_Wait, PMPI_Wait fortran(wait, WAIT) (request: *mut c_void, status: *mut c_void) => wait [status] (request, status);
            MPI_Test, PMPI_Test fortran(test, TEST) (request: *mut c_void, flag: *mut c_int, status: *mut c_void) => test [status] (request, flag, status);
            MPI_Waitany, PMPI_Waitany fortran(waitany, WAITANY) (count: c_int, requests: *mut c_void, index: *mut c_int, status: *mut c_void)
                => waitany [status] (count, requests, index, status);
            MPI_Testany, PMPI_Testany fortran(testany, TESTANY) (count: c_int, requests: *mut c_void, index: *mut c_int, flag: *mut c_int, status: *mut c_void)
                => testany [status] (count, requests, index, flag, status);
            MPI_Waitall, PMPI_Waitall fortran(waitall, WAITALL) (count: c_int, requests: *mut c_void, statuses: *mut c_void)
                => waitall [statuses] (count, requests, statuses);
            MPI_Testall, PMPI_Testall fortran(testall, TESTALL) (count: c_int, requests: *mut c_void, flag: *mut c_int, statuses: *mut c_void)
                => testall [statuses] (count, requests, flag, statuses);
            MPI_Waitsome, PMPI_Waitsome fortran(waitsome, WAITSOME) (incount: c_int, requests: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void)
                => some [statuses] (incount, requests, outcount, indices, statuses);
            MPI_Testsome, PMPI_Testsome fortran(testsome, TESTSOME) (incount: c_int, requests: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void)
                => some [statuses] (incount, requests, outcount, indices, statuses);
            MPI_Request_get_status, PMPI_Request_get_status fortran(request_get_status, REQUEST_GET_STATUS) (req: Handle, flag: *mut c_int, status: *mut c_void)
                => request_get_status [status] (req, flag, status);
            MPI_Request_get_status_any, PMPI_Request_get_status_any fortran(request_get_status_any, REQUEST_GET_STATUS_ANY) (count: c_int, requests: *mut c_void, index: *mut c_int, flag: *mut c_int, status: *mut c_void)
                => request_get_status_any [status] (count, requests, index, flag, status);
            MPI_Request_get_status_all, PMPI_Request_get_status_all fortran(request_get_status_all, REQUEST_GET_STATUS_ALL) (count: c_int, requests: *mut c_void, flag: *mut c_int, statuses: *mut c_void)
                => request_get_status_all [statuses] (count, requests, flag, statuses);
            MPI_Request_get_status_some, PMPI_Request_get_status_some fortran(request_get_status_some, REQUEST_GET_STATUS_SOME) (incount: c_int, requests: *mut c_void, outcount: *mut c_int, indices: *mut c_int, statuses: *mut c_void)
                => request_get_status_some [statuses] (incount, requests, outcount, indices, statuses);
            MPI_Request_free, PMPI_Request_free fortran(request_free, REQUEST_FREE) (request: *mut c_void) => request_free [] (request);

            // Packing and unpacking (datatypes chapter): the typed buffer is staged like a message
            // buffer, the packed one as the bytes from `position` on (packing.rs). The `_c` forms'
            // position is an MPI_Count*, narrowed by hand where the library lacks them; the
            // external32 forms keep MPI_Aint sizes and positions in both, and their `datarep`
            // string rides as a `void*`. MPI_Pack_size and its kin carry no buffer.
            MPI_Pack, PMPI_Pack fortran(pack, PACK, ts) (inbuf: *const c_void, incount: c_int, datatype: Handle, outbuf: *mut c_void, outsize: c_int, position: *mut c_int, comm: Handle)
                => pack [inbuf, incount, datatype, outbuf] (inbuf, incount as i64, datatype, outbuf, Pos::Int(position), Rep::Native(comm));
            MPI_Pack_c, PMPI_Pack_c or MPI_Pack, PMPI_Pack via pack (inbuf: *const c_void, incount: i64, datatype: Handle, outbuf: *mut c_void, outsize: i64, position: *mut i64, comm: Handle)
                => pack [inbuf, incount, datatype, outbuf] (inbuf, incount, datatype, outbuf, Pos::Wide(position), Rep::Native(comm));
            MPI_Unpack, PMPI_Unpack fortran(unpack, UNPACK, ts) (inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, count: c_int, datatype: Handle, comm: Handle)
                => unpack [inbuf, outbuf, count, datatype] (inbuf, insize as i64, Pos::Int(position), outbuf, count as i64, datatype, Rep::Native(comm));
            MPI_Unpack_c, PMPI_Unpack_c or MPI_Unpack, PMPI_Unpack via unpack (inbuf: *const c_void, insize: i64, position: *mut i64, outbuf: *mut c_void, count: i64, datatype: Handle, comm: Handle)
                => unpack [inbuf, outbuf, count, datatype] (inbuf, insize, Pos::Wide(position), outbuf, count, datatype, Rep::Native(comm));
            MPI_Pack_external, PMPI_Pack_external (datarep: *const c_void, inbuf: *const c_void, incount: c_int, datatype: Handle, outbuf: *mut c_void, outsize: i64, position: *mut i64)
                => pack [inbuf, incount, datatype, outbuf] (inbuf, incount as i64, datatype, outbuf, Pos::Wide(position), Rep::External);
            MPI_Pack_external_c, PMPI_Pack_external_c or MPI_Pack_external, PMPI_Pack_external via pack_external (datarep: *const c_void, inbuf: *const c_void, incount: i64, datatype: Handle, outbuf: *mut c_void, outsize: i64, position: *mut i64)
                => pack [inbuf, incount, datatype, outbuf] (inbuf, incount, datatype, outbuf, Pos::Wide(position), Rep::External);
            MPI_Unpack_external, PMPI_Unpack_external (datarep: *const c_void, inbuf: *const c_void, insize: i64, position: *mut i64, outbuf: *mut c_void, count: c_int, datatype: Handle)
                => unpack [inbuf, outbuf, count, datatype] (inbuf, insize, Pos::Wide(position), outbuf, count as i64, datatype, Rep::External);
            MPI_Unpack_external_c, PMPI_Unpack_external_c or MPI_Unpack_external, PMPI_Unpack_external via unpack_external (datarep: *const c_void, inbuf: *const c_void, insize: i64, position: *mut i64, outbuf: *mut c_void, count: i64, datatype: Handle)
                => unpack [inbuf, outbuf, count, datatype] (inbuf, insize, Pos::Wide(position), outbuf, count, datatype, Rep::External);
            // A freed datatype's strided blocks are forgotten (typemap.rs): MPI hands its handle out again.
            MPI_Type_free, PMPI_Type_free (datatype: *mut c_void) => type_free [] (datatype);

            // MPI-IO: every read and write of a file. Writes stage the device bytes before the
            // call; reads land in device memory when the call returns, when the request
            // completes, or at the split collective's `_end` (io.rs). Offsets are `Offset`, so
            // a `_c` form served by its int-count twin narrows only the count.
            // Explicit offsets.
            MPI_File_read_at, PMPI_File_read_at fortran(file_read_at, FILE_READ_AT, ts) (fh: Handle, offset: Offset, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count as i64, datatype, status);
            MPI_File_read_at_c, PMPI_File_read_at_c or MPI_File_read_at, PMPI_File_read_at (fh: Handle, offset: Offset, buf: *mut c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count, datatype, status);
            MPI_File_read_at_all, PMPI_File_read_at_all fortran(file_read_at_all, FILE_READ_AT_ALL, ts) (fh: Handle, offset: Offset, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count as i64, datatype, status);
            MPI_File_read_at_all_c, PMPI_File_read_at_all_c or MPI_File_read_at_all, PMPI_File_read_at_all (fh: Handle, offset: Offset, buf: *mut c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count, datatype, status);
            MPI_File_write_at, PMPI_File_write_at fortran(file_write_at, FILE_WRITE_AT, ts) (fh: Handle, offset: Offset, buf: *const c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count as i64, datatype);
            MPI_File_write_at_c, PMPI_File_write_at_c or MPI_File_write_at, PMPI_File_write_at (fh: Handle, offset: Offset, buf: *const c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count, datatype);
            MPI_File_write_at_all, PMPI_File_write_at_all fortran(file_write_at_all, FILE_WRITE_AT_ALL, ts) (fh: Handle, offset: Offset, buf: *const c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count as i64, datatype);
            MPI_File_write_at_all_c, PMPI_File_write_at_all_c or MPI_File_write_at_all, PMPI_File_write_at_all (fh: Handle, offset: Offset, buf: *const c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count, datatype);
            MPI_File_iread_at, PMPI_File_iread_at fortran(file_iread_at, FILE_IREAD_AT, ts) (fh: Handle, offset: Offset, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iread_at_c, PMPI_File_iread_at_c or MPI_File_iread_at, PMPI_File_iread_at (fh: Handle, offset: Offset, buf: *mut c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count, datatype, request);
            MPI_File_iread_at_all, PMPI_File_iread_at_all fortran(file_iread_at_all, FILE_IREAD_AT_ALL, ts) (fh: Handle, offset: Offset, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iread_at_all_c, PMPI_File_iread_at_all_c or MPI_File_iread_at_all, PMPI_File_iread_at_all (fh: Handle, offset: Offset, buf: *mut c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count, datatype, request);
            MPI_File_iwrite_at, PMPI_File_iwrite_at fortran(file_iwrite_at, FILE_IWRITE_AT, ts) (fh: Handle, offset: Offset, buf: *const c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iwrite_at_c, PMPI_File_iwrite_at_c or MPI_File_iwrite_at, PMPI_File_iwrite_at (fh: Handle, offset: Offset, buf: *const c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count, datatype, request);
            MPI_File_iwrite_at_all, PMPI_File_iwrite_at_all fortran(file_iwrite_at_all, FILE_IWRITE_AT_ALL, ts) (fh: Handle, offset: Offset, buf: *const c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iwrite_at_all_c, PMPI_File_iwrite_at_all_c or MPI_File_iwrite_at_all, PMPI_File_iwrite_at_all (fh: Handle, offset: Offset, buf: *const c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count, datatype, request);
            // Individual file pointers.
            MPI_File_read, PMPI_File_read fortran(file_read, FILE_READ, ts) (fh: Handle, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count as i64, datatype, status);
            MPI_File_read_c, PMPI_File_read_c or MPI_File_read, PMPI_File_read (fh: Handle, buf: *mut c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count, datatype, status);
            MPI_File_read_all, PMPI_File_read_all fortran(file_read_all, FILE_READ_ALL, ts) (fh: Handle, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count as i64, datatype, status);
            MPI_File_read_all_c, PMPI_File_read_all_c or MPI_File_read_all, PMPI_File_read_all (fh: Handle, buf: *mut c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count, datatype, status);
            MPI_File_write, PMPI_File_write fortran(file_write, FILE_WRITE, ts) (fh: Handle, buf: *const c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count as i64, datatype);
            MPI_File_write_c, PMPI_File_write_c or MPI_File_write, PMPI_File_write (fh: Handle, buf: *const c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count, datatype);
            MPI_File_write_all, PMPI_File_write_all fortran(file_write_all, FILE_WRITE_ALL, ts) (fh: Handle, buf: *const c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count as i64, datatype);
            MPI_File_write_all_c, PMPI_File_write_all_c or MPI_File_write_all, PMPI_File_write_all (fh: Handle, buf: *const c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count, datatype);
            MPI_File_iread, PMPI_File_iread fortran(file_iread, FILE_IREAD, ts) (fh: Handle, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iread_c, PMPI_File_iread_c or MPI_File_iread, PMPI_File_iread (fh: Handle, buf: *mut c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count, datatype, request);
            MPI_File_iread_all, PMPI_File_iread_all fortran(file_iread_all, FILE_IREAD_ALL, ts) (fh: Handle, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iread_all_c, PMPI_File_iread_all_c or MPI_File_iread_all, PMPI_File_iread_all (fh: Handle, buf: *mut c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count, datatype, request);
            MPI_File_iwrite, PMPI_File_iwrite fortran(file_iwrite, FILE_IWRITE, ts) (fh: Handle, buf: *const c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iwrite_c, PMPI_File_iwrite_c or MPI_File_iwrite, PMPI_File_iwrite (fh: Handle, buf: *const c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count, datatype, request);
            MPI_File_iwrite_all, PMPI_File_iwrite_all fortran(file_iwrite_all, FILE_IWRITE_ALL, ts) (fh: Handle, buf: *const c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iwrite_all_c, PMPI_File_iwrite_all_c or MPI_File_iwrite_all, PMPI_File_iwrite_all (fh: Handle, buf: *const c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count, datatype, request);
            // Shared file pointer.
            MPI_File_read_shared, PMPI_File_read_shared fortran(file_read_shared, FILE_READ_SHARED, ts) (fh: Handle, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count as i64, datatype, status);
            MPI_File_read_shared_c, PMPI_File_read_shared_c or MPI_File_read_shared, PMPI_File_read_shared (fh: Handle, buf: *mut c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count, datatype, status);
            MPI_File_read_ordered, PMPI_File_read_ordered fortran(file_read_ordered, FILE_READ_ORDERED, ts) (fh: Handle, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count as i64, datatype, status);
            MPI_File_read_ordered_c, PMPI_File_read_ordered_c or MPI_File_read_ordered, PMPI_File_read_ordered (fh: Handle, buf: *mut c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_read [buf, status] (fh, buf, count, datatype, status);
            MPI_File_write_shared, PMPI_File_write_shared fortran(file_write_shared, FILE_WRITE_SHARED, ts) (fh: Handle, buf: *const c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count as i64, datatype);
            MPI_File_write_shared_c, PMPI_File_write_shared_c or MPI_File_write_shared, PMPI_File_write_shared (fh: Handle, buf: *const c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count, datatype);
            MPI_File_write_ordered, PMPI_File_write_ordered fortran(file_write_ordered, FILE_WRITE_ORDERED, ts) (fh: Handle, buf: *const c_void, count: c_int, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count as i64, datatype);
            MPI_File_write_ordered_c, PMPI_File_write_ordered_c or MPI_File_write_ordered, PMPI_File_write_ordered (fh: Handle, buf: *const c_void, count: i64, datatype: Handle, status: *mut c_void)
                => file_write [buf] (fh, buf, count, datatype);
            MPI_File_iread_shared, PMPI_File_iread_shared fortran(file_iread_shared, FILE_IREAD_SHARED, ts) (fh: Handle, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iread_shared_c, PMPI_File_iread_shared_c or MPI_File_iread_shared, PMPI_File_iread_shared (fh: Handle, buf: *mut c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iread [buf] (fh, buf, count, datatype, request);
            MPI_File_iwrite_shared, PMPI_File_iwrite_shared fortran(file_iwrite_shared, FILE_IWRITE_SHARED, ts) (fh: Handle, buf: *const c_void, count: c_int, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count as i64, datatype, request);
            MPI_File_iwrite_shared_c, PMPI_File_iwrite_shared_c or MPI_File_iwrite_shared, PMPI_File_iwrite_shared (fh: Handle, buf: *const c_void, count: i64, datatype: Handle, request: *mut c_void)
                => file_iwrite [buf] (fh, buf, count, datatype, request);
            // Split collectives: the `_begin`'s staging buffer waits for the `_end` of the same file.
            MPI_File_read_at_all_begin, PMPI_File_read_at_all_begin fortran(file_read_at_all_begin, FILE_READ_AT_ALL_BEGIN, ts) (fh: Handle, offset: Offset, buf: *mut c_void, count: c_int, datatype: Handle)
                => file_begin_read [buf] (fh, buf, count as i64, datatype);
            MPI_File_read_at_all_begin_c, PMPI_File_read_at_all_begin_c or MPI_File_read_at_all_begin, PMPI_File_read_at_all_begin (fh: Handle, offset: Offset, buf: *mut c_void, count: i64, datatype: Handle)
                => file_begin_read [buf] (fh, buf, count, datatype);
            MPI_File_read_at_all_end, PMPI_File_read_at_all_end fortran(file_read_at_all_end, FILE_READ_AT_ALL_END, ts) (fh: Handle, buf: *mut c_void, status: *mut c_void)
                => file_end_read [buf, status] (fh, buf, status);
            MPI_File_write_at_all_begin, PMPI_File_write_at_all_begin fortran(file_write_at_all_begin, FILE_WRITE_AT_ALL_BEGIN, ts) (fh: Handle, offset: Offset, buf: *const c_void, count: c_int, datatype: Handle)
                => file_begin_write [buf] (fh, buf, count as i64, datatype);
            MPI_File_write_at_all_begin_c, PMPI_File_write_at_all_begin_c or MPI_File_write_at_all_begin, PMPI_File_write_at_all_begin (fh: Handle, offset: Offset, buf: *const c_void, count: i64, datatype: Handle)
                => file_begin_write [buf] (fh, buf, count, datatype);
            MPI_File_write_at_all_end, PMPI_File_write_at_all_end fortran(file_write_at_all_end, FILE_WRITE_AT_ALL_END, ts) (fh: Handle, buf: *const c_void, status: *mut c_void)
                => file_end_write [buf] (fh, buf);
            MPI_File_read_all_begin, PMPI_File_read_all_begin fortran(file_read_all_begin, FILE_READ_ALL_BEGIN, ts) (fh: Handle, buf: *mut c_void, count: c_int, datatype: Handle)
                => file_begin_read [buf] (fh, buf, count as i64, datatype);
            MPI_File_read_all_begin_c, PMPI_File_read_all_begin_c or MPI_File_read_all_begin, PMPI_File_read_all_begin (fh: Handle, buf: *mut c_void, count: i64, datatype: Handle)
                => file_begin_read [buf] (fh, buf, count, datatype);
            MPI_File_read_all_end, PMPI_File_read_all_end fortran(file_read_all_end, FILE_READ_ALL_END, ts) (fh: Handle, buf: *mut c_void, status: *mut c_void)
                => file_end_read [buf, status] (fh, buf, status);
            MPI_File_write_all_begin, PMPI_File_write_all_begin fortran(file_write_all_begin, FILE_WRITE_ALL_BEGIN, ts) (fh: Handle, buf: *const c_void, count: c_int, datatype: Handle)
                => file_begin_write [buf] (fh, buf, count as i64, datatype);
            MPI_File_write_all_begin_c, PMPI_File_write_all_begin_c or MPI_File_write_all_begin, PMPI_File_write_all_begin (fh: Handle, buf: *const c_void, count: i64, datatype: Handle)
                => file_begin_write [buf] (fh, buf, count, datatype);
            MPI_File_write_all_end, PMPI_File_write_all_end fortran(file_write_all_end, FILE_WRITE_ALL_END, ts) (fh: Handle, buf: *const c_void, status: *mut c_void)
                => file_end_write [buf] (fh, buf);
            MPI_File_read_ordered_begin, PMPI_File_read_ordered_begin fortran(file_read_ordered_begin, FILE_READ_ORDERED_BEGIN, ts) (fh: Handle, buf: *mut c_void, count: c_int, datatype: Handle)
                => file_begin_read [buf] (fh, buf, count as i64, datatype);
            MPI_File_read_ordered_begin_c, PMPI_File_read_ordered_begin_c or MPI_File_read_ordered_begin, PMPI_File_read_ordered_begin (fh: Handle, buf: *mut c_void, count: i64, datatype: Handle)
                => file_begin_read [buf] (fh, buf, count, datatype);
            MPI_File_read_ordered_end, PMPI_File_read_ordered_end fortran(file_read_ordered_end, FILE_READ_ORDERED_END, ts) (fh: Handle, buf: *mut c_void, status: *mut c_void)
                => file_end_read [buf, status] (fh, buf, status);
            MPI_File_write_ordered_begin, PMPI_File_write_ordered_begin fortran(file_write_ordered_begin, FILE_WRITE_ORDERED_BEGIN, ts) (fh: Handle, buf: *const c_void, count: c_int, datatype: Handle)
                => file_begin_write [buf] (fh, buf, count as i64, datatype);
            MPI_File_write_ordered_begin_c, PMPI_File_write_ordered_begin_c or MPI_File_write_ordered_begin, PMPI_File_write_ordered_begin (fh: Handle, buf: *const c_void, count: i64, datatype: Handle)
                => file_begin_write [buf] (fh, buf, count, datatype);
            MPI_File_write_ordered_end, PMPI_File_write_ordered_end fortran(file_write_ordered_end, FILE_WRITE_ORDERED_END, ts) (fh: Handle, buf: *const c_void, status: *mut c_void)
                => file_end_write [buf] (fh, buf);

            // Collectives, blocking, nonblocking (MPI_I...) and persistent (MPI-4 ..._init),
            // each with its large-count form: `plan::` says which buffers this rank's call
            // reads and writes (collectives.rs).
            MPI_Bcast, PMPI_Bcast fortran(bcast, BCAST, ts) (buffer: *mut c_void, count: c_int, datatype: Handle, root: c_int, comm: Handle)
                => ncoll1 [buffer] (Some(comm), Mode::Blocking, buffer, || Job::Bcast { buf: buffer, count: count as i64, datatype, root }, || plan::bcast(comm, count as i64, datatype, root));
            MPI_Bcast_c, PMPI_Bcast_c or MPI_Bcast, PMPI_Bcast (buffer: *mut c_void, count: i64, datatype: Handle, root: c_int, comm: Handle)
                => ncoll1 [buffer] (Some(comm), Mode::Blocking, buffer, || Job::Bcast { buf: buffer, count, datatype, root }, || plan::bcast(comm, count, datatype, root));
            MPI_Ibcast, PMPI_Ibcast fortran(ibcast, IBCAST, ts) (buffer: *mut c_void, count: c_int, datatype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll1 [buffer] (Some(comm), Mode::Nonblocking(request), buffer, || Job::Bcast { buf: buffer, count: count as i64, datatype, root }, || plan::bcast(comm, count as i64, datatype, root));
            MPI_Ibcast_c, PMPI_Ibcast_c or MPI_Ibcast, PMPI_Ibcast (buffer: *mut c_void, count: i64, datatype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll1 [buffer] (Some(comm), Mode::Nonblocking(request), buffer, || Job::Bcast { buf: buffer, count, datatype, root }, || plan::bcast(comm, count, datatype, root));
            MPI_Bcast_init, PMPI_Bcast_init starts PMPI_Ibcast fortran(bcast_init, BCAST_INIT, ts) (buffer: *mut c_void, count: c_int, datatype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll1 [buffer] (Some(comm), Mode::Persistent(request), buffer, || Job::Bcast { buf: buffer, count: count as i64, datatype, root }, || plan::bcast(comm, count as i64, datatype, root));
            MPI_Bcast_init_c, PMPI_Bcast_init_c or MPI_Bcast_init, PMPI_Bcast_init (buffer: *mut c_void, count: i64, datatype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll1 [buffer] (Some(comm), Mode::Persistent(request), buffer, || Job::Bcast { buf: buffer, count, datatype, root }, || plan::bcast(comm, count, datatype, root));
            MPI_Reduce, PMPI_Reduce fortran(reduce, REDUCE, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Reduce { send: sendbuf, recv: recvbuf, count: count as i64, datatype, op, root }, || plan::reduce(comm, sendbuf, count as i64, datatype, root));
            MPI_Reduce_c, PMPI_Reduce_c or MPI_Reduce, PMPI_Reduce (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Reduce { send: sendbuf, recv: recvbuf, count, datatype, op, root }, || plan::reduce(comm, sendbuf, count, datatype, root));
            MPI_Ireduce, PMPI_Ireduce fortran(ireduce, IREDUCE, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Reduce { send: sendbuf, recv: recvbuf, count: count as i64, datatype, op, root }, || plan::reduce(comm, sendbuf, count as i64, datatype, root));
            MPI_Ireduce_c, PMPI_Ireduce_c or MPI_Ireduce, PMPI_Ireduce (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Reduce { send: sendbuf, recv: recvbuf, count, datatype, op, root }, || plan::reduce(comm, sendbuf, count, datatype, root));
            MPI_Reduce_init, PMPI_Reduce_init starts PMPI_Ireduce fortran(reduce_init, REDUCE_INIT, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Reduce { send: sendbuf, recv: recvbuf, count: count as i64, datatype, op, root }, || plan::reduce(comm, sendbuf, count as i64, datatype, root));
            MPI_Reduce_init_c, PMPI_Reduce_init_c or MPI_Reduce_init, PMPI_Reduce_init (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Reduce { send: sendbuf, recv: recvbuf, count, datatype, op, root }, || plan::reduce(comm, sendbuf, count, datatype, root));
            MPI_Allreduce, PMPI_Allreduce fortran(allreduce, ALLREDUCE, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Allreduce { send: sendbuf, recv: recvbuf, count: count as i64, datatype, op }, || plan::allreduce(sendbuf, count as i64, datatype));
            MPI_Allreduce_c, PMPI_Allreduce_c or MPI_Allreduce, PMPI_Allreduce (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Allreduce { send: sendbuf, recv: recvbuf, count, datatype, op }, || plan::allreduce(sendbuf, count, datatype));
            MPI_Iallreduce, PMPI_Iallreduce fortran(iallreduce, IALLREDUCE, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Allreduce { send: sendbuf, recv: recvbuf, count: count as i64, datatype, op }, || plan::allreduce(sendbuf, count as i64, datatype));
            MPI_Iallreduce_c, PMPI_Iallreduce_c or MPI_Iallreduce, PMPI_Iallreduce (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Allreduce { send: sendbuf, recv: recvbuf, count, datatype, op }, || plan::allreduce(sendbuf, count, datatype));
            MPI_Allreduce_init, PMPI_Allreduce_init starts PMPI_Iallreduce fortran(allreduce_init, ALLREDUCE_INIT, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Allreduce { send: sendbuf, recv: recvbuf, count: count as i64, datatype, op }, || plan::allreduce(sendbuf, count as i64, datatype));
            MPI_Allreduce_init_c, PMPI_Allreduce_init_c or MPI_Allreduce_init, PMPI_Allreduce_init (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Allreduce { send: sendbuf, recv: recvbuf, count, datatype, op }, || plan::allreduce(sendbuf, count, datatype));
            MPI_Reduce_local, PMPI_Reduce_local fortran(reduce_local, REDUCE_LOCAL, ts) (inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle)
                => coll [inbuf, inoutbuf] (None, Mode::Blocking, inbuf, inoutbuf, || Ok([plan::read(count as i64, datatype), plan::read_write(count as i64, datatype)]));
            MPI_Reduce_local_c, PMPI_Reduce_local_c or MPI_Reduce_local, PMPI_Reduce_local (inbuf: *const c_void, inoutbuf: *mut c_void, count: i64, datatype: Handle, op: Handle)
                => coll [inbuf, inoutbuf] (None, Mode::Blocking, inbuf, inoutbuf, || Ok([plan::read(count, datatype), plan::read_write(count, datatype)]));
            MPI_Gather, PMPI_Gather fortran(gather, GATHER, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, blocks: PerRank::Same(recvcount as i64), recvtype, root }, || plan::gather(comm, sendbuf, sendcount as i64, sendtype, Blocks::Same(recvcount as i64), recvtype, root));
            MPI_Gather_c, PMPI_Gather_c or MPI_Gather, PMPI_Gather (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount, sendtype, recv: recvbuf, blocks: PerRank::Same(recvcount), recvtype, root }, || plan::gather(comm, sendbuf, sendcount, sendtype, Blocks::Same(recvcount), recvtype, root));
            MPI_Igather, PMPI_Igather fortran(igather, IGATHER, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, blocks: PerRank::Same(recvcount as i64), recvtype, root }, || plan::gather(comm, sendbuf, sendcount as i64, sendtype, Blocks::Same(recvcount as i64), recvtype, root));
            MPI_Igather_c, PMPI_Igather_c or MPI_Igather, PMPI_Igather (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount, sendtype, recv: recvbuf, blocks: PerRank::Same(recvcount), recvtype, root }, || plan::gather(comm, sendbuf, sendcount, sendtype, Blocks::Same(recvcount), recvtype, root));
            MPI_Gather_init, PMPI_Gather_init starts PMPI_Igather fortran(gather_init, GATHER_INIT, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, blocks: PerRank::Same(recvcount as i64), recvtype, root }, || plan::gather(comm, sendbuf, sendcount as i64, sendtype, Blocks::Same(recvcount as i64), recvtype, root));
            MPI_Gather_init_c, PMPI_Gather_init_c or MPI_Gather_init, PMPI_Gather_init (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount, sendtype, recv: recvbuf, blocks: PerRank::Same(recvcount), recvtype, root }, || plan::gather(comm, sendbuf, sendcount, sendtype, Blocks::Same(recvcount), recvtype, root));
            MPI_Gatherv, PMPI_Gatherv fortran(gatherv, GATHERV, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, blocks: PerRank::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype, root }, || plan::gather(comm, sendbuf, sendcount as i64, sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype, root));
            MPI_Gatherv_c, PMPI_Gatherv_c or MPI_Gatherv, PMPI_Gatherv via gatherv (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const i64, recvtype: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount, sendtype, recv: recvbuf, blocks: PerRank::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype, root }, || plan::gather(comm, sendbuf, sendcount, sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype, root));
            MPI_Igatherv, PMPI_Igatherv fortran(igatherv, IGATHERV, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, blocks: PerRank::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype, root }, || plan::gather(comm, sendbuf, sendcount as i64, sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype, root));
            MPI_Igatherv_c, PMPI_Igatherv_c or MPI_Igatherv, PMPI_Igatherv via igatherv (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const i64, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount, sendtype, recv: recvbuf, blocks: PerRank::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype, root }, || plan::gather(comm, sendbuf, sendcount, sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype, root));
            MPI_Gatherv_init, PMPI_Gatherv_init starts PMPI_Igatherv fortran(gatherv_init, GATHERV_INIT, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, blocks: PerRank::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype, root }, || plan::gather(comm, sendbuf, sendcount as i64, sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype, root));
            MPI_Gatherv_init_c, PMPI_Gatherv_init_c starts PMPI_Igatherv_c (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const i64, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Gather { send: sendbuf, sendcount, sendtype, recv: recvbuf, blocks: PerRank::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype, root }, || plan::gather(comm, sendbuf, sendcount, sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype, root));
            MPI_Scatter, PMPI_Scatter fortran(scatter, SCATTER, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::Same(sendcount as i64), sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype, root }, || plan::scatter(comm, Blocks::Same(sendcount as i64), sendtype, recvbuf, recvcount as i64, recvtype, root));
            MPI_Scatter_c, PMPI_Scatter_c or MPI_Scatter, PMPI_Scatter (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::Same(sendcount), sendtype, recv: recvbuf, recvcount, recvtype, root }, || plan::scatter(comm, Blocks::Same(sendcount), sendtype, recvbuf, recvcount, recvtype, root));
            MPI_Iscatter, PMPI_Iscatter fortran(iscatter, ISCATTER, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::Same(sendcount as i64), sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype, root }, || plan::scatter(comm, Blocks::Same(sendcount as i64), sendtype, recvbuf, recvcount as i64, recvtype, root));
            MPI_Iscatter_c, PMPI_Iscatter_c or MPI_Iscatter, PMPI_Iscatter (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::Same(sendcount), sendtype, recv: recvbuf, recvcount, recvtype, root }, || plan::scatter(comm, Blocks::Same(sendcount), sendtype, recvbuf, recvcount, recvtype, root));
            MPI_Scatter_init, PMPI_Scatter_init starts PMPI_Iscatter fortran(scatter_init, SCATTER_INIT, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::Same(sendcount as i64), sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype, root }, || plan::scatter(comm, Blocks::Same(sendcount as i64), sendtype, recvbuf, recvcount as i64, recvtype, root));
            MPI_Scatter_init_c, PMPI_Scatter_init_c or MPI_Scatter_init, PMPI_Scatter_init (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::Same(sendcount), sendtype, recv: recvbuf, recvcount, recvtype, root }, || plan::scatter(comm, Blocks::Same(sendcount), sendtype, recvbuf, recvcount, recvtype, root));
            MPI_Scatterv, PMPI_Scatterv fortran(scatterv, SCATTERV, ts) (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::V(Ints::Int(sendcounts), Ints::Int(displs)), sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype, root }, || plan::scatter(comm, Blocks::V(Ints::Int(sendcounts), Ints::Int(displs)), sendtype, recvbuf, recvcount as i64, recvtype, root));
            MPI_Scatterv_c, PMPI_Scatterv_c or MPI_Scatterv, PMPI_Scatterv via scatterv (sendbuf: *const c_void, sendcounts: *const i64, displs: *const i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::V(Ints::Wide(sendcounts), Ints::Wide(displs)), sendtype, recv: recvbuf, recvcount, recvtype, root }, || plan::scatter(comm, Blocks::V(Ints::Wide(sendcounts), Ints::Wide(displs)), sendtype, recvbuf, recvcount, recvtype, root));
            MPI_Iscatterv, PMPI_Iscatterv fortran(iscatterv, ISCATTERV, ts) (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::V(Ints::Int(sendcounts), Ints::Int(displs)), sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype, root }, || plan::scatter(comm, Blocks::V(Ints::Int(sendcounts), Ints::Int(displs)), sendtype, recvbuf, recvcount as i64, recvtype, root));
            MPI_Iscatterv_c, PMPI_Iscatterv_c or MPI_Iscatterv, PMPI_Iscatterv via iscatterv (sendbuf: *const c_void, sendcounts: *const i64, displs: *const i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::V(Ints::Wide(sendcounts), Ints::Wide(displs)), sendtype, recv: recvbuf, recvcount, recvtype, root }, || plan::scatter(comm, Blocks::V(Ints::Wide(sendcounts), Ints::Wide(displs)), sendtype, recvbuf, recvcount, recvtype, root));
            MPI_Scatterv_init, PMPI_Scatterv_init starts PMPI_Iscatterv fortran(scatterv_init, SCATTERV_INIT, ts) (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::V(Ints::Int(sendcounts), Ints::Int(displs)), sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype, root }, || plan::scatter(comm, Blocks::V(Ints::Int(sendcounts), Ints::Int(displs)), sendtype, recvbuf, recvcount as i64, recvtype, root));
            MPI_Scatterv_init_c, PMPI_Scatterv_init_c starts PMPI_Iscatterv_c (sendbuf: *const c_void, sendcounts: *const i64, displs: *const i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Scatter { send: sendbuf, blocks: PerRank::V(Ints::Wide(sendcounts), Ints::Wide(displs)), sendtype, recv: recvbuf, recvcount, recvtype, root }, || plan::scatter(comm, Blocks::V(Ints::Wide(sendcounts), Ints::Wide(displs)), sendtype, recvbuf, recvcount, recvtype, root));
            MPI_Allgather, PMPI_Allgather fortran(allgather, ALLGATHER, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Allgather { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype }, || plan::allgather(comm, sendbuf, sendcount as i64, sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Allgather_c, PMPI_Allgather_c or MPI_Allgather, PMPI_Allgather (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Allgather { send: sendbuf, sendcount, sendtype, recv: recvbuf, recvcount, recvtype }, || plan::allgather(comm, sendbuf, sendcount, sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Iallgather, PMPI_Iallgather fortran(iallgather, IALLGATHER, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Allgather { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype }, || plan::allgather(comm, sendbuf, sendcount as i64, sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Iallgather_c, PMPI_Iallgather_c or MPI_Iallgather, PMPI_Iallgather (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Allgather { send: sendbuf, sendcount, sendtype, recv: recvbuf, recvcount, recvtype }, || plan::allgather(comm, sendbuf, sendcount, sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Allgather_init, PMPI_Allgather_init starts PMPI_Iallgather fortran(allgather_init, ALLGATHER_INIT, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Allgather { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype }, || plan::allgather(comm, sendbuf, sendcount as i64, sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Allgather_init_c, PMPI_Allgather_init_c or MPI_Allgather_init, PMPI_Allgather_init (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Allgather { send: sendbuf, sendcount, sendtype, recv: recvbuf, recvcount, recvtype }, || plan::allgather(comm, sendbuf, sendcount, sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Allgatherv, PMPI_Allgatherv fortran(allgatherv, ALLGATHERV, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Allgatherv { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, counts: Ints::Int(recvcounts), displs: Ints::Int(displs), recvtype }, || plan::allgather(comm, sendbuf, sendcount as i64, sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype));
            MPI_Allgatherv_c, PMPI_Allgatherv_c or MPI_Allgatherv, PMPI_Allgatherv via allgatherv (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Allgatherv { send: sendbuf, sendcount, sendtype, recv: recvbuf, counts: Ints::Wide(recvcounts), displs: Ints::Wide(displs), recvtype }, || plan::allgather(comm, sendbuf, sendcount, sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype));
            MPI_Iallgatherv, PMPI_Iallgatherv fortran(iallgatherv, IALLGATHERV, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Allgatherv { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, counts: Ints::Int(recvcounts), displs: Ints::Int(displs), recvtype }, || plan::allgather(comm, sendbuf, sendcount as i64, sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype));
            MPI_Iallgatherv_c, PMPI_Iallgatherv_c or MPI_Iallgatherv, PMPI_Iallgatherv via iallgatherv (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Allgatherv { send: sendbuf, sendcount, sendtype, recv: recvbuf, counts: Ints::Wide(recvcounts), displs: Ints::Wide(displs), recvtype }, || plan::allgather(comm, sendbuf, sendcount, sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype));
            MPI_Allgatherv_init, PMPI_Allgatherv_init starts PMPI_Iallgatherv fortran(allgatherv_init, ALLGATHERV_INIT, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Allgatherv { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, counts: Ints::Int(recvcounts), displs: Ints::Int(displs), recvtype }, || plan::allgather(comm, sendbuf, sendcount as i64, sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype));
            MPI_Allgatherv_init_c, PMPI_Allgatherv_init_c starts PMPI_Iallgatherv_c (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Allgatherv { send: sendbuf, sendcount, sendtype, recv: recvbuf, counts: Ints::Wide(recvcounts), displs: Ints::Wide(displs), recvtype }, || plan::allgather(comm, sendbuf, sendcount, sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype));
            MPI_Alltoall, PMPI_Alltoall fortran(alltoall, ALLTOALL, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Alltoall { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype }, || plan::alltoall(comm, sendbuf, Blocks::Same(sendcount as i64), sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Alltoall_c, PMPI_Alltoall_c or MPI_Alltoall, PMPI_Alltoall (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Alltoall { send: sendbuf, sendcount, sendtype, recv: recvbuf, recvcount, recvtype }, || plan::alltoall(comm, sendbuf, Blocks::Same(sendcount), sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Ialltoall, PMPI_Ialltoall fortran(ialltoall, IALLTOALL, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Alltoall { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype }, || plan::alltoall(comm, sendbuf, Blocks::Same(sendcount as i64), sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Ialltoall_c, PMPI_Ialltoall_c or MPI_Ialltoall, PMPI_Ialltoall (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Alltoall { send: sendbuf, sendcount, sendtype, recv: recvbuf, recvcount, recvtype }, || plan::alltoall(comm, sendbuf, Blocks::Same(sendcount), sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Alltoall_init, PMPI_Alltoall_init starts PMPI_Ialltoall fortran(alltoall_init, ALLTOALL_INIT, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Alltoall { send: sendbuf, sendcount: sendcount as i64, sendtype, recv: recvbuf, recvcount: recvcount as i64, recvtype }, || plan::alltoall(comm, sendbuf, Blocks::Same(sendcount as i64), sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Alltoall_init_c, PMPI_Alltoall_init_c or MPI_Alltoall_init, PMPI_Alltoall_init (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Alltoall { send: sendbuf, sendcount, sendtype, recv: recvbuf, recvcount, recvtype }, || plan::alltoall(comm, sendbuf, Blocks::Same(sendcount), sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Alltoallv, PMPI_Alltoallv fortran(alltoallv, ALLTOALLV, ts) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Alltoallv { send: sendbuf, sendcounts: Ints::Int(sendcounts), sdispls: Ints::Int(sdispls), sendtype, recv: recvbuf, recvcounts: Ints::Int(recvcounts), rdispls: Ints::Int(rdispls), recvtype }, || plan::alltoall(comm, sendbuf, Blocks::V(Ints::Int(sendcounts), Ints::Int(sdispls)), sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(rdispls)), recvtype));
            MPI_Alltoallv_c, PMPI_Alltoallv_c or MPI_Alltoallv, PMPI_Alltoallv via alltoallv (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::Alltoallv { send: sendbuf, sendcounts: Ints::Wide(sendcounts), sdispls: Ints::Wide(sdispls), sendtype, recv: recvbuf, recvcounts: Ints::Wide(recvcounts), rdispls: Ints::Wide(rdispls), recvtype }, || plan::alltoall(comm, sendbuf, Blocks::V(Ints::Wide(sendcounts), Ints::Wide(sdispls)), sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(rdispls)), recvtype));
            MPI_Ialltoallv, PMPI_Ialltoallv fortran(ialltoallv, IALLTOALLV, ts) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Alltoallv { send: sendbuf, sendcounts: Ints::Int(sendcounts), sdispls: Ints::Int(sdispls), sendtype, recv: recvbuf, recvcounts: Ints::Int(recvcounts), rdispls: Ints::Int(rdispls), recvtype }, || plan::alltoall(comm, sendbuf, Blocks::V(Ints::Int(sendcounts), Ints::Int(sdispls)), sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(rdispls)), recvtype));
            MPI_Ialltoallv_c, PMPI_Ialltoallv_c or MPI_Ialltoallv, PMPI_Ialltoallv via ialltoallv (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::Alltoallv { send: sendbuf, sendcounts: Ints::Wide(sendcounts), sdispls: Ints::Wide(sdispls), sendtype, recv: recvbuf, recvcounts: Ints::Wide(recvcounts), rdispls: Ints::Wide(rdispls), recvtype }, || plan::alltoall(comm, sendbuf, Blocks::V(Ints::Wide(sendcounts), Ints::Wide(sdispls)), sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(rdispls)), recvtype));
            MPI_Alltoallv_init, PMPI_Alltoallv_init starts PMPI_Ialltoallv fortran(alltoallv_init, ALLTOALLV_INIT, ts) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Alltoallv { send: sendbuf, sendcounts: Ints::Int(sendcounts), sdispls: Ints::Int(sdispls), sendtype, recv: recvbuf, recvcounts: Ints::Int(recvcounts), rdispls: Ints::Int(rdispls), recvtype }, || plan::alltoall(comm, sendbuf, Blocks::V(Ints::Int(sendcounts), Ints::Int(sdispls)), sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(rdispls)), recvtype));
            MPI_Alltoallv_init_c, PMPI_Alltoallv_init_c starts PMPI_Ialltoallv_c (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::Alltoallv { send: sendbuf, sendcounts: Ints::Wide(sendcounts), sdispls: Ints::Wide(sdispls), sendtype, recv: recvbuf, recvcounts: Ints::Wide(recvcounts), rdispls: Ints::Wide(rdispls), recvtype }, || plan::alltoall(comm, sendbuf, Blocks::V(Ints::Wide(sendcounts), Ints::Wide(sdispls)), sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(rdispls)), recvtype));
            MPI_Alltoallw, PMPI_Alltoallw fortran(alltoallw, ALLTOALLW, ts, all) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const c_void, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::alltoall(comm, sendbuf, Blocks::W(Ints::Int(sendcounts), Ints::Int(sdispls), sendtypes), 0, Blocks::W(Ints::Int(recvcounts), Ints::Int(rdispls), recvtypes), 0));
            MPI_Alltoallw_c, PMPI_Alltoallw_c or MPI_Alltoallw, PMPI_Alltoallw via alltoallw (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::alltoall(comm, sendbuf, Blocks::W(Ints::Wide(sendcounts), Ints::Wide(sdispls), sendtypes), 0, Blocks::W(Ints::Wide(recvcounts), Ints::Wide(rdispls), recvtypes), 0));
            MPI_Ialltoallw, PMPI_Ialltoallw fortran(ialltoallw, IALLTOALLW, ts, all) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const c_void, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::alltoall(comm, sendbuf, Blocks::W(Ints::Int(sendcounts), Ints::Int(sdispls), sendtypes), 0, Blocks::W(Ints::Int(recvcounts), Ints::Int(rdispls), recvtypes), 0));
            MPI_Ialltoallw_c, PMPI_Ialltoallw_c or MPI_Ialltoallw, PMPI_Ialltoallw via ialltoallw (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::alltoall(comm, sendbuf, Blocks::W(Ints::Wide(sendcounts), Ints::Wide(sdispls), sendtypes), 0, Blocks::W(Ints::Wide(recvcounts), Ints::Wide(rdispls), recvtypes), 0));
            MPI_Alltoallw_init, PMPI_Alltoallw_init starts PMPI_Ialltoallw fortran(alltoallw_init, ALLTOALLW_INIT, ts, all) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const c_void, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::alltoall(comm, sendbuf, Blocks::W(Ints::Int(sendcounts), Ints::Int(sdispls), sendtypes), 0, Blocks::W(Ints::Int(recvcounts), Ints::Int(rdispls), recvtypes), 0));
            MPI_Alltoallw_init_c, PMPI_Alltoallw_init_c starts PMPI_Ialltoallw_c (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::alltoall(comm, sendbuf, Blocks::W(Ints::Wide(sendcounts), Ints::Wide(sdispls), sendtypes), 0, Blocks::W(Ints::Wide(recvcounts), Ints::Wide(rdispls), recvtypes), 0));
            MPI_Reduce_scatter, PMPI_Reduce_scatter fortran(reduce_scatter, REDUCE_SCATTER, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Handle, op: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::ReduceScatter { send: sendbuf, recv: recvbuf, counts: Ints::Int(recvcounts), datatype, op }, || plan::reduce_scatter(comm, sendbuf, Ints::Int(recvcounts), datatype));
            MPI_Reduce_scatter_c, PMPI_Reduce_scatter_c or MPI_Reduce_scatter, PMPI_Reduce_scatter via reduce_scatter (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, datatype: Handle, op: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::ReduceScatter { send: sendbuf, recv: recvbuf, counts: Ints::Wide(recvcounts), datatype, op }, || plan::reduce_scatter(comm, sendbuf, Ints::Wide(recvcounts), datatype));
            MPI_Ireduce_scatter, PMPI_Ireduce_scatter fortran(ireduce_scatter, IREDUCE_SCATTER, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::ReduceScatter { send: sendbuf, recv: recvbuf, counts: Ints::Int(recvcounts), datatype, op }, || plan::reduce_scatter(comm, sendbuf, Ints::Int(recvcounts), datatype));
            MPI_Ireduce_scatter_c, PMPI_Ireduce_scatter_c or MPI_Ireduce_scatter, PMPI_Ireduce_scatter via ireduce_scatter (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::ReduceScatter { send: sendbuf, recv: recvbuf, counts: Ints::Wide(recvcounts), datatype, op }, || plan::reduce_scatter(comm, sendbuf, Ints::Wide(recvcounts), datatype));
            MPI_Reduce_scatter_init, PMPI_Reduce_scatter_init starts PMPI_Ireduce_scatter fortran(reduce_scatter_init, REDUCE_SCATTER_INIT, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::ReduceScatter { send: sendbuf, recv: recvbuf, counts: Ints::Int(recvcounts), datatype, op }, || plan::reduce_scatter(comm, sendbuf, Ints::Int(recvcounts), datatype));
            MPI_Reduce_scatter_init_c, PMPI_Reduce_scatter_init_c starts PMPI_Ireduce_scatter_c (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::ReduceScatter { send: sendbuf, recv: recvbuf, counts: Ints::Wide(recvcounts), datatype, op }, || plan::reduce_scatter(comm, sendbuf, Ints::Wide(recvcounts), datatype));
            MPI_Reduce_scatter_block, PMPI_Reduce_scatter_block fortran(reduce_scatter_block, REDUCE_SCATTER_BLOCK, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle, op: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::ReduceScatterBlock { send: sendbuf, recv: recvbuf, recvcount: recvcount as i64, datatype, op }, || plan::reduce_scatter_block(comm, sendbuf, recvcount as i64, datatype));
            MPI_Reduce_scatter_block_c, PMPI_Reduce_scatter_block_c or MPI_Reduce_scatter_block, PMPI_Reduce_scatter_block (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: i64, datatype: Handle, op: Handle, comm: Handle)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || Job::ReduceScatterBlock { send: sendbuf, recv: recvbuf, recvcount, datatype, op }, || plan::reduce_scatter_block(comm, sendbuf, recvcount, datatype));
            MPI_Ireduce_scatter_block, PMPI_Ireduce_scatter_block fortran(ireduce_scatter_block, IREDUCE_SCATTER_BLOCK, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::ReduceScatterBlock { send: sendbuf, recv: recvbuf, recvcount: recvcount as i64, datatype, op }, || plan::reduce_scatter_block(comm, sendbuf, recvcount as i64, datatype));
            MPI_Ireduce_scatter_block_c, PMPI_Ireduce_scatter_block_c or MPI_Ireduce_scatter_block, PMPI_Ireduce_scatter_block (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: i64, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || Job::ReduceScatterBlock { send: sendbuf, recv: recvbuf, recvcount, datatype, op }, || plan::reduce_scatter_block(comm, sendbuf, recvcount, datatype));
            MPI_Reduce_scatter_block_init, PMPI_Reduce_scatter_block_init starts PMPI_Ireduce_scatter_block fortran(reduce_scatter_block_init, REDUCE_SCATTER_BLOCK_INIT, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::ReduceScatterBlock { send: sendbuf, recv: recvbuf, recvcount: recvcount as i64, datatype, op }, || plan::reduce_scatter_block(comm, sendbuf, recvcount as i64, datatype));
            MPI_Reduce_scatter_block_init_c, PMPI_Reduce_scatter_block_init_c or MPI_Reduce_scatter_block_init, PMPI_Reduce_scatter_block_init (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: i64, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => ncoll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || Job::ReduceScatterBlock { send: sendbuf, recv: recvbuf, recvcount, datatype, op }, || plan::reduce_scatter_block(comm, sendbuf, recvcount, datatype));
            MPI_Scan, PMPI_Scan fortran(scan, SCAN, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::allreduce(sendbuf, count as i64, datatype));
            MPI_Scan_c, PMPI_Scan_c or MPI_Scan, PMPI_Scan (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::allreduce(sendbuf, count, datatype));
            MPI_Iscan, PMPI_Iscan fortran(iscan, ISCAN, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::allreduce(sendbuf, count as i64, datatype));
            MPI_Iscan_c, PMPI_Iscan_c or MPI_Iscan, PMPI_Iscan (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::allreduce(sendbuf, count, datatype));
            MPI_Scan_init, PMPI_Scan_init starts PMPI_Iscan fortran(scan_init, SCAN_INIT, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::allreduce(sendbuf, count as i64, datatype));
            MPI_Scan_init_c, PMPI_Scan_init_c or MPI_Scan_init, PMPI_Scan_init (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::allreduce(sendbuf, count, datatype));
            MPI_Exscan, PMPI_Exscan fortran(exscan, EXSCAN, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::exscan(comm, sendbuf, count as i64, datatype));
            MPI_Exscan_c, PMPI_Exscan_c or MPI_Exscan, PMPI_Exscan (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::exscan(comm, sendbuf, count, datatype));
            MPI_Iexscan, PMPI_Iexscan fortran(iexscan, IEXSCAN, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::exscan(comm, sendbuf, count as i64, datatype));
            MPI_Iexscan_c, PMPI_Iexscan_c or MPI_Iexscan, PMPI_Iexscan (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::exscan(comm, sendbuf, count, datatype));
            MPI_Exscan_init, PMPI_Exscan_init starts PMPI_Iexscan fortran(exscan_init, EXSCAN_INIT, ts) (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::exscan(comm, sendbuf, count as i64, datatype));
            MPI_Exscan_init_c, PMPI_Exscan_init_c or MPI_Exscan_init, PMPI_Exscan_init (sendbuf: *const c_void, recvbuf: *mut c_void, count: i64, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::exscan(comm, sendbuf, count, datatype));
            MPI_Neighbor_allgather, PMPI_Neighbor_allgather fortran(neighbor_allgather, NEIGHBOR_ALLGATHER, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount as i64, sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Neighbor_allgather_c, PMPI_Neighbor_allgather_c or MPI_Neighbor_allgather, PMPI_Neighbor_allgather (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount, sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Ineighbor_allgather, PMPI_Ineighbor_allgather fortran(ineighbor_allgather, INEIGHBOR_ALLGATHER, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount as i64, sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Ineighbor_allgather_c, PMPI_Ineighbor_allgather_c or MPI_Ineighbor_allgather, PMPI_Ineighbor_allgather (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount, sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Neighbor_allgather_init, PMPI_Neighbor_allgather_init starts PMPI_Ineighbor_allgather fortran(neighbor_allgather_init, NEIGHBOR_ALLGATHER_INIT, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount as i64, sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Neighbor_allgather_init_c, PMPI_Neighbor_allgather_init_c or MPI_Neighbor_allgather_init, PMPI_Neighbor_allgather_init (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount, sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Neighbor_allgatherv, PMPI_Neighbor_allgatherv fortran(neighbor_allgatherv, NEIGHBOR_ALLGATHERV, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount as i64, sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype));
            MPI_Neighbor_allgatherv_c, PMPI_Neighbor_allgatherv_c or MPI_Neighbor_allgatherv, PMPI_Neighbor_allgatherv via neighbor_allgatherv (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount, sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype));
            MPI_Ineighbor_allgatherv, PMPI_Ineighbor_allgatherv fortran(ineighbor_allgatherv, INEIGHBOR_ALLGATHERV, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount as i64, sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype));
            MPI_Ineighbor_allgatherv_c, PMPI_Ineighbor_allgatherv_c or MPI_Ineighbor_allgatherv, PMPI_Ineighbor_allgatherv via ineighbor_allgatherv (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount, sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype));
            MPI_Neighbor_allgatherv_init, PMPI_Neighbor_allgatherv_init starts PMPI_Ineighbor_allgatherv fortran(neighbor_allgatherv_init, NEIGHBOR_ALLGATHERV_INIT, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount as i64, sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(displs)), recvtype));
            MPI_Neighbor_allgatherv_init_c, PMPI_Neighbor_allgatherv_init_c starts PMPI_Ineighbor_allgatherv_c (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, displs: *const i64, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_allgather(comm, sendcount, sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(displs)), recvtype));
            MPI_Neighbor_alltoall, PMPI_Neighbor_alltoall fortran(neighbor_alltoall, NEIGHBOR_ALLTOALL, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::Same(sendcount as i64), sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Neighbor_alltoall_c, PMPI_Neighbor_alltoall_c or MPI_Neighbor_alltoall, PMPI_Neighbor_alltoall (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::Same(sendcount), sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Ineighbor_alltoall, PMPI_Ineighbor_alltoall fortran(ineighbor_alltoall, INEIGHBOR_ALLTOALL, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::Same(sendcount as i64), sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Ineighbor_alltoall_c, PMPI_Ineighbor_alltoall_c or MPI_Ineighbor_alltoall, PMPI_Ineighbor_alltoall (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::Same(sendcount), sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Neighbor_alltoall_init, PMPI_Neighbor_alltoall_init starts PMPI_Ineighbor_alltoall fortran(neighbor_alltoall_init, NEIGHBOR_ALLTOALL_INIT, ts) (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::Same(sendcount as i64), sendtype, Blocks::Same(recvcount as i64), recvtype));
            MPI_Neighbor_alltoall_init_c, PMPI_Neighbor_alltoall_init_c or MPI_Neighbor_alltoall_init, PMPI_Neighbor_alltoall_init (sendbuf: *const c_void, sendcount: i64, sendtype: Handle, recvbuf: *mut c_void, recvcount: i64, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::Same(sendcount), sendtype, Blocks::Same(recvcount), recvtype));
            MPI_Neighbor_alltoallv, PMPI_Neighbor_alltoallv fortran(neighbor_alltoallv, NEIGHBOR_ALLTOALLV, ts) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::V(Ints::Int(sendcounts), Ints::Int(sdispls)), sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(rdispls)), recvtype));
            MPI_Neighbor_alltoallv_c, PMPI_Neighbor_alltoallv_c or MPI_Neighbor_alltoallv, PMPI_Neighbor_alltoallv via neighbor_alltoallv (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::V(Ints::Wide(sendcounts), Ints::Wide(sdispls)), sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(rdispls)), recvtype));
            MPI_Ineighbor_alltoallv, PMPI_Ineighbor_alltoallv fortran(ineighbor_alltoallv, INEIGHBOR_ALLTOALLV, ts) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::V(Ints::Int(sendcounts), Ints::Int(sdispls)), sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(rdispls)), recvtype));
            MPI_Ineighbor_alltoallv_c, PMPI_Ineighbor_alltoallv_c or MPI_Ineighbor_alltoallv, PMPI_Ineighbor_alltoallv via ineighbor_alltoallv (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::V(Ints::Wide(sendcounts), Ints::Wide(sdispls)), sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(rdispls)), recvtype));
            MPI_Neighbor_alltoallv_init, PMPI_Neighbor_alltoallv_init starts PMPI_Ineighbor_alltoallv fortran(neighbor_alltoallv_init, NEIGHBOR_ALLTOALLV_INIT, ts) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::V(Ints::Int(sendcounts), Ints::Int(sdispls)), sendtype, Blocks::V(Ints::Int(recvcounts), Ints::Int(rdispls)), recvtype));
            MPI_Neighbor_alltoallv_init_c, PMPI_Neighbor_alltoallv_init_c starts PMPI_Ineighbor_alltoallv_c (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtype: Handle, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::V(Ints::Wide(sendcounts), Ints::Wide(sdispls)), sendtype, Blocks::V(Ints::Wide(recvcounts), Ints::Wide(rdispls)), recvtype));
            MPI_Neighbor_alltoallw, PMPI_Neighbor_alltoallw fortran(neighbor_alltoallw, NEIGHBOR_ALLTOALLW, ts, neighbor) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const i64, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const i64, recvtypes: *const c_void, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::W(Ints::Int(sendcounts), Ints::Wide(sdispls), sendtypes), 0, Blocks::W(Ints::Int(recvcounts), Ints::Wide(rdispls), recvtypes), 0));
            MPI_Neighbor_alltoallw_c, PMPI_Neighbor_alltoallw_c or MPI_Neighbor_alltoallw, PMPI_Neighbor_alltoallw via neighbor_alltoallw (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void, comm: Handle)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Blocking, sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::W(Ints::Wide(sendcounts), Ints::Wide(sdispls), sendtypes), 0, Blocks::W(Ints::Wide(recvcounts), Ints::Wide(rdispls), recvtypes), 0));
            MPI_Ineighbor_alltoallw, PMPI_Ineighbor_alltoallw fortran(ineighbor_alltoallw, INEIGHBOR_ALLTOALLW, ts, neighbor) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const i64, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const i64, recvtypes: *const c_void, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::W(Ints::Int(sendcounts), Ints::Wide(sdispls), sendtypes), 0, Blocks::W(Ints::Int(recvcounts), Ints::Wide(rdispls), recvtypes), 0));
            MPI_Ineighbor_alltoallw_c, PMPI_Ineighbor_alltoallw_c or MPI_Ineighbor_alltoallw, PMPI_Ineighbor_alltoallw via ineighbor_alltoallw (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void, comm: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Nonblocking(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::W(Ints::Wide(sendcounts), Ints::Wide(sdispls), sendtypes), 0, Blocks::W(Ints::Wide(recvcounts), Ints::Wide(rdispls), recvtypes), 0));
            MPI_Neighbor_alltoallw_init, PMPI_Neighbor_alltoallw_init starts PMPI_Ineighbor_alltoallw fortran(neighbor_alltoallw_init, NEIGHBOR_ALLTOALLW_INIT, ts, neighbor) (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const i64, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const i64, recvtypes: *const c_void, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::W(Ints::Int(sendcounts), Ints::Wide(sdispls), sendtypes), 0, Blocks::W(Ints::Int(recvcounts), Ints::Wide(rdispls), recvtypes), 0));
            MPI_Neighbor_alltoallw_init_c, PMPI_Neighbor_alltoallw_init_c starts PMPI_Ineighbor_alltoallw_c (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const i64, sendtypes: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64, rdispls: *const i64, recvtypes: *const c_void, comm: Handle, info: Handle, request: *mut c_void)
                => coll [sendbuf, recvbuf] (Some(comm), Mode::Persistent(request), sendbuf, recvbuf, || plan::neighbor_alltoall(comm, Blocks::W(Ints::Wide(sendcounts), Ints::Wide(sdispls), sendtypes), 0, Blocks::W(Ints::Wide(recvcounts), Ints::Wide(rdispls), recvtypes), 0));

            // One-sided communication (MPI-4.1 chapter 12): device origin, compare and result
            // buffers are staged until the operation completes at the origin (handlers/rma.rs).
            MPI_Put, PMPI_Put fortran(put, PUT, ts) (origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: Handle, win: Handle)
                => rma_put [origin_addr] ((origin_addr, origin_count as i64, origin_datatype), target_rank, (target_disp, target_count as i64, target_datatype), None, win, std::ptr::null_mut());
            MPI_Put_c, PMPI_Put_c or MPI_Put, PMPI_Put (origin_addr: *const c_void, origin_count: i64, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: Handle, win: Handle)
                => rma_put [origin_addr] ((origin_addr, origin_count, origin_datatype), target_rank, (target_disp, target_count, target_datatype), None, win, std::ptr::null_mut());
            MPI_Rput, PMPI_Rput fortran(rput, RPUT, ts) (origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: Handle, win: Handle, request: *mut c_void)
                => rma_put [origin_addr] ((origin_addr, origin_count as i64, origin_datatype), target_rank, (target_disp, target_count as i64, target_datatype), None, win, request);
            MPI_Rput_c, PMPI_Rput_c or MPI_Rput, PMPI_Rput (origin_addr: *const c_void, origin_count: i64, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: Handle, win: Handle, request: *mut c_void)
                => rma_put [origin_addr] ((origin_addr, origin_count, origin_datatype), target_rank, (target_disp, target_count, target_datatype), None, win, request);
            MPI_Get, PMPI_Get fortran(get, GET, ts) (origin_addr: *mut c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: Handle, win: Handle)
                => rma_get [origin_addr] ((origin_addr as *const c_void, origin_count as i64, origin_datatype), target_rank, (target_disp, target_count as i64, target_datatype), win, std::ptr::null_mut());
            MPI_Get_c, PMPI_Get_c or MPI_Get, PMPI_Get (origin_addr: *mut c_void, origin_count: i64, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: Handle, win: Handle)
                => rma_get [origin_addr] ((origin_addr as *const c_void, origin_count, origin_datatype), target_rank, (target_disp, target_count, target_datatype), win, std::ptr::null_mut());
            MPI_Rget, PMPI_Rget fortran(rget, RGET, ts) (origin_addr: *mut c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: Handle, win: Handle, request: *mut c_void)
                => rma_get [origin_addr] ((origin_addr as *const c_void, origin_count as i64, origin_datatype), target_rank, (target_disp, target_count as i64, target_datatype), win, request);
            MPI_Rget_c, PMPI_Rget_c or MPI_Rget, PMPI_Rget (origin_addr: *mut c_void, origin_count: i64, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: Handle, win: Handle, request: *mut c_void)
                => rma_get [origin_addr] ((origin_addr as *const c_void, origin_count, origin_datatype), target_rank, (target_disp, target_count, target_datatype), win, request);
            MPI_Accumulate, PMPI_Accumulate fortran(accumulate, ACCUMULATE, ts) (origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: Handle, op: Handle, win: Handle)
                => rma_put [origin_addr] ((origin_addr, origin_count as i64, origin_datatype), target_rank, (target_disp, target_count as i64, target_datatype), Some(op), win, std::ptr::null_mut());
            MPI_Accumulate_c, PMPI_Accumulate_c or MPI_Accumulate, PMPI_Accumulate (origin_addr: *const c_void, origin_count: i64, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: Handle, op: Handle, win: Handle)
                => rma_put [origin_addr] ((origin_addr, origin_count, origin_datatype), target_rank, (target_disp, target_count, target_datatype), Some(op), win, std::ptr::null_mut());
            MPI_Raccumulate, PMPI_Raccumulate fortran(raccumulate, RACCUMULATE, ts) (origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: Handle, op: Handle, win: Handle, request: *mut c_void)
                => rma_put [origin_addr] ((origin_addr, origin_count as i64, origin_datatype), target_rank, (target_disp, target_count as i64, target_datatype), Some(op), win, request);
            MPI_Raccumulate_c, PMPI_Raccumulate_c or MPI_Raccumulate, PMPI_Raccumulate (origin_addr: *const c_void, origin_count: i64, origin_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: Handle, op: Handle, win: Handle, request: *mut c_void)
                => rma_put [origin_addr] ((origin_addr, origin_count, origin_datatype), target_rank, (target_disp, target_count, target_datatype), Some(op), win, request);
            MPI_Get_accumulate, PMPI_Get_accumulate fortran(get_accumulate, GET_ACCUMULATE, ts) (origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, result_addr: *mut c_void, result_count: c_int, result_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: Handle, op: Handle, win: Handle)
                => rma_get_accumulate [origin_addr, result_addr] ((origin_addr, origin_count as i64, origin_datatype), (result_addr as *const c_void, result_count as i64, result_datatype), target_rank, (target_disp, target_count as i64, target_datatype), op, win, std::ptr::null_mut());
            MPI_Get_accumulate_c, PMPI_Get_accumulate_c or MPI_Get_accumulate, PMPI_Get_accumulate (origin_addr: *const c_void, origin_count: i64, origin_datatype: Handle, result_addr: *mut c_void, result_count: i64, result_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: Handle, op: Handle, win: Handle)
                => rma_get_accumulate [origin_addr, result_addr] ((origin_addr, origin_count, origin_datatype), (result_addr as *const c_void, result_count, result_datatype), target_rank, (target_disp, target_count, target_datatype), op, win, std::ptr::null_mut());
            MPI_Rget_accumulate, PMPI_Rget_accumulate fortran(rget_accumulate, RGET_ACCUMULATE, ts) (origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, result_addr: *mut c_void, result_count: c_int, result_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: c_int, target_datatype: Handle, op: Handle, win: Handle, request: *mut c_void)
                => rma_get_accumulate [origin_addr, result_addr] ((origin_addr, origin_count as i64, origin_datatype), (result_addr as *const c_void, result_count as i64, result_datatype), target_rank, (target_disp, target_count as i64, target_datatype), op, win, request);
            MPI_Rget_accumulate_c, PMPI_Rget_accumulate_c or MPI_Rget_accumulate, PMPI_Rget_accumulate (origin_addr: *const c_void, origin_count: i64, origin_datatype: Handle, result_addr: *mut c_void, result_count: i64, result_datatype: Handle, target_rank: c_int, target_disp: isize, target_count: i64, target_datatype: Handle, op: Handle, win: Handle, request: *mut c_void)
                => rma_get_accumulate [origin_addr, result_addr] ((origin_addr, origin_count, origin_datatype), (result_addr as *const c_void, result_count, result_datatype), target_rank, (target_disp, target_count, target_datatype), op, win, request);
            MPI_Fetch_and_op, PMPI_Fetch_and_op fortran(fetch_and_op, FETCH_AND_OP, ts) (origin_addr: *const c_void, result_addr: *mut c_void, datatype: Handle, target_rank: c_int, target_disp: isize, op: Handle, win: Handle)
                => rma_get_accumulate [origin_addr, result_addr] ((origin_addr, 1, datatype), (result_addr as *const c_void, 1, datatype), target_rank, (target_disp, 1, datatype), op, win, std::ptr::null_mut());
            MPI_Compare_and_swap, PMPI_Compare_and_swap fortran(compare_and_swap, COMPARE_AND_SWAP, ts) (origin_addr: *const c_void, compare_addr: *const c_void, result_addr: *mut c_void, datatype: Handle, target_rank: c_int, target_disp: isize, win: Handle)
                => rma_compare_and_swap [origin_addr, compare_addr, result_addr] (origin_addr, compare_addr, result_addr, datatype, target_rank, target_disp, win);

            // Windows over device memory get a host public copy, synchronised with the device
            // memory where MPI's separate model says (handlers/windows.rs); the completion calls
            // also complete the staged operations.
            MPI_Win_create, PMPI_Win_create fortran(win_create, WIN_CREATE, ts) (base: *mut c_void, size: isize, disp_unit: c_int, info: Handle, comm: Handle, win: *mut c_void)
                => win_create [base, size] (base, size, disp_unit as i64, comm, win);
            MPI_Win_create_c, PMPI_Win_create_c or MPI_Win_create, PMPI_Win_create (base: *mut c_void, size: isize, disp_unit: i64, info: Handle, comm: Handle, win: *mut c_void)
                => win_create [base, size] (base, size, disp_unit, comm, win);
            MPI_Win_create_dynamic, PMPI_Win_create_dynamic fortran(win_create_dynamic, WIN_CREATE_DYNAMIC) (info: Handle, comm: Handle, win: *mut c_void)
                => win_create_dynamic [] (comm, win);
            // Device memory attached to a dynamic window is served by its owner and named by
            // origins through MPI_Get_address's tagged address, or (CUDAMPI_RMA_RING=0) known to
            // the library, and to origins, by its public copy's address.
            MPI_Win_attach, PMPI_Win_attach fortran(win_attach, WIN_ATTACH, ts) (win: Handle, base: *mut c_void, size: isize) => win_attach [base] (win, base, size);
            MPI_Win_detach, PMPI_Win_detach fortran(win_detach, WIN_DETACH, ts) (win: Handle, base: *const c_void) => win_detach [base] (win, base);
            MPI_Get_address, PMPI_Get_address fortran(get_address, GET_ADDRESS, ts) (location: *const c_void, address: *mut isize) => get_address [] (location, address);
            MPI_Win_free, PMPI_Win_free fortran(win_free, WIN_FREE) (win: *mut c_void) => win_free [] (win);
            MPI_Win_fence, PMPI_Win_fence fortran(win_fence, WIN_FENCE) (assert: c_int, win: Handle) => win_fence [] (assert, win);
            MPI_Win_post, PMPI_Win_post fortran(win_post, WIN_POST) (group: Handle, assert: c_int, win: Handle) => win_post [] (group, assert, win);
            MPI_Win_start, PMPI_Win_start fortran(win_start, WIN_START) (group: Handle, assert: c_int, win: Handle) => win_start [] (group, assert, win);
            MPI_Win_complete, PMPI_Win_complete fortran(win_complete, WIN_COMPLETE) (win: Handle) => win_complete [] (win);
            MPI_Win_wait, PMPI_Win_wait fortran(win_wait, WIN_WAIT) (win: Handle) => win_wait [] (win);
            MPI_Win_test, PMPI_Win_test fortran(win_test, WIN_TEST) (win: Handle, flag: *mut c_int) => win_test [] (win, flag);
            MPI_Win_lock, PMPI_Win_lock fortran(win_lock, WIN_LOCK) (lock_type: c_int, rank: c_int, assert: c_int, win: Handle) => win_lock [] (Some((lock_type, rank)), assert, win);
            MPI_Win_lock_all, PMPI_Win_lock_all fortran(win_lock_all, WIN_LOCK_ALL) (assert: c_int, win: Handle) => win_lock [] (None, assert, win);
            MPI_Win_unlock, PMPI_Win_unlock fortran(win_unlock, WIN_UNLOCK) (rank: c_int, win: Handle) => win_unlock [] (Some(rank), win);
            MPI_Win_unlock_all, PMPI_Win_unlock_all fortran(win_unlock_all, WIN_UNLOCK_ALL) (win: Handle) => win_unlock [] (None, win);
            MPI_Win_flush, PMPI_Win_flush fortran(win_flush, WIN_FLUSH) (rank: c_int, win: Handle) => win_flush [] (Some(rank), win);
            MPI_Win_flush_all, PMPI_Win_flush_all fortran(win_flush_all, WIN_FLUSH_ALL) (win: Handle) => win_flush [] (None, win);
            MPI_Win_flush_local, PMPI_Win_flush_local fortran(win_flush_local, WIN_FLUSH_LOCAL) (rank: c_int, win: Handle) => win_flush [] (Some(rank), win);
            MPI_Win_flush_local_all, PMPI_Win_flush_local_all fortran(win_flush_local_all, WIN_FLUSH_LOCAL_ALL) (win: Handle) => win_flush [] (None, win);
            MPI_Win_sync, PMPI_Win_sync fortran(win_sync, WIN_SYNC) (win: Handle) => win_sync [] (win);
            // Fortran: only MPI_WIN_BASE and MPI_WIN_MODEL are served (args.rs Keyval).
            MPI_Win_get_attr, PMPI_Win_get_attr fortran(win_get_attr, WIN_GET_ATTR) (win: Handle, win_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int)
                => win_get_attr [] (win, win_keyval, attribute_val, flag);

        }
    };
}
