// CUDA C kernels of the GPU engine: every layer of the forward pass that is
// not a GEMM (the GEMMs run on cuBLAS). Compiled at start-up by NVRTC for
// the device's architecture; RGC_LN_EPS and RGC_GELU_CUBIC come from
// model/consts.go as -D options, RGC_HEAD_DIM from the model's
// configuration. Activations are channels-last: window b's
// row l of a [L][C] tensor starts at (b*L + l)*C. Each kernel's indexing is
// mirrored in emulate.go, which the CPU tests run against the CPU engine;
// keep the two in step.

#ifndef RGC_LN_EPS
#error "RGC_LN_EPS must be defined (-DRGC_LN_EPS=...)"
#endif
#ifndef RGC_GELU_CUBIC
#error "RGC_GELU_CUBIC must be defined (-DRGC_GELU_CUBIC=...)"
#endif
// The attention head size is a compile-time constant, so that a query and
// its sum stay in registers with the head loops unrolled. 32 floats each
// is the most the kernel keeps there (gpt-b's heads).
#ifndef RGC_HEAD_DIM
#error "RGC_HEAD_DIM must be defined (-DRGC_HEAD_DIM=...)"
#endif
#if RGC_HEAD_DIM < 1 || RGC_HEAD_DIM > 32
#error "RGC_HEAD_DIM must be 1..32"
#endif
#define HD RGC_HEAD_DIM

// im2col unrolls a strided, zero-padded 1-D convolution's input into rows
// of k*cin values (tap-major, as the folded kernels [k*cin][cout]): col row
// b*lout + l, column t*cin + i holds input position l*stride - pad + t,
// channel i of window b, or 0 outside 0..lin-1. Input element (b, j, i) is
// at in[b*winStride + j*posStride + i*chStride], so one kernel reads the
// raw [5][1024] windows and channels-last activations alike.
// Grid (ceil(lout*k*cin / blockDim.x), windows).
extern "C" __global__ void im2col(const float* in, float* col, int lin, int cin, int winStride, int posStride,
                                  int chStride, int lout, int k, int stride, int pad) {
    int per = lout * k * cin;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= per) return;
    int b = blockIdx.y;
    int i = idx % cin;
    int t = (idx / cin) % k;
    int l = idx / (cin * k);
    int j = l * stride - pad + t;
    float v = 0.0f;
    if (j >= 0 && j < lin) v = in[(long long)b * winStride + j * posStride + i * chStride];
    col[(long long)b * per + idx] = v;
}

// biasAct adds bias[c] to every row of y [rows][cols] and applies act:
// 0 none, 1 ReLU, 2 GELU (tanh form). Grid (ceil(rows*cols / blockDim.x)):
// rows reach millions at large batches, beyond a grid's y.
extern "C" __global__ void biasAct(float* y, const float* bias, int rows, int cols, int act) {
    long long at = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (long long)rows * cols) return;
    float v = y[at] + bias[at % cols];
    if (act == 1) {
        v = fmaxf(v, 0.0f);
    } else if (act == 2) {
        float u = 0.7978845608028654f * (v + RGC_GELU_CUBIC * v * v * v);
        v = 0.5f * v * (1.0f + tanhf(u));
    }
    y[at] = v;
}

// biasResidual adds t + bias to the residual stream x, both [rows][cols].
// Grid (ceil(rows*cols / blockDim.x)).
extern "C" __global__ void biasResidual(float* x, const float* t, const float* bias, int rows, int cols) {
    long long at = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (long long)rows * cols) return;
    x[at] += t[at] + bias[at % cols];
}

// sePool writes each channel's mean over the L positions of h [L][C] to
// pool [C], per window. Grid (windows), block (C).
extern "C" __global__ void sePool(const float* h, float* pool, int L, int C) {
    int c = threadIdx.x;
    if (c >= C) return;
    const float* w = h + (long long)blockIdx.x * L * C;
    float s = 0.0f;
    for (int l = 0; l < L; l++) s += w[l * C + c];
    pool[blockIdx.x * C + c] = s / (float)L;
}

// seGate computes the squeeze-excite gates of one window:
// gate = sigmoid(fc2(relu(fc1(pool)))), fc1 [C][H], fc2 [H][C] (in, out).
// Grid (windows), block (C) with C >= H, dynamic shared memory H floats.
extern "C" __global__ void seGate(const float* pool, const float* w1, const float* b1, const float* w2,
                                  const float* b2, float* gate, int C, int H) {
    extern __shared__ float hid[];
    int c = threadIdx.x;
    const float* p = pool + blockIdx.x * C;
    if (c < H) {
        float s = b1[c];
        for (int k = 0; k < C; k++) s += p[k] * w1[k * H + c];
        hid[c] = fmaxf(s, 0.0f);
    }
    __syncthreads();
    if (c >= C) return;
    float g = b2[c];
    for (int k = 0; k < H; k++) g += hid[k] * w2[k * C + c];
    gate[blockIdx.x * C + c] = 1.0f / (1.0f + expf(-g));
}

