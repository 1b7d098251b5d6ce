/* The ABI check: compiled against the real cuda.h and nccl.h and linked against the
 * GPU test double, it calls every entry point hvd binds the way C code does (the _v2
 * names the headers' macros pick, ncclUniqueId by value, ncclConfig_t from
 * NCCL_CONFIG_INITIALIZER, CUmemcpyAttributes) and checks the results, so the double's
 * signatures are the real ones. Two ranks run as threads. Prints "ABI OK" on success. */
#define _DEFAULT_SOURCE
#include <cuda.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_CU(call)                                                              \
    do {                                                                            \
        CUresult r_ = (call);                                                       \
        if (r_ != CUDA_SUCCESS) {                                                   \
            const char *s_ = "?";                                                   \
            cuGetErrorString(r_, &s_);                                              \
            fprintf(stderr, "%s:%d: %s: %d (%s)\n", __FILE__, __LINE__, #call, r_, s_); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

#define EXPECT(cond, ...)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                         \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static ncclUniqueId id;

/* Waits until a non-blocking call has finished on `comm`; fails on an error. */
static void settle(ncclComm_t comm, ncclResult_t started, const char *what) {
    ncclResult_t state = started;
    while (state == ncclInProgress) {
        EXPECT(ncclCommGetAsyncError(comm, &state) == ncclSuccess, "%s: async error query", what);
        usleep(100);
    }
    EXPECT(state == ncclSuccess, "%s: %s (%s)", what, ncclGetErrorString(state), ncclGetLastError(comm));
}

/* Records an event on `stream` and waits for it by polling, as hvd does. */
static void wait_stream(CUstream stream) {
    CUevent event;
    CHECK_CU(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
    CHECK_CU(cuEventRecord(event, stream));
    CUresult r;
    while ((r = cuEventQuery(event)) == CUDA_ERROR_NOT_READY) usleep(100);
    CHECK_CU(r);
    CHECK_CU(cuEventDestroy(event));
}

static void use_device(CUcontext *ctx) {
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(ctx, dev));
    CHECK_CU(cuCtxSetCurrent(*ctx));
}

static void *rank_main(void *arg) {
    int rank = (int)(long)arg;
    CUcontext ctx;
    use_device(&ctx);
    CUstream stream;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm;
    ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, rank, &config);
    EXPECT(r == ncclInProgress || r == ncclSuccess, "init returned %d", r);
    settle(comm, r, "ncclCommInitRankConfig");
    int count = 0, me = -1, device = -1;
    EXPECT(ncclCommCount(comm, &count) == ncclSuccess && count == 2, "count %d", count);
    EXPECT(ncclCommUserRank(comm, &me) == ncclSuccess && me == rank, "rank %d", me);
    EXPECT(ncclCommCuDevice(comm, &device) == ncclSuccess && device == 0, "device %d", device);

    /* Average of floats: (1 + 2) / 2 per element. */
    float host[8];
    for (int i = 0; i < 8; i++) host[i] = (float)(rank + 1);
    CUdeviceptr buf;
    CHECK_CU(cuMemAlloc(&buf, sizeof host));
    CHECK_CU(cuMemcpyHtoDAsync(buf, host, sizeof host, stream));
    settle(comm, ncclAllReduce((void *)buf, (void *)buf, 8, ncclFloat32, ncclAvg, comm, stream), "avg");
    CHECK_CU(cuMemcpyDtoHAsync(host, buf, sizeof host, stream));
    wait_stream(stream);
    for (int i = 0; i < 8; i++) EXPECT(host[i] == 1.5f, "avg[%d] = %f", i, host[i]);

    /* A pre-multiplied sum with a double scalar in host memory: 0.25 * (3 + 3). */
    double values[2] = {3.0, 3.0}, scalar = 0.25;
    CUdeviceptr dbuf;
    CHECK_CU(cuMemAlloc(&dbuf, sizeof values));
    CHECK_CU(cuMemcpyHtoD(dbuf, values, sizeof values));
    ncclRedOp_t premul;
    EXPECT(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat64, ncclScalarHostImmediate, comm) == ncclSuccess,
           "premulsum: %s", ncclGetLastError(comm));
    settle(comm, ncclAllReduce((void *)dbuf, (void *)dbuf, 2, ncclFloat64, premul, comm, stream), "premulsum");
    EXPECT(ncclRedOpDestroy(premul, comm) == ncclSuccess, "ncclRedOpDestroy");
    CHECK_CU(cuMemcpyDtoHAsync(values, dbuf, sizeof values, stream));
    wait_stream(stream);
    EXPECT(values[0] == 1.5 && values[1] == 1.5, "premulsum %f %f", values[0], values[1]);

    /* Send to the other rank and receive from it in one group. */
    int mine = 100 + rank, theirs = -1;
    CUdeviceptr out, in;
    CHECK_CU(cuMemAlloc(&out, sizeof mine));
    CHECK_CU(cuMemAlloc(&in, sizeof theirs));
    CHECK_CU(cuMemcpyHtoD(out, &mine, sizeof mine));
    EXPECT(ncclGroupStart() == ncclSuccess, "group start");
    EXPECT(ncclSend((void *)out, 1, ncclInt32, 1 - rank, comm, stream) == ncclSuccess, "send");
    EXPECT(ncclRecv((void *)in, 1, ncclInt32, 1 - rank, comm, stream) == ncclSuccess, "recv");
    settle(comm, ncclGroupEnd(), "send/recv group");
    CHECK_CU(cuMemcpyDtoHAsync(&theirs, in, sizeof theirs, stream));
    wait_stream(stream);
    EXPECT(theirs == 101 - rank, "received %d", theirs);

    /* Broadcast from rank 1, allgather, reducescatter and reduce of int32s. */
    int ints[4] = {rank, rank, rank, rank}, gathered[8];
    CUdeviceptr ibuf, gbuf;
    CHECK_CU(cuMemAlloc(&ibuf, sizeof ints));
    CHECK_CU(cuMemAlloc(&gbuf, sizeof gathered));
    CHECK_CU(cuMemcpyHtoD(ibuf, ints, sizeof ints));
    settle(comm, ncclAllGather((void *)ibuf, (void *)gbuf, 4, ncclInt32, comm, stream), "allgather");
    CHECK_CU(cuMemcpyDtoHAsync(gathered, gbuf, sizeof gathered, stream));
    wait_stream(stream);
    for (int i = 0; i < 8; i++) EXPECT(gathered[i] == i / 4, "gathered[%d] = %d", i, gathered[i]);
    settle(comm, ncclReduceScatter((void *)gbuf, (void *)ibuf, 4, ncclInt32, ncclSum, comm, stream), "reducescatter");
    settle(comm, ncclBroadcast((void *)ibuf, (void *)ibuf, 4, ncclInt32, 1, comm, stream), "broadcast");
    settle(comm, ncclReduce((void *)ibuf, (void *)gbuf, 4, ncclInt32, ncclMax, 0, comm, stream), "reduce");
    CHECK_CU(cuMemcpyDtoHAsync(ints, ibuf, sizeof ints, stream));
    wait_stream(stream);
    /* Block 1 of the gathered data summed over two ranks: 1 + 1. */
    for (int i = 0; i < 4; i++) EXPECT(ints[i] == 2, "reducescatter+broadcast[%d] = %d", i, ints[i]);

    /* A split with the keys reversed swaps the ranks. */
    ncclComm_t sub;
    ncclConfig_t sub_config = NCCL_CONFIG_INITIALIZER;
    sub_config.blocking = 0;
    r = ncclCommSplit(comm, 7, 1 - rank, &sub, &sub_config);
    settle(comm, r, "ncclCommSplit (parent)");
    settle(sub, ncclInProgress, "ncclCommSplit (child)");
    EXPECT(ncclCommUserRank(sub, &me) == ncclSuccess && me == 1 - rank, "split rank %d", me);
    EXPECT(ncclCommAbort(sub) == ncclSuccess, "abort");

    /* The device pointer is device memory of device 0, truthfully. */
    unsigned int kind = 0;
    int ordinal = -1;
    CHECK_CU(cuPointerGetAttribute(&kind, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, buf));
    CHECK_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, buf + 4));
    EXPECT(kind == CU_MEMORYTYPE_DEVICE && ordinal == 0, "attributes %u %d", kind, ordinal);

    /* One batched device-to-device copy: two pieces, one attribute for both. */
    int pieces[2] = {0, 0};
    CUdeviceptr dsts[2] = {in, out}, srcs[2] = {gbuf, gbuf + 16};
    size_t sizes[2] = {4, 4}, attr_index = 0;
    CUmemcpyAttributes attrs;
    memset(&attrs, 0, sizeof attrs);
    attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    CHECK_CU(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attrs, &attr_index, 1, stream));
    CHECK_CU(cuMemcpyDtoHAsync(&pieces[0], in, 4, stream));
    CHECK_CU(cuMemcpyDtoHAsync(&pieces[1], out, 4, stream));
    wait_stream(stream);
    /* On rank 0 the reduce above left its result at the start of gbuf. */
    EXPECT(pieces[0] == (rank == 0 ? 2 : 0) && pieces[1] == 1, "batched copy %d %d", pieces[0], pieces[1]);

    CHECK_CU(cuMemFree(buf));
    CHECK_CU(cuMemFree(dbuf));
    CHECK_CU(cuMemFree(out));
    CHECK_CU(cuMemFree(in));
    CHECK_CU(cuMemFree(ibuf));
    CHECK_CU(cuMemFree(gbuf));
    EXPECT(ncclCommDestroy(comm) == ncclSuccess, "destroy");
    CHECK_CU(cuStreamDestroy(stream));
    CHECK_CU(cuDevicePrimaryCtxRelease(0));
    return NULL;
}

int main(void) {
    int version = 0, driver = 0, devices = 0;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDriverGetVersion(&driver));
    CHECK_CU(cuDeviceGetCount(&devices));
    EXPECT(devices >= 1, "%d devices", devices);
    EXPECT(ncclGetVersion(&version) == ncclSuccess && version >= 21800, "version %d", version);
    EXPECT(ncclGetUniqueId(&id) == ncclSuccess, "unique id");
    /* Without a current context, driver calls fail as CUDA's do. */
    CUdeviceptr none;
    EXPECT(cuMemAlloc(&none, 16) == CUDA_ERROR_INVALID_CONTEXT, "allocation without a context");
    pthread_t threads[2];
    for (long r = 0; r < 2; r++) pthread_create(&threads[r], NULL, rank_main, (void *)r);
    for (int r = 0; r < 2; r++) pthread_join(threads[r], NULL);
    printf("ABI OK (driver %d, NCCL %d)\n", driver, version);
    return 0;
}
