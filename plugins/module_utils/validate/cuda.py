# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host validation's CUDA test: with ``nvcc`` on the node, a vector add built in a temporary
folder runs on every GPU and must print ``Test PASSED``; the folder is removed.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import first_line
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import FAILED, OK, SKIPPED, _tail

NVCC_DIRS = ("/usr/local/cuda/bin",)
PASSED = "Test PASSED"
# The CUDA test: a vector add on every GPU, checked on the host, "Test PASSED" or "Test FAILED".
VECTOR_ADD_CU = r"""// gpufleet.nvidia host validation: vector addition on every GPU.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void vectorAdd(const float *a, const float *b, float *c, int n)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            printf("device %d: %s failed: %s (%s)\n", device, #call,                  \
                   cudaGetErrorString(err_), cudaGetErrorName(err_));                 \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static int run(int device, const float *a, const float *b, float *c, int n)
{
    size_t size = (size_t)n * sizeof(float);
    float *da = NULL, *db = NULL, *dc = NULL;
    cudaDeviceProp prop;
    CHECK(cudaSetDevice(device));
    CHECK(cudaGetDeviceProperties(&prop, device));
    CHECK(cudaMalloc((void **)&da, size));
    CHECK(cudaMalloc((void **)&db, size));
    CHECK(cudaMalloc((void **)&dc, size));
    CHECK(cudaMemcpy(da, a, size, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, size, cudaMemcpyHostToDevice));
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    vectorAdd<<<blocks, threads>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(c, dc, size, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    for (int i = 0; i < n; ++i) {
        if (fabsf(a[i] + b[i] - c[i]) > 1e-5f) {
            printf("device %d (%s): wrong sum at element %d\n", device, prop.name, i);
            return 1;
        }
    }
    printf("device %d (%s): %d elements added\n", device, prop.name, n);
    return 0;
}

int main(void)
{
    const int n = 50000;
    int device = -1;
    int count = 0;
    float *a = (float *)malloc((size_t)n * sizeof(float));
    float *b = (float *)malloc((size_t)n * sizeof(float));
    float *c = (float *)malloc((size_t)n * sizeof(float));
    if (a == NULL || b == NULL || c == NULL) {
        printf("host memory allocation failed\nTest FAILED\n");
        return 1;
    }
    for (int i = 0; i < n; ++i) {
        a[i] = rand() / (float)RAND_MAX;
        b[i] = rand() / (float)RAND_MAX;
    }
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        printf("cudaGetDeviceCount failed: %s (%s)\nTest FAILED\n", cudaGetErrorString(err), cudaGetErrorName(err));
        return 1;
    }
    printf("[Vector addition of %d elements on %d device(s)]\n", n, count);
    int failed = count == 0;
    for (device = 0; device < count; ++device) {
        failed |= run(device, a, b, c, n);
    }
    free(a);
    free(b);
    free(c);
    printf(failed ? "Test FAILED\n" : "Test PASSED\n");
    return failed;
}
"""


def check_cuda(checks, host, enabled, nvcc_path, driver_ok, runner, tmp_root="/tmp"):
    """The CUDA check: the vector add built with the node's nvcc in a temporary folder (removed
    afterwards) and run on every GPU. Returns what the result says of it."""
    result = {"ran": False, "passed": None, "nvcc": None, "output": None}
    why_not = _cuda_not_run(enabled, driver_ok)
    if why_not:
        checks.add("cuda", SKIPPED, why_not)
        return result
    nvcc = _nvcc(host, nvcc_path)
    result["nvcc"] = nvcc
    if nvcc is None:
        checks.add(
            "cuda",
            SKIPPED,
            "CUDA vectorAdd on the host: not run: no nvcc on the node (install the CUDA toolkit to run it)",
        )
        return result
    local_tmp = host.local(tmp_root)
    if not os.path.isdir(local_tmp):
        checks.add("cuda", SKIPPED, "CUDA vectorAdd on the host: not run: the node has no %s" % tmp_root)
        return result
    work = tempfile.mkdtemp(prefix="gpufleet-vectoradd-", dir=local_tmp)
    try:
        status, msg = _run_vector_add(result, nvcc, work, posixpath.join(tmp_root, os.path.basename(work)), runner)
        checks.add("cuda", status, msg)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _cuda_not_run(enabled, driver_ok):
    """Why the CUDA test is not run at all, or None."""
    if not enabled:
        return "CUDA vectorAdd on the host: turned off (cuda_test false)"
    if driver_ok is False:
        return "CUDA vectorAdd on the host: not run: the driver does not answer"
    if driver_ok is None:
        return "CUDA vectorAdd on the host: not run: the driver is in the GPU Operator's container"
    return None


def _nvcc(host, nvcc_path):
    """The nvcc to build with: ``nvcc_path`` where it exists, else the node's (PATH, /usr/local/cuda/bin)."""
    if nvcc_path:
        return nvcc_path if host.exists(nvcc_path) else None
    return host.which("nvcc", extra_dirs=NVCC_DIRS)


def _run_vector_add(result, nvcc, work, host_work, runner):
    """``(status, msg)`` of building the vector add in ``work`` (``host_work`` on the node) and
    running it; ``result`` gets whether it ran, passed, and its output."""
    with open(os.path.join(work, "vectoradd.cu"), "w") as handle:
        handle.write(VECTOR_ADD_CU)
    source = posixpath.join(host_work, "vectoradd.cu")
    binary = posixpath.join(host_work, "vectoradd")
    rc, out, err = runner([nvcc, "-o", binary, source])
    if rc != 0:
        reason = "timed out" if rc == 124 else _tail(err or out, 300) or "exit %s" % rc
        return SKIPPED, "CUDA vectorAdd on the host: not run: %s could not build it: %s" % (nvcc, reason)
    rc, out, err = runner([binary])
    result["ran"] = True
    result["output"] = _tail(out + ("\n" + err if err else ""))
    result["passed"] = rc == 0 and PASSED in out
    if result["passed"]:
        return OK, "CUDA vectorAdd passed on the host (%s)" % (first_line(out) or "Test PASSED")
    return FAILED, "CUDA vectorAdd failed on the host: %s" % _vector_add_failure(rc, out, err)


def _vector_add_failure(rc, out, err):
    """Why the vector add failed: a timeout, or its exit status and last lines."""
    if rc == 124:
        return "did not finish in time"
    lines = [l for l in (out + "\n" + err).splitlines() if l.strip() and "Test FAILED" not in l]
    return "exit %s: %s" % (rc, "; ".join(lines[-3:]) or "no output")
