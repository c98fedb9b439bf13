package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// driver is libcuda: the CUDA driver API's functions, by address.
type driver struct {
	lib                                                           *lib
	init, driverVersion, deviceCount, deviceGet, deviceName, attr uintptr
	primaryRetain, primaryRelease, ctxSetCurrent, ctxSynchronize  uintptr
	memAlloc, memFree, hostAlloc, hostFree, memsetD8              uintptr
	htod, dtoh, htodAsync, dtohAsync                              uintptr
	streamCreate, streamDestroy, streamSync                       uintptr
	moduleLoad, moduleUnload, moduleFunc, launch                  uintptr
	beginCapture, endCapture, instantiate, graphLaunch            uintptr
	graphExecDestroy, graphDestroy, errName, errString            uintptr
}

func loadDriver(extra string) (*driver, error) {
	l, err := openLib("the CUDA driver (libcuda)", driverNames, SearchDirs(extra))
	if err != nil {
		return nil, err
	}
	d := &driver{lib: l}
	err = l.syms(map[string]*uintptr{
		"cuInit": &d.init, "cuDriverGetVersion": &d.driverVersion, "cuDeviceGetCount": &d.deviceCount,
		"cuDeviceGet": &d.deviceGet, "cuDeviceGetName": &d.deviceName, "cuDeviceGetAttribute": &d.attr,
		"cuDevicePrimaryCtxRetain": &d.primaryRetain, "cuDevicePrimaryCtxRelease_v2": &d.primaryRelease,
		"cuCtxSetCurrent": &d.ctxSetCurrent, "cuCtxSynchronize": &d.ctxSynchronize,
		"cuMemAlloc_v2": &d.memAlloc, "cuMemFree_v2": &d.memFree, "cuMemAllocHost_v2": &d.hostAlloc,
		"cuMemFreeHost": &d.hostFree, "cuMemsetD8_v2": &d.memsetD8,
		"cuMemcpyHtoD_v2": &d.htod, "cuMemcpyDtoH_v2": &d.dtoh,
		"cuMemcpyHtoDAsync_v2": &d.htodAsync, "cuMemcpyDtoHAsync_v2": &d.dtohAsync,
		"cuStreamCreate": &d.streamCreate, "cuStreamDestroy_v2": &d.streamDestroy, "cuStreamSynchronize": &d.streamSync,
		"cuModuleLoadData": &d.moduleLoad, "cuModuleUnload": &d.moduleUnload, "cuModuleGetFunction": &d.moduleFunc,
		"cuLaunchKernel": &d.launch, "cuStreamBeginCapture_v2": &d.beginCapture, "cuStreamEndCapture": &d.endCapture,
		"cuGraphInstantiateWithFlags": &d.instantiate, "cuGraphLaunch": &d.graphLaunch,
		"cuGraphExecDestroy": &d.graphExecDestroy, "cuGraphDestroy": &d.graphDestroy,
		"cuGetErrorName": &d.errName, "cuGetErrorString": &d.errString,
	}, nil)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Error is a failed CUDA call: the function, CUDA's result code, its name
// and CUDA's own message.
type Error struct {
	Call    string // e.g. "cuMemAlloc_v2"
	Code    int32
	Name    string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Message string // CUDA's description
}

// Error reads "call: NAME (code): message".
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Name, e.Code, e.Message)
}

// ErrNoDevice is returned (wrapped) by Open when the driver is present but
// reports no GPU.
var ErrNoDevice = errors.New("cuda: no CUDA device")

// check turns the CUresult r of call fn into an error (nil for success).
func (d *driver) check(fn string, r int32) error {
	if r == 0 {
		return nil
	}
	var name, msg uintptr
	call(d.errName, uintptr(r), uintptr(unsafe.Pointer(&name)))
	call(d.errString, uintptr(r), uintptr(unsafe.Pointer(&msg)))
	e := &Error{Call: fn, Code: r, Name: gostr(name), Message: gostr(msg)}
	if e.Name == "" {
		e.Name = "unknown CUresult"
	}
	return e
}

