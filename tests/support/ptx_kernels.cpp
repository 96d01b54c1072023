// PTX kernels for the GPU tests and benchmarks: the module text and the
// launch helpers (see ptx_kernels.hpp). The PTX is checked with
// `ptxas -arch=sm_90` (and sm_75, sm_80, sm_100) from the CUDA 13.0 toolkit.
#include "ptx_kernels.hpp"

#include "cudyn/loader/driver_call.hpp"

#include <algorithm>
#include <utility>

namespace cudyn_test {

const char kMemoryKernelsPtx[] = R"PTX(
.version 7.0
.target sm_70
.address_size 64

// update_u32(ptr, n, value, add): for i < n (grid-stride),
// ptr[i] = value when add is 0, ptr[i] += value otherwise.
.visible .entry update_u32(
    .param .u64 update_u32_ptr,
    .param .u64 update_u32_n,
    .param .u32 update_u32_value,
    .param .u32 update_u32_add
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<12>;

    ld.param.u64 %rd1, [update_u32_ptr];
    ld.param.u64 %rd2, [update_u32_n];
    ld.param.u32 %r1, [update_u32_value];
    ld.param.u32 %r7, [update_u32_add];
    setp.ne.u32 %p2, %r7, 0;
    cvta.to.global.u64 %rd3, %rd1;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd4, %r2, %r3;
    cvt.u64.u32 %rd5, %r4;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r5, %r3;
UPDATE_LOOP:
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra UPDATE_DONE;
    shl.b64 %rd7, %rd4, 2;
    add.u64 %rd8, %rd3, %rd7;
    mov.u32 %r6, %r1;
    @%p2 ld.global.u32 %r8, [%rd8];
    @%p2 add.u32 %r6, %r8, %r1;
    st.global.u32 [%rd8], %r6;
    add.u64 %rd4, %rd4, %rd6;
    bra UPDATE_LOOP;
UPDATE_DONE:
    ret;
}

// sum_u32(ptr, n, out): *out += ptr[0] + ... + ptr[n-1] (mod 2^32). n is a
// multiple of 4 and ptr 16-byte aligned: 128-bit loads, four independent
// ones per iteration of a grid-stride loop, a warp shuffle reduction and
// one atomic add per warp. Block size must be a multiple of 32.
.visible .entry sum_u32(
    .param .u64 sum_u32_ptr,
    .param .u64 sum_u32_n,
    .param .u64 sum_u32_out
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<24>;

    ld.param.u64 %rd1, [sum_u32_ptr];
    ld.param.u64 %rd2, [sum_u32_n];
    ld.param.u64 %rd3, [sum_u32_out];
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd3;
    shr.u64 %rd6, %rd2, 2;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd7, %r1, %r2;
    cvt.u64.u32 %rd8, %r3;
    add.u64 %rd7, %rd7, %rd8;
    mul.wide.u32 %rd9, %r4, %r2;
    shl.b64 %rd10, %rd9, 4;
    mul.lo.u64 %rd11, %rd9, 3;
    shl.b64 %rd12, %rd9, 2;
    mov.u32 %r5, 0;
SUM_MAIN:
    add.u64 %rd13, %rd7, %rd11;
    setp.ge.u64 %p1, %rd13, %rd6;
    @%p1 bra SUM_TAIL;
    shl.b64 %rd14, %rd7, 4;
    add.u64 %rd15, %rd4, %rd14;
    add.u64 %rd16, %rd15, %rd10;
    add.u64 %rd17, %rd16, %rd10;
    add.u64 %rd18, %rd17, %rd10;
    ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd15];
    ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%rd16];
    ld.global.v4.u32 {%r14, %r15, %r16, %r17}, [%rd17];
    ld.global.v4.u32 {%r18, %r19, %r20, %r21}, [%rd18];
    add.u32 %r6, %r6, %r7;
    add.u32 %r8, %r8, %r9;
    add.u32 %r10, %r10, %r11;
    add.u32 %r12, %r12, %r13;
    add.u32 %r14, %r14, %r15;
    add.u32 %r16, %r16, %r17;
    add.u32 %r18, %r18, %r19;
    add.u32 %r20, %r20, %r21;
    add.u32 %r6, %r6, %r8;
    add.u32 %r10, %r10, %r12;
    add.u32 %r14, %r14, %r16;
    add.u32 %r18, %r18, %r20;
    add.u32 %r6, %r6, %r10;
    add.u32 %r14, %r14, %r18;
    add.u32 %r5, %r5, %r6;
    add.u32 %r5, %r5, %r14;
    add.u64 %rd7, %rd7, %rd12;
    bra SUM_MAIN;
