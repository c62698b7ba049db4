"""D01 gemm, TIRx (tvm_tirx 0.1.0a4) expert solution: c = a @ w^T, bf16 in, fp32 accumulate, bf16 out.

Built on the team's H200-verified warp-specialized Hopper GEMM
(698 TFLOP/s at 4096^3, 89.8% of cuBLAS; the pattern of docs/dsl/tirx.md section 4):

* CTA = 1 producer warpgroup + 2 consumer warpgroups (384 threads).
* Producer: one thread issues two TMA loads per k-block (``cp.async.bulk.tensor.2d``, 128B
  swizzle; ``T.cuda.tile.apply`` builds the CUtensorMap on the host and passes it as a
  ``__grid_constant__`` parameter) into a STAGES-deep shared-memory ring, signalling
  ``full[s]`` with ``mbarrier.arrive.expect_tx``.
* Consumers: wait ``full[s]``, issue ``wgmma.mma_async`` m64nBNk16 (SS form, bf16 -> f32) from
  the 128B-swizzled K-major tiles, keep one wgmma group in flight (wait_group 1) and give the
  previous slot back on ``empty[s]`` (one arrive per consumer warp).
* Persistent grid (min(#SMs, tiles) CTAs, tile = blockIdx.x + i * gridDim.x) with GROUP_M
  rasterization for L2 reuse; the producer runs ahead into the next tile during the epilogue.
* Ragged edges: TMA zero-fills out-of-bounds rows/columns of every box (M, N and K tails, and
  boxes larger than the whole tensor), and the epilogue predicates every store on row < M,
  col < N. TMA needs 16-byte row pitches: K % 8 == 0 (guaranteed by the problem).

M, N, K stay symbolic in the kernel (the verified code path); build() compiles once per shape
set. VARIANT picks the configuration; the later entries of VARIANTS are simpler fallbacks.
"""
import torch
import tvm_tirx
from tvm_tirx.backend.cuda.lang import SMEMPool
from tvm_tirx.backend.cuda.layout import mma_shared_layout
from tvm_tirx.ir import PtrType
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

# Configurations (all H200-checked in the team's example at (1000, 520, 136) and 4096^3).
#   0: 128x256 tile, 4 stages, persistent, GROUP_M 8, wait_group 1  (698 TFLOP/s)
#   1: 128x128 tile (2 m64 sub-tiles per consumer), 4 stages, persistent (~600 TFLOP/s)
#   2: 128x256 tile, one tile per CTA (non-persistent)
#   3: 128x128 tile, one tile per CTA, wait_group 0: the simplest protocol
VARIANTS = [
    dict(bn=256, mt=1, stages=4, persistent=True, group_m=8, wait_depth=1, l2=3),
    dict(bn=128, mt=2, stages=4, persistent=True, group_m=8, wait_depth=1, l2=3),
    dict(bn=256, mt=1, stages=4, persistent=False, group_m=8, wait_depth=1, l2=3),
    dict(bn=128, mt=1, stages=4, persistent=False, group_m=8, wait_depth=0, l2=3),
]
VARIANT = 0
DEFAULT_SMS = 132  # H200; used when no GPU is visible (compile-only builds)

M = T.dynamic("M")
N = T.dynamic("N")
K = T.dynamic("K")

