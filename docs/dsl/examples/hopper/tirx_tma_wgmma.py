"""Check-only kernel (not quoted whole in the brief): the TIRx Hopper pattern of tirx.md §4.

One CTA tile of C = A @ B^T (bf16 in, fp32 accumulate, bf16 out) with TMA loads into a
STAGES-deep shared-memory ring guarded by full/empty mbarriers and raw wgmma.mma_async PTX on
128B-swizzled tiles, in the shape of the team's H200-verified gemm_tma_wgmma.py, cut down to
one producer warpgroup (thread 0 issues TMA) and one consumer warpgroup, no persistence.
spec.dims = {"M", "N", "K"} with M % 64 == 0, N % 128 == 0, K % 64 == 0 (kept equal to the
CuTe check; TMA itself zero-fills ragged boxes and the epilogue is predicated).
check_on_gpu.py runs it against torch; the test compiles it and looks for wgmma/TMA in the PTX.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.backend.cuda.lang import SMEMPool
from tvm_tirx.backend.cuda.layout import mma_shared_layout
from tvm_tirx.ir import PtrType
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

BM, BN, BK, STAGES = 64, 128, 64, 4
A_BYTES, B_BYTES = BM * BK * 2, BN * BK * 2
NACC = BN // 2  # fp32 accumulator registers per thread for m64nBNk16
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
WGMMA = f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.bf16.bf16"
# smem descriptor, bits above the start address: 128B swizzle (1 << 62), SBO = 1024 B, LBO = 1
DESC_HI = (1 << 62) | ((1024 // 16) << 32) | (1 << 16)
FENCE_SRC = ('\n__forceinline__ __device__ void acc_fence(float& r) {'
             ' asm volatile("" : "+f"(r) :: "memory"); }\n')
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def _desc(addr):
    return T.uint64(DESC_HI) | T.cast((addr >> T.uint32(4)) & T.uint32(0x3FFF), "uint64")


def _view(base, byte_off, rows, layout):
    """A (rows, BK) bf16 tile at a runtime byte offset of the ring, 1024-B aligned, swizzled."""
    ty = T.Tensor((rows, BK), "bfloat16", scope="shared.dyn", align=1024, layout=layout)
    ptr = T.ptr_byte_offset(base, byte_off, ty=PtrType("bfloat16", "shared.dyn"))
    return T.decl_tensor(ptr, ty_args=[ty])


def build(spec):
    M, N, K = spec.dims["M"], spec.dims["N"], spec.dims["K"]
    assert M % BM == 0 and N % BN == 0 and K % BK == 0
    NUM_K = K // BK
    A_TILE = mma_shared_layout("bfloat16", 3, (BM, BK))  # 3 = 128B swizzle
    B_TILE = mma_shared_layout("bfloat16", 3, (BN, BK))

    @T.function
    def tma_wgmma(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
                  C: T.Tensor((M, N), "bfloat16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(N // BN, M // BM), block=256))
        tid = T.cuda.thread_idx("x")
        bn = T.cuda.block_idx("x")
        bm = T.cuda.block_idx("y")
        pool = SMEMPool()  # dynamic shared memory, bump-allocated
        raw = pool.alloc((STAGES * (A_BYTES + B_BYTES) + 1024,), "uint8", align=1024)
        full = pool.alloc((STAGES,), "uint64", align=8)
        empty = pool.alloc((STAGES,), "uint64", align=8)
        pool.commit()
        raw_addr = T.cuda.cvta_generic_to_shared(raw.ptr_to([0]))
        ring = (raw_addr + T.uint32(1023)) & T.uint32(0xFFFFFC00)  # 1024-B aligned ring start
        pad = T.cast(ring - raw_addr, "int32")
        if tid == 0:
            for s in T.unroll(STAGES):
                T.ptx.mbarrier.init.shared.b64(full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(4))  # 4 consumer warps
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid < 128:  # producer warpgroup: one thread drives TMA
            if tid == 0:
                for k in range(NUM_K):
                    s = k % STAGES
                    As = _view(raw.data, pad + s * A_BYTES, BM, A_TILE)
                    Bs = _view(raw.data, pad + STAGES * A_BYTES + s * B_BYTES, BN, B_TILE)
                    T.cuda.mbarrier_wait(empty.ptr_to([s]), ((k // STAGES) & 1) ^ 1)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(full.ptr_to([s]),
                                                               T.uint32(A_BYTES + B_BYTES))
                    T.cuda.tile.apply(T.ptx[TMA_LOAD], As[0:BM, 0:BK], A[0:M, 0:K], box=(BM, BK),
                                      coords=(bm * BM, k * BK), mbar=full.ptr_to([s]), swizzle=3)
                    T.cuda.tile.apply(T.ptx[TMA_LOAD], Bs[0:BN, 0:BK], B[0:N, 0:K], box=(BN, BK),
                                      coords=(bn * BN, k * BK), mbar=full.ptr_to([s]), swizzle=3)
        else:  # consumer warpgroup: wgmma
            warp = (tid - 128) // 32
            lane = tid % 32
            acc = T.alloc_local((NACC,), "float32")
            for i in T.unroll(NACC):
                acc[i] = T.float32(0.0)
            for k in range(NUM_K):
                s = k % STAGES
                a_addr = ring + T.cast(s * A_BYTES, "uint32")
                b_addr = ring + T.cast(STAGES * A_BYTES + s * B_BYTES, "uint32")
                T.cuda.mbarrier_wait(full.ptr_to([s]), (k // STAGES) & 1)
                T.ptx.wgmma.fence.sync.aligned()
                for kk in T.unroll(BK // 16):  # +32 B per k16 step inside the swizzle atom
                    T.ptx[WGMMA](*[acc[i] for i in range(NACC)], _desc(a_addr + T.uint32(kk * 32)),
                                 _desc(b_addr + T.uint32(kk * 32)), True, 1, 1, 0, 0)
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if lane == 0:
                    T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([s]), T.uint32(1))
            for i in T.unroll(NACC):  # keep accumulator reads after wait_group
                T.cuda.func_call("acc_fence", acc[i], FENCE_SRC)
            # acc[4j + 2h + v] -> row 16 * warp + lane // 4 + 8h, col 8j + 2 * (lane % 4) + v
            for j in T.unroll(BN // 8):
                for h in T.unroll(2):
                    for v in T.unroll(2):
                        row = bm * BM + warp * 16 + lane // 4 + h * 8
                        col = bn * BN + j * 8 + (lane % 4) * 2 + v
                        if row < M and col < N:
                            C[row, col] = T.cast(acc[j * 4 + h * 2 + v], "bfloat16")

    ex = tvm_tirx.tirx.compile(tma_wgmma, target=TARGET)
    return ex["tma_wgmma"]  # run(a, b, c)
