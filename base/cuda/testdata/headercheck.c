/* headercheck.c: the C types base/cuda's purego calls assume, checked
 * against CUDA's own headers by a C compiler (tools/gpucheck/headercheck.sh,
 * a one-off: the headers come with Debian's nvidia-cuda-dev, 774 MB).
 * Each function the bindings look up is assigned to a pointer of the type
 * the Go side calls it with (argument by argument, as its uintptrs go), so
 * that a wrong count or kind of argument fails the compile; each constant
 * the Go side passes as a number is asserted. TestHeaderCheckCovers keeps
 * the list complete. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <nvrtc.h>
#include <library_types.h>

/* driver.go */
CUresult (*p_cuInit)(unsigned int) = cuInit;
CUresult (*p_cuDriverGetVersion)(int *) = cuDriverGetVersion;
CUresult (*p_cuDeviceGetCount)(int *) = cuDeviceGetCount;
CUresult (*p_cuDeviceGet)(CUdevice *, int) = cuDeviceGet;
CUresult (*p_cuDeviceGetName)(char *, int, CUdevice) = cuDeviceGetName;
CUresult (*p_cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice) = cuDeviceGetAttribute;
CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = cuDevicePrimaryCtxRetain;
CUresult (*p_cuDevicePrimaryCtxRelease_v2)(CUdevice) = cuDevicePrimaryCtxRelease_v2;
CUresult (*p_cuCtxSetCurrent)(CUcontext) = cuCtxSetCurrent;
CUresult (*p_cuCtxSynchronize)(void) = cuCtxSynchronize;
CUresult (*p_cuMemAlloc_v2)(CUdeviceptr *, size_t) = cuMemAlloc_v2;
CUresult (*p_cuMemFree_v2)(CUdeviceptr) = cuMemFree_v2;
CUresult (*p_cuMemAllocHost_v2)(void **, size_t) = cuMemAllocHost_v2;
CUresult (*p_cuMemFreeHost)(void *) = cuMemFreeHost;
CUresult (*p_cuMemsetD8_v2)(CUdeviceptr, unsigned char, size_t) = cuMemsetD8_v2;
CUresult (*p_cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t) = cuMemcpyHtoD_v2;
CUresult (*p_cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t) = cuMemcpyDtoH_v2;
CUresult (*p_cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void *, size_t, CUstream) = cuMemcpyHtoDAsync_v2;
CUresult (*p_cuMemcpyDtoHAsync_v2)(void *, CUdeviceptr, size_t, CUstream) = cuMemcpyDtoHAsync_v2;
CUresult (*p_cuStreamCreate)(CUstream *, unsigned int) = cuStreamCreate;
CUresult (*p_cuStreamDestroy_v2)(CUstream) = cuStreamDestroy_v2;
CUresult (*p_cuStreamSynchronize)(CUstream) = cuStreamSynchronize;
CUresult (*p_cuModuleLoadData)(CUmodule *, const void *) = cuModuleLoadData;
CUresult (*p_cuModuleUnload)(CUmodule) = cuModuleUnload;
CUresult (*p_cuModuleGetFunction)(CUfunction *, CUmodule, const char *) = cuModuleGetFunction;
CUresult (*p_cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, CUstream, void **, void **) = cuLaunchKernel;
CUresult (*p_cuStreamBeginCapture_v2)(CUstream, CUstreamCaptureMode) = cuStreamBeginCapture_v2;
CUresult (*p_cuStreamEndCapture)(CUstream, CUgraph *) = cuStreamEndCapture;
CUresult (*p_cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long) = cuGraphInstantiateWithFlags;
CUresult (*p_cuGraphLaunch)(CUgraphExec, CUstream) = cuGraphLaunch;
CUresult (*p_cuGraphExecDestroy)(CUgraphExec) = cuGraphExecDestroy;
CUresult (*p_cuGraphDestroy)(CUgraph) = cuGraphDestroy;
CUresult (*p_cuGetErrorName)(CUresult, const char **) = cuGetErrorName;
CUresult (*p_cuGetErrorString)(CUresult, const char **) = cuGetErrorString;

