set -o pipefail; C=/usr/local/cuda
gcc -O2 bench/copy_paths.c -I$C/include -L$C/lib64 -Wl,-rpath,$C/lib64 -lcuda -lcudart -o /tmp/cp && CUDA_VISIBLE_DEVICES=0 /tmp/cp -o $OUT/copy_paths.json | tee $OUT/copy_paths.txt
L=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}'); echo "libcuda: $L"; nm -D --undefined-only $L | grep -iE ' (mmap|mmap64|munmap|mremap|syscall)' | head
mpicc -O2 bench/pingpong.c -o /tmp/pp -I$C/include -L$C/lib64 -Wl,-rpath,$C/lib64 -lcudart -ldl -lm && mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_PRELOAD=$PWD/.gpu/run2/libcudampi.so /tmp/pp -m 8:1048576 -S 8,16k,64k -o $OUT/pp.json 2>&1 | tee $OUT/pp.txt | tail -30
