"""Keeping the host's launch overhead out of a sample (nvbench's blocking kernel), and a cold L2.

A sample is the GPU time between two events. If the host enqueues (flush, start event, kernel,
end event) more slowly than the GPU runs a 10 us kernel, the GPU reaches the start event and
then waits for the kernel's launch, and that wait is counted. So before a batch of samples is
enqueued, a tiny kernel holds the stream: it spins on a flag in host-mapped memory, and the
host sets the flag only once the whole batch is queued. The GPU then runs the batch back to
back. The spin has a time limit of its own, so a host that never releases it (an exception
mid-batch) cannot hang the GPU; a batch whose hold ran out is reported, and its samples are
not used.

The L2 flush writes AND reads a buffer twice the L2's size with a kernel of our own: a memset
of zeros (what `cupy.ndarray.fill(0)` does) is not trusted to evict, since its behaviour in the
cache is the driver's business; see docs/BENCHMARKS.md for what each flush did to cuBLAS at 1024^3.
"""

import ctypes

from worker.compile import compiler

_SOURCE = r"""
extern "C" __global__ void gemmwatch_hold_stream(volatile const int *release, volatile int *timed_out,
                                                 long long timeout_cycles) {
    long long start = clock64();
    while (*release == 0) {
        if (clock64() - start > timeout_cycles) { *timed_out = 1; return; }
        __nanosleep(1000);
    }
}

// Every element read and written: a full pass of L2-sized traffic that leaves the buffer, not
// the next sample's operands, in the cache.
extern "C" __global__ void gemmwatch_l2_flush(float *buf, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        buf[i] = buf[i] * 0.5f + 1.0f;
}
"""


class StreamHold:
    """hold(stream) before enqueuing a batch, release() after; timed_out() says whether it held."""

    def __init__(self, cp, compute_capability: str, cfg, timeout_s: float = 5.0):
        self.cp = cp
        # Our own source, compiled like every kernel: in the compile process, cached as a cubin.
        built = compiler.compile_kernel(_SOURCE, name="stream_hold.cu", untrusted=False, cfg=cfg,
                                        options=[compiler.arch_option(compute_capability), "-std=c++17"])
        module = cp.RawModule(path=str(built.cubin_path))
        self._hold = module.get_function("gemmwatch_hold_stream")
        self._flush = module.get_function("gemmwatch_l2_flush")
        # Two ints in pinned, mapped host memory: the GPU reads the flag over the bus each spin.
        self._mem = cp.cuda.alloc_pinned_memory(8)
        self._host = (ctypes.c_int * 2).from_address(self._mem.ptr)
        # With unified addressing (every 64-bit Linux CUDA context) pinned memory is mapped at the
        # same address on the device; ask the runtime where it can tell.
        device_ptr = getattr(cp.cuda.runtime, "hostGetDevicePointer", None)
        self._device_ptr = device_ptr(self._mem.ptr, 0) if device_ptr else self._mem.ptr
        clock_khz = cp.cuda.Device().attributes["ClockRate"]
        self._timeout_cycles = int(timeout_s * clock_khz * 1e3)

    def hold(self, stream) -> None:
        self._host[0], self._host[1] = 0, 0
        flag, timed_out = self._device_ptr, self._device_ptr + 4
        with stream:
            self._hold((1,), (1,), (self.cp.uint64(flag), self.cp.uint64(timed_out),
                                    self.cp.int64(self._timeout_cycles)))

    def release(self) -> None:
        self._host[0] = 1

    def timed_out(self) -> bool:
        """After the batch has finished: did the hold give up before the host released it?"""
        return bool(self._host[1])

    def flusher(self, l2_bytes: int):
        """A callable that evicts the L2 by reading and writing 2x its size (a cold sample)."""
        cp = self.cp
        buf = cp.zeros(max(2 * l2_bytes, 1 << 20) // 4, dtype=cp.float32)
        n = buf.size
        blocks = min(4096, -(-n // 256))
        return lambda: self._flush((blocks,), (256,), (buf, cp.int64(n)))