SUM_TAIL:
    setp.ge.u64 %p2, %rd7, %rd6;
    @%p2 bra SUM_REDUCE;
    shl.b64 %rd14, %rd7, 4;
    add.u64 %rd15, %rd4, %rd14;
    ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd15];
    add.u32 %r6, %r6, %r7;
    add.u32 %r8, %r8, %r9;
    add.u32 %r5, %r5, %r6;
    add.u32 %r5, %r5, %r8;
    add.u64 %rd7, %rd7, %rd9;
    bra SUM_TAIL;
SUM_REDUCE:
    shfl.sync.bfly.b32 %r22, %r5, 16, 31, -1;
    add.u32 %r5, %r5, %r22;
    shfl.sync.bfly.b32 %r22, %r5, 8, 31, -1;
    add.u32 %r5, %r5, %r22;
    shfl.sync.bfly.b32 %r22, %r5, 4, 31, -1;
    add.u32 %r5, %r5, %r22;
    shfl.sync.bfly.b32 %r22, %r5, 2, 31, -1;
    add.u32 %r5, %r5, %r22;
    shfl.sync.bfly.b32 %r22, %r5, 1, 31, -1;
    add.u32 %r5, %r5, %r22;
    mov.u32 %r23, %laneid;
    setp.ne.u32 %p3, %r23, 0;
    @%p3 bra SUM_DONE;
    red.global.add.u32 [%rd5], %r5;
SUM_DONE:
    ret;
}
// delay_fill_u32(ptr, n, value, delay_ns): every thread waits until
// delay_ns have passed on the GPU's global timer since it started, then
// ptr[i] = value for i < n (grid-stride). A kernel that holds memory for a
// known time: what the teardown tests and the driver-facts probe race
// releases against.
.visible .entry delay_fill_u32(
    .param .u64 delay_fill_u32_ptr,
    .param .u64 delay_fill_u32_n,
    .param .u32 delay_fill_u32_value,
    .param .u64 delay_fill_u32_delay
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<16>;

    ld.param.u64 %rd1, [delay_fill_u32_ptr];
    ld.param.u64 %rd2, [delay_fill_u32_n];
    ld.param.u32 %r1, [delay_fill_u32_value];
    ld.param.u64 %rd9, [delay_fill_u32_delay];
    mov.u64 %rd10, %globaltimer;
    add.u64 %rd11, %rd10, %rd9;
DELAY_SPIN:
    mov.u64 %rd12, %globaltimer;
    setp.lt.u64 %p2, %rd12, %rd11;
    @%p2 bra DELAY_SPIN;
    cvta.to.global.u64 %rd3, %rd1;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd4, %r2, %r3;
    cvt.u64.u32 %rd5, %r4;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r5, %r3;
DELAY_LOOP:
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra DELAY_DONE;
    shl.b64 %rd7, %rd4, 2;
    add.u64 %rd8, %rd3, %rd7;
    st.global.u32 [%rd8], %r1;
    add.u64 %rd4, %rd4, %rd6;
    bra DELAY_LOOP;
DELAY_DONE:
    ret;
}
)PTX";

namespace {
constexpr unsigned int kThreadsPerBlock = 256;  // a multiple of 32: sum_u32 reduces whole warps
}  // namespace