// Device is one GPU with its primary context, current on a goroutine
// locked to its OS thread: every CUDA call of the device (memory, kernels,
// cuBLAS) runs there, through Do. Methods other than Do, Close and the
// informational fields must be called from inside Do.
type Device struct {
	d             *driver
	Ordinal       int    // the GPU's ordinal
	Name          string // e.g. "NVIDIA H100 80GB HBM3"
	Major, Minor  int    // compute capability
	SMs           int    // multiprocessors
	DriverVersion int    // e.g. 12040 for 12.4
	dev           int32
	ctx           uintptr
	jobs          chan func() error
	results       chan error
	closed        bool
	fast          fastCaller // the serving path's calls, on the device's thread
}

// Open loads libcuda (from SearchDirs(libDirs)), initialises it and makes
// GPU ordinal's primary context current on a new locked OS thread.
func Open(ordinal int, libDirs string) (*Device, error) {
	d, err := loadDriver(libDirs)
	if err != nil {
		return nil, err
	}
	dev := &Device{d: d, Ordinal: ordinal, jobs: make(chan func() error), results: make(chan error)}
	ready := make(chan error)
	go dev.loop(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return dev, nil
}

// loop is the device's thread: it sets up the context, then runs jobs
// until the channel closes.
func (dev *Device) loop(ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := dev.setup(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for f := range dev.jobs {
		dev.results <- f()
	}
	d := dev.d
	_ = d.check("cuCtxSynchronize", call(d.ctxSynchronize))
	_ = d.check("cuDevicePrimaryCtxRelease_v2", call(d.primaryRelease, uintptr(dev.dev)))
	dev.results <- nil
}

func (dev *Device) setup() error {
	d := dev.d
	if err := d.check("cuInit", call(d.init, 0)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	var v, n int32
	if err := d.check("cuDriverGetVersion", call(d.driverVersion, uintptr(unsafe.Pointer(&v)))); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	dev.DriverVersion = int(v)
	if err := d.check("cuDeviceGetCount", call(d.deviceCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if dev.Ordinal < 0 || dev.Ordinal >= int(n) {
		return fmt.Errorf("%w: device %d asked for, the driver reports %d", ErrNoDevice, dev.Ordinal, n)
	}
	if err := d.check("cuDeviceGet", call(d.deviceGet, uintptr(unsafe.Pointer(&dev.dev)), uintptr(dev.Ordinal))); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	name := make([]byte, 256)
	if err := d.check("cuDeviceGetName", call(d.deviceName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(dev.dev))); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	dev.Name = gostr(uintptr(unsafe.Pointer(&name[0])))
	for _, a := range []struct {
		attr int
		to   *int
	}{{75, &dev.Major}, {76, &dev.Minor}, {16, &dev.SMs}} {
		var x int32
		if err := d.check("cuDeviceGetAttribute", call(d.attr, uintptr(unsafe.Pointer(&x)), uintptr(a.attr), uintptr(dev.dev))); err != nil {
			return fmt.Errorf("cuda: %w", err)
		}
		*a.to = int(x)
	}
	if err := d.check("cuDevicePrimaryCtxRetain", call(d.primaryRetain, uintptr(unsafe.Pointer(&dev.ctx)), uintptr(dev.dev))); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if err := d.check("cuCtxSetCurrent", call(d.ctxSetCurrent, dev.ctx)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	return nil
}

// Arch is the device's architecture as NVRTC names it ("sm_90").
func (dev *Device) Arch() string { return fmt.Sprintf("sm_%d%d", dev.Major, dev.Minor) }

// Do runs f on the device's thread and returns its error. It allocates
// nothing itself: pass a function value made once (a method value kept in
// a field) on hot paths.
func (dev *Device) Do(f func() error) error {
	if dev.closed {
		return errors.New("cuda: device closed")
	}
	dev.jobs <- f
	return <-dev.results
}

// Close synchronises the device, releases its primary context and ends
// its thread. Memory, modules and streams must be freed first.
func (dev *Device) Close() error {
	if dev.closed {
		return nil
	}
	dev.closed = true
	close(dev.jobs)
	return <-dev.results
}

// SyncContext waits for everything queued in the context, on every
// stream, the legacy default stream (synchronous copies, Memset) included.
func (dev *Device) SyncContext() error {
	return dev.d.check("cuCtxSynchronize", call(dev.d.ctxSynchronize))
}

// Ptr is a device address (CUdeviceptr).
type Ptr uintptr

// Add returns the address bytes further on.
func (p Ptr) Add(bytes int) Ptr { return p + Ptr(bytes) }

// Stream is a CUDA stream.
type Stream uintptr

// Alloc allocates bytes of device memory.
func (dev *Device) Alloc(bytes int) (Ptr, error) {
	var p Ptr
	if err := dev.d.check("cuMemAlloc_v2", call(dev.d.memAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes))); err != nil {
		return 0, fmt.Errorf("cuda: %d bytes of device memory: %w", bytes, err)
	}
	return p, nil
}

// Free frees device memory from Alloc.
func (dev *Device) Free(p Ptr) error {
	return dev.d.check("cuMemFree_v2", call(dev.d.memFree, uintptr(p)))
}

// Memset zeroes bytes of device memory from p.
func (dev *Device) Memset(p Ptr, bytes int) error {
	return dev.d.check("cuMemsetD8_v2", call(dev.d.memsetD8, uintptr(p), 0, uintptr(bytes)))
}

// HostAlloc allocates n float32s of pinned (page-locked) host memory,
// which the GPU reads and writes by DMA, asynchronously with the host.
func (dev *Device) HostAlloc(n int) ([]float32, error) {
	var p unsafe.Pointer
	if err := dev.d.check("cuMemAllocHost_v2", call(dev.d.hostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(4*n))); err != nil {
		return nil, fmt.Errorf("cuda: %d bytes of pinned host memory: %w", 4*n, err)
	}
	return unsafe.Slice((*float32)(p), n), nil
}

// HostFree frees pinned memory from HostAlloc.
func (dev *Device) HostFree(b []float32) error {
	if len(b) == 0 {
		return nil
	}
	return dev.d.check("cuMemFreeHost", call(dev.d.hostFree, uintptr(unsafe.Pointer(&b[0]))))
}

// CopyIn copies src to device memory at dst, synchronously.
func (dev *Device) CopyIn(dst Ptr, src unsafe.Pointer, bytes int) error {
	return dev.d.check("cuMemcpyHtoD_v2", call(dev.d.htod, uintptr(dst), uintptr(src), uintptr(bytes)))
}

// CopyOut copies device memory at src to dst, synchronously.
func (dev *Device) CopyOut(dst unsafe.Pointer, src Ptr, bytes int) error {
	return dev.d.check("cuMemcpyDtoH_v2", call(dev.d.dtoh, uintptr(dst), uintptr(src), uintptr(bytes)))
}

// CopyInAsync queues a copy from pinned host memory src to dst on s.
func (dev *Device) CopyInAsync(dst Ptr, src unsafe.Pointer, bytes int, s Stream) error {
	return dev.d.check("cuMemcpyHtoDAsync_v2", dev.fast.call(dev.d.htodAsync, uintptr(dst), uintptr(src), uintptr(bytes), uintptr(s)))
}

// CopyOutAsync queues a copy from device memory src to pinned host memory
// dst on s.
func (dev *Device) CopyOutAsync(dst unsafe.Pointer, src Ptr, bytes int, s Stream) error {
	return dev.d.check("cuMemcpyDtoHAsync_v2", dev.fast.call(dev.d.dtohAsync, uintptr(dst), uintptr(src), uintptr(bytes), uintptr(s)))
}

// NewStream creates a stream that does not synchronise with the default
// stream.
func (dev *Device) NewStream() (Stream, error) {
	var s Stream
	if err := dev.d.check("cuStreamCreate", call(dev.d.streamCreate, uintptr(unsafe.Pointer(&s)), 1)); err != nil {
		return 0, err
	}
	return s, nil
}

// DestroyStream destroys s.
func (dev *Device) DestroyStream(s Stream) error {
	return dev.d.check("cuStreamDestroy_v2", call(dev.d.streamDestroy, uintptr(s)))
}

// Sync waits for everything queued on s.
func (dev *Device) Sync(s Stream) error {
	return dev.d.check("cuStreamSynchronize", dev.fast.call(dev.d.streamSync, uintptr(s)))
}

// Module is a loaded cubin.
type Module uintptr

// Func is a kernel of a module.
type Func uintptr

// LoadModule loads a cubin (from NVRTC.Compile) into the context.
func (dev *Device) LoadModule(cubin []byte) (Module, error) {
	var m Module
	err := dev.d.check("cuModuleLoadData", call(dev.d.moduleLoad, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&cubin[0]))))
	runtime.KeepAlive(cubin)
	return m, err
}

// UnloadModule unloads m.
func (dev *Device) UnloadModule(m Module) error {
	return dev.d.check("cuModuleUnload", call(dev.d.moduleUnload, uintptr(m)))
}

// Function returns the kernel called name (declared extern "C") of m.
func (dev *Device) Function(m Module, name string) (Func, error) {
	var f Func
	c := cstr(name)
	err := dev.d.check("cuModuleGetFunction", call(dev.d.moduleFunc, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&c[0]))))
	runtime.KeepAlive(c)
	if err != nil {
		return 0, fmt.Errorf("cuda: kernel %s: %w", name, err)
	}
	return f, nil
}

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z int }

