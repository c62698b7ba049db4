"""D01 GEMM in CuTe DSL: c = a @ w^T, bf16 in, fp32 accumulate, bf16 out, for sm_90a.

One CTA (two warpgroups, 256 threads) per 128 x 128 tile of c:
  * TMA loads of the a tile (128 x 64) and w tile (128 x 64) per k-block into a 5-stage,
    128B-swizzled shared-memory ring guarded by PipelineTmaAsync (full/empty mbarriers);
    warp 0 is also the producer;
  * each warpgroup owns 64 rows of the tile and issues wgmma (m64n128k16, A and B from
    shared memory) through a TiledMma with a (2, 1, 1) atom layout, 4 per k-block, and
    waits for them before releasing the slot (8 consumer warps arrive on `empty`);
  * epilogue: accumulators -> bf16 -> global, element-wise predicated when the tile crosses
    the M or N edge.
Ragged M/N/K: TMA zero-fills out-of-bounds parts of a box, so partial tiles add zeros.
Needs K % 8 == 0 (16-byte row pitch for TMA); the problem guarantees it.
"""
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.memory import SmemAllocator

BM, BN, BK, STAGES = 128, 128, 64, 5
THREADS = 256  # two consumer warpgroups
TILE = (BM, BN, BK)


@cute.kernel
def gemm_kernel(tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom, mB: cute.Tensor,
                mC: cute.Tensor, tiled_mma: cute.TiledMma, sa_layout: cute.ComposedLayout,
                sb_layout: cute.ComposedLayout, ragged: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bm, bn, _ = cute.arch.block_idx()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    if warp == 0:
        cpasync.prefetch_descriptor(tma_a)
        cpasync.prefetch_descriptor(tma_b)

    @cute.struct
    class Storage:
        bars: cute.struct.MemRange[cutlass.Int64, STAGES * 2]  # full + empty
        sA: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, cute.cosize(sa_layout)], 1024]
        sB: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, cute.cosize(sb_layout)], 1024]

    storage = SmemAllocator().allocate(Storage)
    sA = storage.sA.get_tensor(sa_layout.outer, swizzle=sa_layout.inner)  # (BM, BK, STAGES)
    sB = storage.sB.get_tensor(sb_layout.outer, swizzle=sb_layout.inner)  # (BN, BK, STAGES)
    stage_bytes = (cute.size_in_bytes(cutlass.BFloat16, cute.slice_(sa_layout, (None, None, 0)))
                   + cute.size_in_bytes(cutlass.BFloat16, cute.slice_(sb_layout, (None, None, 0))))
    pipe = pipeline.PipelineTmaAsync.create(
        barrier_storage=storage.bars.data_ptr(), num_stages=STAGES, tx_count=stage_bytes,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, THREADS // 32),
        cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)))

    gA = cute.local_tile(mA, TILE, (bm, bn, None), proj=(1, None, 1))  # (BM, BK, k_tiles)
    gB = cute.local_tile(mB, TILE, (bm, bn, None), proj=(None, 1, 1))  # (BN, BK, k_tiles)
    gC = cute.local_tile(mC, TILE, (bm, bn, None), proj=(1, 1, None))  # (BM, BN)
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
                                       cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2),
                                       cute.group_modes(gB, 0, 2))

    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # shared-memory descriptors
    tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
    tCgC = thr_mma.partition_C(gC)
    acc = cute.make_rmem_tensor(tCgC.shape, cutlass.Float32)
    acc.fill(0.0)
    tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
    cute.arch.sync_threads()  # barriers initialized before anyone waits on them

    k_tiles = cute.size(gA, mode=[2])
    prod = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
    cons = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
    if warp == 0:  # prologue: fill the ring
        for _ in cutlass.range(cutlass.min(STAGES, k_tiles), unroll=1):
            pipe.producer_acquire(prod)
            bar = pipe.producer_get_barrier(prod)
            cute.copy(tma_a, tAgA[(None, prod.count)], tAsA[(None, prod.index)], tma_bar_ptr=bar)
            cute.copy(tma_b, tBgB[(None, prod.count)], tBsB[(None, prod.index)], tma_bar_ptr=bar)
            pipe.producer_commit(prod)
            prod.advance()
    for _ in cutlass.range(k_tiles, unroll=1):
        pipe.consumer_wait(cons)
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):  # BK / 16 wgmma
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb, cons.index],
                      tCrB[None, None, kb, cons.index], acc)
        warpgroup.commit_group()
        warpgroup.wait_group(0)
        pipe.consumer_release(cons)
        cons.advance()
        if warp == 0 and prod.count < k_tiles:  # refill the slot just released
            pipe.producer_acquire(prod)
            bar = pipe.producer_get_barrier(prod)
            cute.copy(tma_a, tAgA[(None, prod.count)], tAsA[(None, prod.index)], tma_bar_ptr=bar)
            cute.copy(tma_b, tBgB[(None, prod.count)], tBsB[(None, prod.index)], tma_bar_ptr=bar)
            pipe.producer_commit(prod)
            prod.advance()

    out = cute.make_fragment_like(tCgC)  # bf16 registers shaped like this thread's C fragment
    out.store(acc.load().to(mC.element_type))
    if cutlass.const_expr(ragged):
        cC = cute.local_tile(cute.make_identity_tensor(mC.shape), TILE, (bm, bn, None),
                             proj=(1, 1, None))
        tCcC = thr_mma.partition_C(cC)  # (m, n) coordinate of every element of the fragment
        for i in cutlass.range_constexpr(cute.size(out)):
            if cute.elem_less(tCcC[i], mC.shape):
                tCgC[i] = out[i]
    else:
        cute.autovec_copy(out, tCgC)