/* The numbers driver.go passes. */
_Static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == 75, "Device.setup's attribute 75");
_Static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == 76, "Device.setup's attribute 76");
_Static_assert(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == 16, "Device.setup's attribute 16");
_Static_assert(CU_STREAM_NON_BLOCKING == 1, "NewStream's flag 1");
_Static_assert(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL == 1, "Capture's mode 1");
_Static_assert(CUDA_SUCCESS == 0, "check's success");
_Static_assert(sizeof(CUdeviceptr) == 8 && sizeof(CUdevice) == 4, "Ptr is 8 bytes; CUdevice an int32");

/* nvrtc.go */
nvrtcResult (*p_nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                     const char *const *) = nvrtcCreateProgram;
nvrtcResult (*p_nvrtcCompileProgram)(nvrtcProgram, int, const char *const *) = nvrtcCompileProgram;
nvrtcResult (*p_nvrtcGetProgramLogSize)(nvrtcProgram, size_t *) = nvrtcGetProgramLogSize;
nvrtcResult (*p_nvrtcGetProgramLog)(nvrtcProgram, char *) = nvrtcGetProgramLog;
nvrtcResult (*p_nvrtcGetCUBINSize)(nvrtcProgram, size_t *) = nvrtcGetCUBINSize;
nvrtcResult (*p_nvrtcGetCUBIN)(nvrtcProgram, char *) = nvrtcGetCUBIN;
nvrtcResult (*p_nvrtcDestroyProgram)(nvrtcProgram *) = nvrtcDestroyProgram;
const char *(*p_nvrtcGetErrorString)(nvrtcResult) = nvrtcGetErrorString;
nvrtcResult (*p_nvrtcVersion)(int *, int *) = nvrtcVersion;

/* cublas.go */
cublasStatus_t (*p_cublasCreate_v2)(cublasHandle_t *) = cublasCreate_v2;
cublasStatus_t (*p_cublasDestroy_v2)(cublasHandle_t) = cublasDestroy_v2;
cublasStatus_t (*p_cublasSetStream_v2)(cublasHandle_t, cudaStream_t) = cublasSetStream_v2;
cublasStatus_t (*p_cublasSetMathMode)(cublasHandle_t, cublasMath_t) = cublasSetMathMode;
cublasStatus_t (*p_cublasSetWorkspace_v2)(cublasHandle_t, void *, size_t) = cublasSetWorkspace_v2;
cublasStatus_t (*p_cublasSgemm_v2)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
                                   const float *, int, const float *, int, const float *, float *, int) = cublasSgemm_v2;
const char *(*p_cublasGetStatusString)(cublasStatus_t) = cublasGetStatusString;
_Static_assert(CUBLAS_PEDANTIC_MATH == 2, "MathFP32");
_Static_assert(CUBLAS_TF32_TENSOR_OP_MATH == 3, "MathTF32");
_Static_assert(CUBLAS_OP_N == 0, "Gemm's transposes 0");
_Static_assert(CUBLAS_STATUS_SUCCESS == 0, "check's success");
/* cudaStream_t and CUstream are one type: a Stream goes to both. */
_Static_assert(__builtin_types_compatible_p(cudaStream_t, CUstream), "cudaStream_t is CUstream");

/* inventory.go */
cudaError_t (*p_cudaRuntimeGetVersion)(int *) = cudaRuntimeGetVersion;
cublasStatus_t (*p_cublasGetProperty)(libraryPropertyType, int *) = cublasGetProperty;
size_t (*p_cublasLtGetVersion)(void) = cublasLtGetVersion;
_Static_assert(MAJOR_VERSION == 0 && MINOR_VERSION == 1 && PATCH_LEVEL == 2, "blasVersion's properties 0, 1, 2");
