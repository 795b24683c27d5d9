! bench/overhead_f.F90 -- the Fortran twin of bench/overhead.c, through mpif.h: N calls of
! MPI_Send (8 bytes of a host array, MPI_PROC_NULL) and N of MPI_Irecv + MPI_Wait from
! MPI_PROC_NULL, for bench/callgrind.sh. Under cudampi these reach its Fortran entry points,
! which hand host buffers to the library's own routines.
!
!   overhead_f N
program overhead_f
  implicit none
  include 'mpif.h'
  integer :: ierr, req, buf(16), i
  integer(8) :: n, k
  character(len=32) :: arg
  call MPI_Init(ierr)
  n = 1000
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  buf = [(i, i = 1, 16)]
  do k = 1, n
    call MPI_Send(buf, 8, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, ierr)
    call MPI_Irecv(buf, 8, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, req, ierr)
    call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  end do
  call MPI_Finalize(ierr)
end program
