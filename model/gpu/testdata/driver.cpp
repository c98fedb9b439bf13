// driver.cpp runs a GPU engine plan on the CPU with the kernels' own source
// (TestKernelSourceOnCPU): it reads the weights, the activations and the
// operations from argv[1], runs them (GEMMs as plain float64 sums) and
// writes the activations to argv[2].
#include <cstdio>
#include "cpucuda.h"
#include "kernels_cpu.cu"

struct Arg {
    int64_t kind, arena, off, ival;  // kind 0 pointer, 1 null, 2 int
};
struct Op {
    int64_t kernel, gx, gy, bx, shared;
    std::vector<Arg> args;
    int64_t g[12];  // GEMM: M N K, A arena off lda, W arena off ldw, C arena off ldc
    bool gemm;
};

static std::vector<float> mem[2];

static void* P(const Op& op, int i) {
    const Arg& a = op.args[i];
    if (a.kind == 1) return nullptr;
    return mem[a.arena].data() + a.off;
}
static int I(const Op& op, int i) { return (int)op.args[i].ival; }

static int64_t rd(FILE* f) {
    int64_t v;
    if (fread(&v, 8, 1, f) != 1) {
        fprintf(stderr, "short input\n");
        exit(2);
    }
    return v;
}

static void run(const Op& op);

int main(int argc, char** argv) {
    FILE* f = fopen(argv[1], "rb");
    if (!f) return 2;
    for (int a = 0; a < 2; a++) {
        mem[a].resize(rd(f));
        if (fread(mem[a].data(), 4, mem[a].size(), f) != mem[a].size()) return 2;
    }
    int64_t n = rd(f);
    for (int64_t i = 0; i < n; i++) {
        Op op{};
        op.gemm = rd(f) == 0;
        if (op.gemm) {
            for (auto& v : op.g) v = rd(f);
        } else {
            op.kernel = rd(f);
            op.gx = rd(f);
            op.gy = rd(f);
            op.bx = rd(f);
            op.shared = rd(f);
            int64_t na = rd(f);
            for (int64_t j = 0; j < na; j++) {
                Arg a;
                a.kind = rd(f);
                a.arena = rd(f);
                a.off = rd(f);
                a.ival = rd(f);
                op.args.push_back(a);
            }
        }
        run(op);
    }
    fclose(f);
    FILE* o = fopen(argv[2], "wb");
    fwrite(mem[1].data(), 4, mem[1].size(), o);
    fclose(o);
    return 0;
}

static void gemm(const Op& op) {
    const int64_t* g = op.g;
    int64_t M = g[0], N = g[1], K = g[2];
    const float* A = mem[g[3]].data() + g[4];
    const float* W = mem[g[6]].data() + g[7];
    float* C = mem[g[9]].data() + g[10];
    std::vector<double> row(N);
    for (int64_t i = 0; i < M; i++) {
        std::fill(row.begin(), row.end(), 0.0);
        for (int64_t k = 0; k < K; k++) {
            double x = A[i * g[5] + k];
            for (int64_t j = 0; j < N; j++) row[j] += x * W[k * g[8] + j];
        }
        for (int64_t j = 0; j < N; j++) C[i * g[11] + j] = (float)row[j];
    }
}

static void run(const Op& op) {
    if (op.gemm) {
        gemm(op);
        return;
    }
    cc_dim3 grid{(unsigned)op.gx, (unsigned)op.gy, 1}, block{(unsigned)op.bx, 1, 1};
    switch (op.kernel) {
#include "dispatch.inc"
    default:
        fprintf(stderr, "unknown kernel %lld\n", (long long)op.kernel);
        exit(2);
    }
}