cudyn::Result<PtxKernels> PtxKernels::load() {
    PtxKernels kernels;
    CUDYN_TRY(cudyn::call_driver(&cudyn::DriverTable::cuModuleLoadData_v2000, &kernels.module_,
                                 static_cast<const void*>(kMemoryKernelsPtx)));
    CUDYN_TRY(cudyn::call_driver(&cudyn::DriverTable::cuModuleGetFunction_v2000, &kernels.update_, kernels.module_,
                                 "update_u32"));
    CUDYN_TRY(cudyn::call_driver(&cudyn::DriverTable::cuModuleGetFunction_v2000, &kernels.sum_, kernels.module_,
                                 "sum_u32"));
    CUDYN_TRY(cudyn::call_driver(&cudyn::DriverTable::cuModuleGetFunction_v2000, &kernels.delay_fill_,
                                 kernels.module_, "delay_fill_u32"));
    CUdevice device = 0;
    CUDYN_TRY(cudyn::call_driver(&cudyn::DriverTable::cuCtxGetDevice_v2000, &device));
    CUDYN_TRY(cudyn::call_driver(&cudyn::DriverTable::cuDeviceGetAttribute_v2000, &kernels.multiprocessors_,
                                 CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    return kernels;
}

PtxKernels::PtxKernels(PtxKernels&& other) noexcept
    : module_(std::exchange(other.module_, nullptr)),
      update_(other.update_),
      sum_(other.sum_),
      delay_fill_(other.delay_fill_),
      multiprocessors_(other.multiprocessors_) {}

PtxKernels& PtxKernels::operator=(PtxKernels&& other) noexcept {
    if (this != &other) {
        if (module_ != nullptr) (void)cudyn::call_driver(&cudyn::DriverTable::cuModuleUnload_v2000, module_);
        module_ = std::exchange(other.module_, nullptr);
        update_ = other.update_;
        sum_ = other.sum_;
        delay_fill_ = other.delay_fill_;
        multiprocessors_ = other.multiprocessors_;
    }
    return *this;
}

PtxKernels::~PtxKernels() {
    if (module_ != nullptr) (void)cudyn::call_driver(&cudyn::DriverTable::cuModuleUnload_v2000, module_);
}

unsigned int PtxKernels::blocks_for(std::uint64_t items, unsigned int per_sm) const noexcept {
    const std::uint64_t needed = (items + kThreadsPerBlock - 1) / kThreadsPerBlock;
    const std::uint64_t cap = static_cast<std::uint64_t>(multiprocessors_) * per_sm;
    return static_cast<unsigned int>(std::max<std::uint64_t>(1, std::min(needed, cap)));
}

cudyn::Result<void> PtxKernels::launch(CUfunction function, unsigned int blocks, CUstream stream,
                                       void** parameters) const {
    if (module_ == nullptr) return cudyn::Error::invalid_argument("PtxKernels: the module is not loaded (moved from)");
    return cudyn::call_driver(&cudyn::DriverTable::cuLaunchKernel_v4000, function, blocks, 1u, 1u, kThreadsPerBlock,
                              1u, 1u, 0u, stream, parameters, static_cast<void**>(nullptr));
}

cudyn::Result<void> PtxKernels::update_u32(CUdeviceptr data, std::uint64_t count, std::uint32_t value,
                                           std::uint32_t add, CUstream stream) const {
    void* parameters[] = {&data, &count, &value, &add};
    return launch(update_, blocks_for(count, 16), stream, parameters);
}

cudyn::Result<void> PtxKernels::sum_u32(CUdeviceptr data, std::uint64_t count, CUdeviceptr out,
                                        CUstream stream) const {
    if (count % 4 != 0 || data % 16 != 0)
        return cudyn::Error::invalid_argument("sum_u32: count must be a multiple of 4 and data 16-byte aligned");
    void* parameters[] = {&data, &count, &out};
    // Eight 256-thread blocks per SM fill an H100/H200 SM (2048 threads); each
    // thread keeps four 16-byte loads in flight.
    return launch(sum_, blocks_for(count / 4, 8), stream, parameters);
}

cudyn::Result<void> PtxKernels::delayed_fill_u32(CUdeviceptr data, std::uint64_t count, std::uint32_t value,
                                                 std::uint64_t delay_ns, CUstream stream) const {
    void* parameters[] = {&data, &count, &value, &delay_ns};
    return launch(delay_fill_, blocks_for(count, 16), stream, parameters);
}

}  // namespace cudyn_test
