"""Seed 003's exercise: the Mandelbrot set on several GPUs. Each rank computes a band of rows
on its own GPU; MPI_Gatherv collects the bands, in device memory, into rank 0's image. Rank 0
then computes the whole image alone with the same kernel and checks that both agree to the
pixel, and that known points are right (the centre of the main cardioid never escapes).

    scripts/cudampi-run -n 2 python3 examples/python/numba_mandelbrot.py
"""
import numpy as np
from mpi4py import MPI
from numba import cuda

from common import check, finish, local_rank

WIDTH, HEIGHT, MAX_ITER = 1024, 771, 256  # 771 rows: no rank count divides them evenly
X0, X1, Y0, Y1 = -2.0, 1.0, -1.25, 1.25


@cuda.jit
def mandel(first_row, image, max_iter):
    """Escape iteration of every pixel of the band that starts at image row first_row."""
    col, row = cuda.grid(2)
    if row < image.shape[0] and col < image.shape[1]:
        c_re = X0 + col * (X1 - X0) / WIDTH
        c_im = Y0 + (first_row + row) * (Y1 - Y0) / HEIGHT
        z_re, z_im = 0.0, 0.0
        n = 0
        while n < max_iter and z_re * z_re + z_im * z_im <= 4.0:
            z_re, z_im = z_re * z_re - z_im * z_im + c_re, 2.0 * z_re * z_im + c_im
            n += 1
        image[row, col] = n


def band(first_row, rows):
    image = cuda.device_array((rows, WIDTH), dtype=np.int32)
    threads = (16, 16)
    blocks = ((WIDTH + 15) // 16, (rows + 15) // 16)
    mandel[blocks, threads](first_row, image, MAX_ITER)
    return image


comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
cuda.select_device(local_rank() % len(cuda.gpus))

rows = [HEIGHT // size + (1 if r < HEIGHT % size else 0) for r in range(size)]
first = [sum(rows[:r]) for r in range(size)]
mine = band(first[rank], rows[rank])

if rank == 0:
    image = cuda.to_device(np.full((HEIGHT, WIDTH), -1, dtype=np.int32))
    counts = [r * WIDTH for r in rows]
    displs = [f * WIDTH for f in first]
    comm.Gatherv(mine, [image, counts, displs, MPI.INT32_T], root=0)
    gathered = image.copy_to_host()
    alone = band(0, HEIGHT).copy_to_host()
    check(np.array_equal(gathered, alone), "the gathered image differs from rank 0's own in %d pixels"
          % np.count_nonzero(gathered != alone))
    centre = (int((0.0 - Y0) / (Y1 - Y0) * HEIGHT), int((-0.25 - X0) / (X1 - X0) * WIDTH))
    check(gathered[centre] == MAX_ITER, "the point -0.25+0i escaped after %d iterations" % gathered[centre])
    check(gathered[0, 0] < 5, "the corner -2-1.25i stayed %d iterations" % gathered[0, 0])
    inside = np.count_nonzero(gathered == MAX_ITER) / gathered.size
    print("Mandelbrot %dx%d on %d GPU band(s): %.1f%% of the pixels inside" % (WIDTH, HEIGHT, size, 100 * inside))
else:
    comm.Gatherv(mine, None, root=0)
finish("numba_mandelbrot.py", "%d bands gathered with MPI_Gatherv in device memory equal the image computed alone" % size)
