// cpucuda.h runs CUDA C kernels on the CPU for TestKernelSourceOnCPU: each
// CUDA thread of a block is a C++ thread where the kernel calls
// __syncthreads, of a warp where it only shuffles within warps, and
// otherwise a block's threads run one after another. Only what kernels.cu
// uses is here.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

struct cc_dim3 {
    unsigned x, y, z;
};
thread_local cc_dim3 threadIdx, blockIdx;
cc_dim3 blockDim, gridDim;

struct cc_warp {
    std::barrier<> bar{32};
    float val[32];
};
thread_local float* cc_shared;
thread_local std::barrier<>* cc_block;
thread_local cc_warp* cc_warps;
unsigned cc_group;  // the threads run together: a block or a warp

#define __global__
#define __device__

inline void __syncthreads() {
    if (!cc_block) {
        fprintf(stderr, "__syncthreads in a kernel run without threads\n");
        abort();
    }
    cc_block->arrive_and_wait();
}

inline float __shfl_xor_sync(unsigned, float v, int o) {
    if (!cc_warps) {
        fprintf(stderr, "__shfl_xor_sync in a kernel run without threads\n");
        abort();
    }
    cc_warp& w = cc_warps[threadIdx.x % cc_group / 32];
    unsigned lane = threadIdx.x % 32;
    w.val[lane] = v;
    w.bar.arrive_and_wait();
    float r = w.val[lane ^ (unsigned)o];
    w.bar.arrive_and_wait();
    return r;
}

inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// Modes of cc_launch.
enum { cc_serial = 0, cc_warps_run = 1, cc_blocks_run = 2 };

// cc_launch runs body for every thread of every block of the grid. In
// cc_serial mode a block's threads run one after another; otherwise the
// threads of a group (a warp, or a whole block) are C++ threads, made once
// per launch and taken through the groups together (every thread of these
// kernels reaches each __syncthreads and each shuffle of its warp).
inline void cc_launch(cc_dim3 grid, cc_dim3 block, int shared, int mode, const std::function<void()>& body) {
    gridDim = grid;
    blockDim = block;
    std::vector<float> sh(shared / 4 + 1);
    if (mode == cc_serial) {
        cc_shared = sh.data();
        cc_block = nullptr;
        cc_warps = nullptr;
        for (unsigned by = 0; by < grid.y; by++) {
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = {bx, by, 0};
                for (unsigned tx = 0; tx < block.x; tx++) {
                    threadIdx = {tx, 0, 0};
                    body();
                }
            }
        }
        return;
    }
    cc_group = mode == cc_blocks_run ? block.x : 32;
    if (block.x % cc_group != 0) {
        fprintf(stderr, "a block of %u threads is not a whole number of warps\n", block.x);
        abort();
    }
    std::barrier<> bar(cc_group), next(cc_group);
    std::vector<cc_warp> warps((cc_group + 31) / 32);
    std::vector<std::thread> ts;
    for (unsigned lane = 0; lane < cc_group; lane++) {
        ts.emplace_back([&, lane] {
            cc_shared = sh.data();
            cc_block = mode == cc_blocks_run ? &bar : nullptr;
            cc_warps = warps.data();
            for (unsigned by = 0; by < grid.y; by++) {
                for (unsigned bx = 0; bx < grid.x; bx++) {
                    for (unsigned g = 0; g < block.x / cc_group; g++) {
                        blockIdx = {bx, by, 0};
                        threadIdx = {g * cc_group + lane, 0, 0};
                        body();
                        next.arrive_and_wait();  // the group is done: shared memory is the next's
                    }
                }
            }
        });
    }
    for (auto& t : ts) t.join();
}
