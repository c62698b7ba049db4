"""D01 GEMM in TIRx: c = a @ w^T, bf16 in, fp32 accumulate, bf16 out, for sm_90a.

One CTA per 128 x 256 tile of c, 384 threads (warp-specialized):
  * warpgroup 0, thread 0: producer. Per k-block of 64 it waits for a free slot of a 4-stage
    shared-memory ring (mbarrier `empty`), arms `full` with the stage's byte count and
    issues two TMA loads (a 128 x 64, w 256 x 64, 128B-swizzled).
  * warpgroups 1 and 2: consumers, one 64-row half of the tile each. Per k-block: wait
    `full`, 4 x wgmma.mma_async m64n256k16 (128 fp32 accumulators per thread), wait, release
    the slot (one arrive per consumer warp, 8 in all).
  * Epilogue: fp32 -> packed bf16 pairs, one 4-byte store per pair, predicated on M and N.
Ragged shapes: TMA zero-fills boxes that cross an edge (M, N, K tails); stores are predicated.
Needs K % 8 == 0 and N % 8 == 0 (16-byte row pitch for TMA, aligned bf16 pairs).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.backend.cuda.lang import SMEMPool
from tvm_tirx.backend.cuda.layout import mma_shared_layout
from tvm_tirx.ir import PtrType
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

BM, BN, BK, STAGES = 128, 256, 64, 4
A_BYTES, B_BYTES = BM * BK * 2, BN * BK * 2
HALF_A = 64 * BK * 2  # bytes of one consumer's 64-row half of the a tile
NACC = BN // 2  # fp32 accumulators per thread for m64nBNk16
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
WGMMA = f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.bf16.bf16"
# descriptor bits above the start address: 128B swizzle (1 << 62), SBO 1024 B, LBO 1
DESC_HI = (1 << 62) | ((1024 // 16) << 32) | (1 << 16)
FENCE_SRC = ('\n__forceinline__ __device__ void acc_fence(float& r) {'
             ' asm volatile("" : "+f"(r) :: "memory"); }\n')
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def desc(addr):
    """wgmma shared-memory descriptor of a 128B-swizzled K-major tile at shared address addr."""
    return T.uint64(DESC_HI) | T.cast((addr >> T.uint32(4)) & T.uint32(0x3FFF), "uint64")


def tile_view(base, byte_off, rows, layout):
    """(rows, BK) bf16 view of the ring at a runtime byte offset, 1024-byte aligned."""
    ty = T.Tensor((rows, BK), "bfloat16", scope="shared.dyn", align=1024, layout=layout)
    ptr = T.ptr_byte_offset(base, byte_off, ty=PtrType("bfloat16", "shared.dyn"))
    return T.decl_tensor(ptr, ty_args=[ty])


def build(spec):
    M, N, K = spec.dims["M"], spec.dims["N"], spec.dims["K"]
    assert K % 8 == 0 and N % 8 == 0 and M * K < 2**31 and N * K < 2**31 and M * N < 2**31
    NUM_K = (K + BK - 1) // BK
    GRID = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    A_TILE = mma_shared_layout("bfloat16", 3, (BM, BK))  # 3 = 128B swizzle
    B_TILE = mma_shared_layout("bfloat16", 3, (BN, BK))

    @T.function
    def gemm(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
             C: T.Tensor((M, N), "bfloat16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=384))
        tid = T.cuda.thread_idx("x")
        bn = T.cuda.block_idx("x")
        bm = T.cuda.block_idx("y")
        pool = SMEMPool()
        raw = pool.alloc((STAGES * (A_BYTES + B_BYTES) + 1024,), "uint8", align=1024)
        full = pool.alloc((STAGES,), "uint64", align=8)
        empty = pool.alloc((STAGES,), "uint64", align=8)
        pool.commit()
        raw_addr = T.cuda.cvta_generic_to_shared(raw.ptr_to([0]))
        ring = (raw_addr + T.uint32(1023)) & T.uint32(0xFFFFFC00)  # 1024-byte aligned start
        pad = T.cast(ring - raw_addr, "int32")
        wg = tid // 128
        if tid == 0:
            for s in T.unroll(STAGES):
                T.ptx.mbarrier.init.shared.b64(full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(8))  # 8 consumer warps
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if wg == 0:  # producer warpgroup: thread 0 drives TMA
            if tid == 0:
                for k in range(NUM_K):
                    s = k % STAGES
                    As = tile_view(raw.data, pad + s * A_BYTES, BM, A_TILE)
                    Bs = tile_view(raw.data, pad + STAGES * A_BYTES + s * B_BYTES, BN, B_TILE)
                    T.cuda.mbarrier_wait(empty.ptr_to([s]), ((k // STAGES) & 1) ^ 1)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(full.ptr_to([s]),
                                                               T.uint32(A_BYTES + B_BYTES))
                    T.cuda.tile.apply(T.ptx[TMA_LOAD], As[0:BM, 0:BK], A[0:M, 0:K], box=(BM, BK),
                                      coords=(bm * BM, k * BK), mbar=full.ptr_to([s]), swizzle=3)
                    T.cuda.tile.apply(T.ptx[TMA_LOAD], Bs[0:BN, 0:BK], B[0:N, 0:K], box=(BN, BK),
                                      coords=(bn * BN, k * BK), mbar=full.ptr_to([s]), swizzle=3)
        else:  # consumer warpgroups 1 and 2: rows (wg - 1) * 64 .. + 63 of the tile
            half = wg - 1
            warp = (tid % 128) // 32
            lane = tid % 32
            acc = T.alloc_local((NACC,), "float32")
            packed = T.alloc_local((1,), "uint32")
            for i in T.unroll(NACC):
                acc[i] = T.float32(0.0)
            for k in range(NUM_K):
                s = k % STAGES
                a_addr = ring + T.cast(s * A_BYTES + half * HALF_A, "uint32")
                b_addr = ring + T.cast(STAGES * A_BYTES + s * B_BYTES, "uint32")
                T.cuda.mbarrier_wait(full.ptr_to([s]), (k // STAGES) & 1)
                T.ptx.wgmma.fence.sync.aligned()
                for kk in T.unroll(BK // 16):  # +32 bytes per k16 step inside the swizzle atom
                    T.ptx[WGMMA](*[acc[i] for i in range(NACC)], desc(a_addr + T.uint32(kk * 32)),
                                 desc(b_addr + T.uint32(kk * 32)), True, 1, 1, 0, 0)
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if lane == 0:
                    T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([s]), T.uint32(1))
            for i in T.unroll(NACC):  # no accumulator read may move above wait_group
                T.cuda.func_call("acc_fence", acc[i], FENCE_SRC)
            # acc[4j + 2h + v] -> row 16 * warp + lane // 4 + 8h, col 8j + 2 * (lane % 4) + v
            for h in T.unroll(2):
                row = bm * BM + half * 64 + warp * 16 + lane // 4 + h * 8
                if row < M:
                    for j in T.unroll(BN // 8):
                        col = bn * BN + j * 8 + (lane % 4) * 2
                        if col < N:  # N is even, so col + 1 < N too
                            T.ptx.cvt.rn.bf16x2.f32(packed[0], acc[j * 4 + h * 2 + 1],
                                                    acc[j * 4 + h * 2])
                            T.ptx["st.global.b32"](C.ptr_to([row, col]), packed[0])

    ex = tvm_tirx.tirx.compile(gemm, target=TARGET)
    return ex["gemm"]  # run(a, w, c)