@cute.jit
def gemm(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream: cuda.CUstream):
    k_major = warpgroup.OperandMajorMode.K
    tiled_mma = sm90_utils.make_trivial_tiled_mma(cutlass.BFloat16, cutlass.BFloat16, k_major,
                                                  k_major, cutlass.Float32, (2, 1, 1),
                                                  tiler_mn=(64, BN))
    sa = sm90_utils.make_smem_layout_a(utils.LayoutEnum.ROW_MAJOR, TILE, cutlass.BFloat16, STAGES)
    sb = sm90_utils.make_smem_layout_b(utils.LayoutEnum.ROW_MAJOR, TILE, cutlass.BFloat16, STAGES)
    g2s = cpasync.CopyBulkTensorTileG2SOp()
    tma_a, tA = cpasync.make_tiled_tma_atom(g2s, mA, cute.slice_(sa, (None, None, 0)), (BM, BK))
    tma_b, tB = cpasync.make_tiled_tma_atom(g2s, mB, cute.slice_(sb, (None, None, 0)), (BN, BK))
    m = cute.size(mA, mode=[0])
    n = cute.size(mB, mode=[0])
    ragged = m % BM != 0 or n % BN != 0
    grid = [(m + BM - 1) // BM, (n + BN - 1) // BN, 1]
    gemm_kernel(tma_a, tA, tma_b, tB, mC, tiled_mma, sa, sb, ragged).launch(
        grid=grid, block=[THREADS, 1, 1], stream=stream)


def build(spec):
    M, N, K = spec.dims["M"], spec.dims["N"], spec.dims["K"]
    assert K % 8 == 0 and N % 8 == 0 and M * N < 2**31
    bf16 = cutlass.BFloat16
    a = make_fake_compact_tensor(bf16, (M, K), stride_order=(1, 0), assumed_align=16)
    w = make_fake_compact_tensor(bf16, (N, K), stride_order=(1, 0), assumed_align=16)
    c = make_fake_compact_tensor(bf16, (M, N), stride_order=(1, 0), assumed_align=16)
    stream = make_fake_stream(use_tvm_ffi_env_stream=True)
    return cute.compile(gemm, a, w, c, stream, options="--enable-tvm-ffi")  # run(a, w, c)
