/*
 * MPI_Allgather, MPI_Bcast and MPI_Alltoall timed exactly as hvd-bench times hvd's:
 * every iteration is barrier; t0; op; t1; the iteration's time is the slowest rank's;
 * the median over iterations is reported. Sizes follow hvd-bench (nccl-tests):
 *   allgather: size = the gathered result (each rank contributes size/np)
 *   broadcast: size bytes from rank 0
 *   alltoall:  size = each rank's send buffer (size/np to every rank)
 * Usage: mpi_collectives OP BYTES...   (OP: allgather | broadcast | alltoall)
 * Output: RES op bytes np iters median_us min_us max_us algbw_GBps busbw_GBps
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int iterations(size_t bytes) {
    if (bytes <= 65536) return 1000;
    if (bytes <= (1u << 20)) return 200;
    if (bytes <= (16u << 20)) return 30;
    if (bytes <= (64u << 20)) return 10;
    return 5;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: %s allgather|broadcast|alltoall BYTES...\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const char *op = argv[1];
    for (int a = 2; a < argc; a++) {
        size_t bytes = strtoull(argv[a], NULL, 10);
        size_t block = bytes / np;
        char *in = malloc(bytes + 64), *out = malloc(bytes + 64);
        if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 1);
        memset(in, rank, bytes);
        int iters = iterations(bytes);
        double *t = malloc(sizeof(double) * iters), *tmax = malloc(sizeof(double) * iters);
        double factor = 1.0;
        for (int it = -2; it < iters; it++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (!strcmp(op, "allgather")) {
                MPI_Allgather(in, (int)block, MPI_BYTE, out, (int)block, MPI_BYTE, MPI_COMM_WORLD);
                factor = (double)(np - 1) / np;
            } else if (!strcmp(op, "broadcast")) {
                MPI_Bcast(in, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
            } else if (!strcmp(op, "alltoall")) {
                MPI_Alltoall(in, (int)block, MPI_BYTE, out, (int)block, MPI_BYTE, MPI_COMM_WORLD);
                factor = (double)(np - 1) / np;
            } else {
                if (rank == 0) fprintf(stderr, "unknown op %s\n", op);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            if (it >= 0) t[it] = MPI_Wtime() - t0;
        }
        MPI_Reduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            qsort(tmax, iters, sizeof(double), cmp);
            size_t reported = !strcmp(op, "allgather") ? block * np : (!strcmp(op, "alltoall") ? block * np : bytes);
            double med = tmax[iters / 2], alg = reported / med / 1e9;
            printf("RES %s %zu %d %d %.2f %.2f %.2f %.4f %.4f\n", op, reported, np, iters, med * 1e6,
                   tmax[0] * 1e6, tmax[iters - 1] * 1e6, alg, alg * factor);
            fflush(stdout);
        }
        free(in); free(out); free(t); free(tmax);
    }
    MPI_Finalize();
    return 0;
}
