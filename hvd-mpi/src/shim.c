/* Values that MPI defines as C macros, which differ between MPI implementations
 * (MPI_IN_PLACE is (void *)1 in Open MPI and (void *)-1 in MPICH). */
#include <mpi.h>

void *hvd_mpi_in_place(void) { return MPI_IN_PLACE; }