BK = 64  # one 128-byte swizzle row of bf16
NCONS = 2  # consumer warpgroups
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
# wgmma shared-memory descriptor bits above the 14-bit start address:
# layout_type = 1 (128B swizzle) at [62, 64), SBO = 1024 B >> 4 at [32, 46), LBO = 1 at [16, 30)
DESC_HI = (1 << 62) | ((1024 // 16) << 32) | (1 << 16)
# Register fence on one accumulator (by reference) so that no accumulator read is scheduled
# before wgmma.wait_group.
FENCE_SRC = (
    "\n__forceinline__ __device__ void tirx_gemm_acc_fence(float& r) {"
    ' asm volatile("" : "+f"(r) :: "memory"); }\n'
)


def _tile_view(base, byte_off, rows, layout):
    """A (rows, BK) bf16 view at a (runtime) byte offset of the dynamic shared-memory ring."""
    return T.decl_tensor(
        T.ptr_byte_offset(base, byte_off, ty=PtrType("bfloat16", "shared.dyn")),
        ty_args=[
            T.Tensor((rows, BK), "bfloat16", scope="shared.dyn", align=1024, layout=layout)
        ],
    )


def _desc(addr):
    """64-bit wgmma matrix descriptor of a 128B-swizzled K-major tile at shared address addr."""
    return T.uint64(DESC_HI) | T.cast((addr >> T.uint32(4)) & T.uint32(0x3FFF), "uint64")


def make_gemm(bn=256, mt=1, stages=4, persistent=True, group_m=8, wait_depth=1, l2=3,
              num_sms=DEFAULT_SMS):
    """One GEMM variant.

    bn: N tile (the wgmma N), 64..256, multiple of 64. mt: m64 sub-tiles per consumer
    warpgroup (BM = 128 * mt). stages: TMA/mbarrier ring depth. persistent: tile loop over a
    grid of min(num_sms, tiles) CTAs. group_m: M-tiles per rasterization group. wait_depth:
    wgmma groups left in flight before a slot is released (0 or 1). l2: tensor-map L2
    promotion (0 none .. 3 256B).
    """
    assert bn % 64 == 0 and 64 <= bn <= 256 and mt in (1, 2) and wait_depth in (0, 1)
    BM = NCONS * 64 * mt
    BN = bn
    STAGES = stages
    MT = mt
    NA = BN // 2  # f32 accumulators per thread per m64 sub-tile
    NACC = MT * NA
    THREADS = 128 * (NCONS + 1)
    A_BYTES = BM * BK * 2
    B_BYTES = BN * BK * 2
    RING = STAGES * (A_BYTES + B_BYTES)
    GROUP_M = group_m
    GRID_SMS = num_sms
    WAIT1 = wait_depth == 1
    PERSIST = persistent
    L2P = l2
    WGMMA = f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.bf16.bf16"
    if persistent:
        GRID = T.min(num_sms, T.ceildiv(M, BM) * T.ceildiv(N, BN))
    else:
        GRID = T.ceildiv(M, BM) * T.ceildiv(N, BN)
    A_TILE = mma_shared_layout("bfloat16", 3, (BM, BK))
    B_TILE = mma_shared_layout("bfloat16", 3, (BN, BK))
    assert RING + 1024 + 2 * STAGES * 8 <= 227 * 1024, "shared memory ring too large"

    @T.function
    def gemm(
        A: T.Tensor((M, K), T.bfloat16),
        B: T.Tensor((N, K), T.bfloat16),
        C: T.Tensor((M, N), T.bfloat16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=THREADS))
        tid = T.cuda.thread_idx("x")
        bid = T.cuda.block_idx("x")
        pool = SMEMPool()
        raw = pool.alloc((RING + 1024,), "uint8", align=1024)
        full = pool.alloc((STAGES,), "uint64", align=8)
        empty = pool.alloc((STAGES,), "uint64", align=8)
        pool.commit()
        # The ring starts at the first 1024-B boundary of the dynamic shared window
        # (128B-swizzle atoms must be 1024-B aligned for base_offset = 0).
        raw_addr = T.cuda.cvta_generic_to_shared(raw.ptr_to([0]))
        ring_addr = (raw_addr + T.uint32(1023)) & T.uint32(0xFFFFFC00)
        pad = T.cast(ring_addr - raw_addr, "int32")

        # Scalars with runtime divisors live in a local array, so the generated code does not
        # re-expand the division chains at every use (keeps the build at a few seconds).
        sc = T.alloc_local((8,), "int32")
        sc[0] = T.ceildiv(M, BM)  # tiles_m
        sc[1] = T.ceildiv(N, BN)  # tiles_n
        sc[2] = T.ceildiv(K, BK)  # num_k
        sc[3] = T.min(GRID_SMS, sc[0] * sc[1]) if T.constexpr(PERSIST) else sc[0] * sc[1]
        sc[4] = T.truncdiv(sc[0] * sc[1] - bid + sc[3] - 1, sc[3])  # tiles of this CTA
        sc[5] = GROUP_M * sc[1]  # tiles per rasterization group
        tiles_m = sc[0]
        num_k = sc[2]
        grid = sc[3]
        my_tiles = sc[4]
        in_group = sc[5]
        wg = tid // 128

        if tid == 0:
            for s in T.unroll(STAGES):
                T.ptx.mbarrier.init.shared.b64(full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(NCONS * 4))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()

        if wg == 0:
            # ---------------- producer: one thread drives TMA ----------------
            if tid == 0:
                pos = T.alloc_local((2,), "int32")
                for t in range(my_tiles):
                    tile = bid + t * grid
                    first_m = T.truncdiv(tile, in_group) * GROUP_M
                    gsize = T.min(tiles_m - first_m, GROUP_M)
                    pos[0] = first_m + T.truncmod(T.truncmod(tile, in_group), gsize)  # tm
                    pos[1] = T.truncdiv(T.truncmod(tile, in_group), gsize)  # tn
                    tm = pos[0]
                    tn = pos[1]
                    for k in range(num_k):
                        it = t * num_k + k
                        s = it % STAGES
                        As = _tile_view(raw.data, pad + s * A_BYTES, BM, A_TILE)
                        Bs = _tile_view(raw.data, pad + STAGES * A_BYTES + s * B_BYTES, BN, B_TILE)
                        T.cuda.mbarrier_wait(empty.ptr_to([s]), ((it // STAGES) & 1) ^ 1)
                        T.ptx.mbarrier.arrive.expect_tx.shared.b64(
                            full.ptr_to([s]), T.uint32(A_BYTES + B_BYTES)
                        )
                        T.cuda.tile.apply(
                            T.ptx[TMA_LOAD], As[0:BM, 0:BK], A[0:M, 0:K], box=(BM, BK),
                            coords=(tm * BM, k * BK), mbar=full.ptr_to([s]), swizzle=3,
                            l2_promotion=L2P,
                        )
                        T.cuda.tile.apply(
                            T.ptx[TMA_LOAD], Bs[0:BN, 0:BK], B[0:N, 0:K], box=(BN, BK),
                            coords=(tn * BN, k * BK), mbar=full.ptr_to([s]), swizzle=3,
                            l2_promotion=L2P,
                        )
        else:
            # ---------------- consumers: wgmma + epilogue ----------------
            cw = wg - 1
            ltid = tid % 128
            warp = ltid // 32
            lane = ltid % 32
            acc = T.alloc_local((NACC,), "float32")
            packed = T.alloc_local((1,), "uint32")
            pos = T.alloc_local((2,), "int32")
            for t in range(my_tiles):
                tile = bid + t * grid
                first_m = T.truncdiv(tile, in_group) * GROUP_M
                gsize = T.min(tiles_m - first_m, GROUP_M)
                pos[0] = first_m + T.truncmod(T.truncmod(tile, in_group), gsize)  # tm
                pos[1] = T.truncdiv(T.truncmod(tile, in_group), gsize)  # tn
                tm = pos[0]
                tn = pos[1]
                for i in T.unroll(NACC):
                    acc[i] = T.float32(0.0)
                for k in range(num_k):
                    it = t * num_k + k
                    s = it % STAGES
                    a_addr = ring_addr + T.cast(s * A_BYTES + cw * (MT * 64 * 128), "uint32")
                    b_addr = ring_addr + T.cast(STAGES * A_BYTES + s * B_BYTES, "uint32")
                    T.cuda.mbarrier_wait(full.ptr_to([s]), (it // STAGES) & 1)
                    T.ptx.wgmma.fence.sync.aligned()
                    for kk in T.unroll(BK // 16):
                        for mt_i in T.unroll(MT):
                            T.ptx[WGMMA](
                                *[acc[mt_i * NA + i] for i in range(NA)],
                                _desc(a_addr + T.uint32(mt_i * 64 * 128 + kk * 32)),
                                _desc(b_addr + T.uint32(kk * 32)),
                                True, 1, 1, 0, 0,
                            )
                    T.ptx.wgmma.commit_group.sync.aligned()
                    if T.constexpr(WAIT1):
                        # the group of k-1 is complete: give its slot back
                        T.ptx.wgmma.wait_group.sync.aligned(1)
                        if k > 0:
                            if lane == 0:
                                T.ptx.mbarrier.arrive.shared.b64(
                                    empty.ptr_to([(it + STAGES - 1) % STAGES]), T.uint32(1)
                                )
                    else:
                        T.ptx.wgmma.wait_group.sync.aligned(0)
                        if lane == 0:
                            T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([s]), T.uint32(1))
                if T.constexpr(WAIT1):
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    if num_k > 0:
                        if lane == 0:
                            T.ptx.mbarrier.arrive.shared.b64(
                                empty.ptr_to([(t * num_k + num_k - 1) % STAGES]), T.uint32(1)
                            )
                for i in T.unroll(NACC):
                    T.cuda.func_call("tirx_gemm_acc_fence", acc[i], FENCE_SRC)
                # m64nNk16 f32 fragment: warp w owns rows 16w..16w+15 of each m64 sub-tile;
                # acc[4j + 2h + v] -> (16w + lane/4 + 8h, 8j + 2(lane%4) + v)
                for mt_i in T.unroll(MT):
                    for h in T.unroll(2):
                        row = tm * BM + cw * (MT * 64) + mt_i * 64 + warp * 16 + lane // 4 + h * 8
                        if row < M:
                            for j in T.unroll(BN // 8):
                                col = tn * BN + j * 8 + (lane % 4) * 2
                                base = mt_i * NA + j * 4 + h * 2
                                if col + 1 < N and N % 2 == 0:
                                    T.ptx.cvt.rn.bf16x2.f32(packed[0], acc[base + 1], acc[base])
                                    T.ptx["st.global.b32"](C.ptr_to([row, col]), packed[0])
                                else:
                                    if col < N:
                                        C[row, col] = T.cast(acc[base], "bfloat16")
                                    if col + 1 < N:
                                        C[row, col + 1] = T.cast(acc[base + 1], "bfloat16")

    return gemm


def _num_sms() -> int:
    """SM count of the current GPU (persistent grid size); DEFAULT_SMS without a GPU.

    Only get_device_properties / current_device are used (the evaluator's static check allows
    them; it does not list torch.cuda.is_available). Without a driver they raise: the
    compile-only build then sizes the grid for the H200.
    """
    try:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return int(props.multi_processor_count)
    except Exception:  # noqa: BLE001  (no GPU / no driver: compile-only build)
        return DEFAULT_SMS


_COMPILED: dict = {}


def build(spec):
    """Compile the GEMM (VARIANTS[VARIANT]) for spec's shape set and return run(a, w, c)."""
    k = int(spec.dims["K"])
    n = int(spec.dims["N"])
    assert k % 8 == 0 and n % 8 == 0, "TMA needs 16-byte row pitches (K % 8 == 0)"
    key = (VARIANT, _num_sms())
    if key not in _COMPILED:
        # M, N and K are symbolic: one module serves every shape set of this process.
        kernel = make_gemm(**VARIANTS[VARIANT], num_sms=key[1])
        target = Target({"kind": "cuda", "arch": "sm_90a"})
        _COMPILED[key] = tvm_tirx.tirx.compile(kernel, target=target)
    ex = _COMPILED[key]
    fn = ex["gemm"]

    def run(a, w, c):
        fn(a, w, c)

    run.module = ex  # keep the compiled module alive with the launcher
    return run
