# Shared helpers for tests/mpi/setup.sh and tests/run-matrix.sh (sourced, not run).

# cudampi_run SECONDS LOG CMD...
# Runs CMD in a session of its own with a time limit, stdin from /dev/null, stdout and stderr
# into LOG. Returns CMD's exit status (124 when the time ran out; 128+N for a signal).
# Afterwards every process still alive in that session is killed by its id: a launcher that
# was killed can leave ranks behind (Open MPI 5 does), and they must not eat the next run's CPU.
cudampi_run() {
    local secs=$1 log=$2 pid rc left
    shift 2
    # The background child is not a process-group leader, so setsid(1) calls setsid() and
    # execs in place: its pid is the id of the new session.
    setsid timeout --kill-after=5 "$secs" "$@" >"$log" 2>&1 </dev/null &
    pid=$!
    wait "$pid"
    rc=$?
    left=$(ps -eo pid=,sid=,stat= | awk -v s="$pid" '$2 == s && $3 !~ /^Z/ { print $1 }')
    if [ -n "$left" ]; then
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null
        echo "cudampi-harness: killed leftover processes $(echo $left)" >>"$log"
    fi
    [ "$rc" = 124 ] && echo "cudampi-harness: timed out after ${secs}s" >>"$log"
    return "$rc"
}

# cudampi_clear_mpi_env: forget the variables that a build/mpi/<name>.env file sets, and an
# inherited OPAL_PREFIX & co. (they point one Open MPI at another's files). MCA parameters and
# CVARs the caller set on purpose are left alone.
cudampi_clear_mpi_env() {
    unset MPI_NAME MPI_FAMILY MPI_ABI MPI_VERSION MPICC MPIFORT MPIRUN MPI_LIBDIR MPI_LINK_LIB \
        MPI_ENV_FLAG MPI_PREFIX MPI_RUN_ENV OPAL_PREFIX PRTE_PREFIX PMIX_PREFIX
}