// seApply writes out = relu(h * gate + sc) for h, sc, out [L][C] and the
// window's gates [C]. Grid (ceil(L*C / blockDim.x), windows).
extern "C" __global__ void seApply(const float* h, const float* gate, const float* sc, float* out, int L, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= L * C) return;
    long long at = (long long)blockIdx.y * L * C + idx;
    out[at] = fmaxf(h[at] * gate[blockIdx.y * C + idx % C] + sc[at], 0.0f);
}

// embed writes the transformer's input x [T][d] = src + bias + pos_emb +
// cell_emb[row of the window]; bias is the projection's (null when src is
// the encoder's output itself). Grid (ceil(T*d / blockDim.x), windows).
extern "C" __global__ void embed(const float* src, float* x, const float* bias, const float* pos,
                                 const float* cell, const int* rows, int T, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * d) return;
    int f = idx % d;
    long long at = (long long)blockIdx.y * T * d + idx;
    float v = src[at] + pos[idx] + cell[rows[blockIdx.y] * d + f];
    if (bias != 0) v += bias[f];
    x[at] = v;
}

// layerNorm writes (x - mean) / sqrt(var + eps) * w + b of each of rows
// rows of d values (row r at x + r*xStride) to y + r*yStride, one warp a
// row. Grid (ceil(rows / (blockDim.x/32))), block a multiple of 32.
extern "C" __global__ void layerNorm(const float* x, float* y, const float* w, const float* b, int rows, int d,
                                     int xStride, int yStride) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const float* xr = x + (long long)r * xStride;
    float s = 0.0f;
    for (int f = lane; f < d; f += 32) s += xr[f];
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    float mean = s / (float)d;
    float v = 0.0f;
    for (int f = lane; f < d; f += 32) {
        float e = xr[f] - mean;
        v += e * e;
    }
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    float inv = rsqrtf(v / (float)d + RGC_LN_EPS);
    float* yr = y + (long long)r * yStride;
    for (int f = lane; f < d; f += 32) yr[f] = (xr[f] - mean) * inv * w[f] + b[f];
}

// attention is causal multi-head self-attention for one head of one
// window: qkv [T][3d] holds q (already scaled by 1/sqrt(HD)), k and v side
// by side, head h in columns h*HD..(h+1)*HD of each; query i attends to
// keys 0..i with softmax weights; the output goes to columns h*HD.. of y
// [T][d]. Grid (heads, windows), block (T), dynamic shared memory 2*T*HD
// floats (the head's keys and values).
extern "C" __global__ void attention(const float* qkv, float* y, int T, int d) {
    extern __shared__ float kv[];
    float* ks = kv;
    float* vs = kv + T * HD;
    int h = blockIdx.x;
    const float* base = qkv + (long long)blockIdx.y * T * 3 * d;
    for (int e = threadIdx.x; e < T * HD; e += blockDim.x) {
        int j = e / HD, c = e % HD;
        ks[e] = base[j * 3 * d + d + h * HD + c];
        vs[e] = base[j * 3 * d + 2 * d + h * HD + c];
    }
    __syncthreads();
    int i = threadIdx.x;
    if (i >= T) return;
    float q[HD], acc[HD];
#pragma unroll
    for (int c = 0; c < HD; c++) {
        q[c] = base[i * 3 * d + h * HD + c];
        acc[c] = 0.0f;
    }
    float m = __int_as_float(0xff800000); // -infinity
    for (int j = 0; j <= i; j++) {
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < HD; c++) s += q[c] * ks[j * HD + c];
        m = fmaxf(m, s);
    }
    float z = 0.0f;
    for (int j = 0; j <= i; j++) {
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < HD; c++) s += q[c] * ks[j * HD + c];
        float p = expf(s - m);
        z += p;
#pragma unroll
        for (int c = 0; c < HD; c++) acc[c] += p * vs[j * HD + c];
    }
    float* yr = y + ((long long)blockIdx.y * T + i) * d + h * HD;
#pragma unroll
    for (int c = 0; c < HD; c++) yr[c] = acc[c] / z;
}