// Args holds a kernel's arguments for cuLaunchKernel: each an 8-byte slot
// (a device pointer, or a 4-byte int or float in its low half), and the
// array of their addresses that CUDA reads. Made once and kept (the Go
// heap does not move), it costs a launch nothing.
type Args struct {
	vals []uint64
	ptrs []uintptr
}

// NewArgs returns room for n arguments.
func NewArgs(n int) *Args {
	a := &Args{vals: make([]uint64, n), ptrs: make([]uintptr, n)}
	for i := range a.vals {
		a.ptrs[i] = uintptr(unsafe.Pointer(&a.vals[i]))
	}
	return a
}

// SetPtr sets argument i to a device pointer.
func (a *Args) SetPtr(i int, p Ptr) { a.vals[i] = uint64(p) }

// SetInt sets argument i to a 32-bit int.
func (a *Args) SetInt(i int, v int) { a.vals[i] = uint64(uint32(int32(v))) }

// Launch queues kernel f on s with the given grid, block and dynamic shared
// memory.
func (dev *Device) Launch(f Func, grid, block Dim3, shared int, s Stream, a *Args) error {
	var p uintptr
	if len(a.ptrs) > 0 {
		p = uintptr(unsafe.Pointer(&a.ptrs[0]))
	}
	return dev.d.check("cuLaunchKernel", dev.fast.call(dev.d.launch, uintptr(f),
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z), uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(shared), uintptr(s), p, 0))
}

