! cudampi-test: ranks=2 link=yes nccl=yes extra-src=tests/fortran/fhelp.c
! Array sections of device memory through `use mpi_f08` where the library takes them
! (MPI_SUBARRAYS_SUPPORTED: MPICH, whose mpi_f08 routines receive array descriptors). A
! contiguous 2-D array and a rank-2 contiguous section are served by cudampi's `_f08ts_` entry
! points from their base address; strided sections go to the library's routine, which describes
! them with a datatype and calls the C functions cudampi stages. Every received element is
! compared with the value sent, and elements outside a section must keep their poison. Elsewhere
! (Open MPI, MPI_SUBARRAYS_SUPPORTED false: the compiler packs sections on the host) it prints a
! note and passes.
program f08_sections
  use mpi_f08
  use iso_c_binding
  implicit none
  interface
    subroutine ft_after_init() bind(C)
    end subroutine
    type(c_ptr) function ft_alloc(device, bytes) bind(C)
      import
      integer(c_int), value :: device
      integer(c_size_t), value :: bytes
    end function
    subroutine ft_free(p) bind(C)
      import
      type(c_ptr), value :: p
    end subroutine
    subroutine ft_put(dst, src, n) bind(C)
      import
      type(c_ptr), value :: dst, src
      integer(c_size_t), value :: n
    end subroutine
    subroutine ft_get(dst, src, n) bind(C)
      import
      type(c_ptr), value :: dst, src
      integer(c_size_t), value :: n
    end subroutine
    integer(c_long_long) function ft_fortran_calls() bind(C)
      import
    end function
    integer(c_int) function ft_expect_served() bind(C)
      import
    end function
  end interface
  integer, parameter :: n = 64, poison = -7777
  integer :: rank, np, peer, failures, total, i, j
  integer, target :: h(n), want(n)
  integer, pointer, contiguous :: a(:), b(:), a2(:, :), b2(:, :)
  type(c_ptr) :: pa, pb
  type(MPI_Request) :: req(2)
  integer(c_long_long) :: served0

  call MPI_Init()
  call ft_after_init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, np)
  if (.not. MPI_SUBARRAYS_SUPPORTED) then
    if (rank == 0) print '(a)', 'PASS f_f08_sections (no MPI_SUBARRAYS_SUPPORTED: nothing to test)'
    call MPI_Finalize()
    stop
  end if
  peer = 1 - rank
  failures = 0
  pa = ft_alloc(1, int(4 * n, c_size_t))
  pb = ft_alloc(1, int(4 * n, c_size_t))
  call c_f_pointer(pa, a, [n])
  call c_f_pointer(pb, b, [n])
  call c_f_pointer(pa, a2, [8, n / 8])
  call c_f_pointer(pb, b2, [8, n / 8])
  served0 = ft_fortran_calls()

  ! a whole 2-D device array: a contiguous descriptor, served from its base address
  call fill(1)
  call poison_b()
  if (rank == 0) call MPI_Send(a2, n, MPI_INTEGER, peer, 1, MPI_COMM_WORLD)
  if (rank == 1) call MPI_Recv(b2, n, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  if (rank == 1) then
    want = expected(1, [(i, i = 1, n)])
    call check('2-D array', want)
  end if
  if (served0 >= 0 .and. ft_expect_served() /= 0 .and. ft_fortran_calls() == served0) &
    call fail('the contiguous 2-D array was not served by cudampi', 0)

  ! columns 2..3 of the 2-D array: a contiguous rank-2 section
  call fill(2)
  call poison_b()
  if (rank == 0) call MPI_Send(a2(:, 2:3), 16, MPI_INTEGER, peer, 2, MPI_COMM_WORLD)
  if (rank == 1) call MPI_Recv(b2(:, 5:6), 16, MPI_INTEGER, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  if (rank == 1) then
    want = poison
    want(33:48) = expected(2, [(i, i = 9, 24)])
    call check('contiguous columns', want)
  end if

  ! every second element into every third: strided sections, described by the library
  call fill(3)
  call poison_b()
  if (rank == 0) call MPI_Send(a(1:n:2), 20, MPI_INTEGER, peer, 3, MPI_COMM_WORLD)
  if (rank == 1) call MPI_Recv(b(2:n:3), 20, MPI_INTEGER, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  if (rank == 1) then
    want = poison
    do i = 1, 20
      want(2 + 3 * (i - 1)) = expected_of(0, 3, 1 + 2 * (i - 1))
    end do
    call check('strided sections', want)
  end if

  ! a row of the 2-D array (stride 8) both ways at once, nonblocking
  call fill(4)
  call poison_b()
  call MPI_Irecv(b2(3, :), n / 8, MPI_INTEGER, peer, 4, MPI_COMM_WORLD, req(1))
  call MPI_Isend(a2(5, :), n / 8, MPI_INTEGER, peer, 4, MPI_COMM_WORLD, req(2))
  call MPI_Waitall(2, req, MPI_STATUSES_IGNORE)
  want = poison
  do j = 1, n / 8
    want(3 + 8 * (j - 1)) = expected_of(peer, 4, 5 + 8 * (j - 1))
  end do
  call check('rows, Irecv/Isend/Waitall', want)

  ! broadcasts from a strided section into a contiguous one, around one between contiguous
  ! arrays: the library describes rank 0's section with a datatype of its own and calls the C
  ! function, cudampi serves rank 1's array; both reach the same agreement (mode nccl: the
  ! contiguous one runs on NCCL, the others are staged) and none waits for the other
  do j = 1, 3
    call fill(4 + j)
    call poison_b()
    if (j == 2) then
      if (rank == 0) call MPI_Bcast(a(1:20), 20, MPI_INTEGER, 0, MPI_COMM_WORLD)
      if (rank == 1) call MPI_Bcast(b(1:20), 20, MPI_INTEGER, 0, MPI_COMM_WORLD)
    else
      if (rank == 0) call MPI_Bcast(a(1:n:2), 20, MPI_INTEGER, 0, MPI_COMM_WORLD)
      if (rank == 1) call MPI_Bcast(b(1:20), 20, MPI_INTEGER, 0, MPI_COMM_WORLD)
    end if
    if (rank == 1) then
      want = poison
      if (j == 2) then
        want(1:20) = expected(4 + j, [(i, i = 1, 20)])
      else
        want(1:20) = expected(4 + j, [(1 + 2 * (i - 1), i = 1, 20)])
      end if
      call check('Bcast, section or array into an array', want)
    end if
  end do

  call ft_free(pa)
  call ft_free(pb)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0) then
    if (total == 0) then
      print '(a)', 'PASS f_f08_sections'
    else
      print '(a,i0,a)', 'FAIL f_f08_sections (', total, ' failed checks)'
    end if
  end if
  call MPI_Finalize()
  if (total /= 0) stop 1

contains

  integer elemental function expected_of(r, seed, i)
    integer, intent(in) :: r, seed, i
    expected_of = r * 100003 + seed * 1009 + i
  end function

  ! what rank 0 filled with `seed`, at the given positions
  function expected(seed, idx) result(v)
    integer, intent(in) :: seed, idx(:)
    integer :: v(size(idx))
    v = expected_of(0, seed, idx)
  end function

  subroutine fill(seed)
    integer, intent(in) :: seed
    h = expected_of(rank, seed, [(i, i = 1, n)])
    call ft_put(pa, c_loc(h), int(4 * n, c_size_t))
  end subroutine

  subroutine poison_b()
    h = poison
    call ft_put(pb, c_loc(h), int(4 * n, c_size_t))
  end subroutine

  subroutine check(what, w)
    character(len=*), intent(in) :: what
    integer, intent(in) :: w(n)
    call ft_get(c_loc(h), pb, int(4 * n, c_size_t))
    do i = 1, n
      if (h(i) /= w(i)) then
        print '(a,i0,a,a,a,i0,a,i0,a,i0)', 'FAIL rank ', rank, ': ', what, ' element ', i, ': ', h(i), ' expected ', w(i)
        failures = failures + 1
        return
      end if
    end do
  end subroutine

  subroutine fail(what, x)
    character(len=*), intent(in) :: what
    integer, intent(in) :: x
    failures = failures + 1
    print '(a,i0,a,a,a,i0)', 'FAIL rank ', rank, ': ', what, ' ', x
  end subroutine
end program