// Graph is an instantiated CUDA graph: a sequence of launches and copies
// captured once and replayed with one launch.
type Graph struct {
	g, exec uintptr
}

// Capture records everything record queues on s (which must be a stream
// of this device, not the legacy default stream) into a graph and
// instantiates it.
func (dev *Device) Capture(s Stream, record func() error) (*Graph, error) {
	d := dev.d
	if err := d.check("cuStreamBeginCapture_v2", call(d.beginCapture, uintptr(s), 1)); err != nil {
		return nil, err
	}
	rerr := record()
	g := &Graph{}
	if err := d.check("cuStreamEndCapture", call(d.endCapture, uintptr(s), uintptr(unsafe.Pointer(&g.g)))); err != nil {
		return nil, errors.Join(rerr, err)
	}
	if rerr != nil {
		_ = d.check("cuGraphDestroy", call(d.graphDestroy, g.g))
		return nil, rerr
	}
	if err := d.check("cuGraphInstantiateWithFlags", call(d.instantiate, uintptr(unsafe.Pointer(&g.exec)), g.g, 0)); err != nil {
		_ = d.check("cuGraphDestroy", call(d.graphDestroy, g.g))
		return nil, err
	}
	return g, nil
}

// LaunchGraph queues graph g on s.
func (dev *Device) LaunchGraph(g *Graph, s Stream) error {
	return dev.d.check("cuGraphLaunch", dev.fast.call(dev.d.graphLaunch, g.exec, uintptr(s)))
}

// DestroyGraph frees g.
func (dev *Device) DestroyGraph(g *Graph) error {
	return errors.Join(dev.d.check("cuGraphExecDestroy", call(dev.d.graphExecDestroy, g.exec)),
		dev.d.check("cuGraphDestroy", call(dev.d.graphDestroy, g.g)))
}
