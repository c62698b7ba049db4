"""C04 cross_entropy, CuTe DSL expert solution: loss[t] = logsumexp(logits[t, :]) - logits[t, target[t]].

logits bf16 [T, V] (V = 128256 in the benchmark: 250 KB per row), target int64 [T], loss fp32
[T].  Memory-bound: every logit is read exactly once; nothing but one fp32 per row is written.

Design
  * One compile per shape set with static (T, V).  One CTA of TPR threads per row (TPR = 256,
    fewer for short rows), one pass over the row with an online (running max, rescaled sum):
    a row does not fit in registers, but the loss needs only the log-sum-exp, so the row is
    streamed.  Each loop iteration a thread loads U = 8 128-bit vectors (64 bf16, 128 B in flight),
    vector j at column it * CHUNK + (j * TPR + lane) * 8, so a warp reads 512 contiguous bytes
    per load; CHUNK = TPR * U * 8 = 16384 columns at TPR = 256 (V = 128256: 7 full iterations,
    unpredicated, and one predicated tail iteration of 1696 vectors).  Bytes in flight come from
    occupancy: offline ptxas (sm_90a) gives 47 registers, so 5 CTAs of 256 threads fit an SM.
  * Per iteration and thread: chunk max with a tree of max.bf16x2 on the packed words (exact,
    half an instruction per value); m' = max(m, chunk max); s = s * exp2((m - m') log2 e)
    (select 1 when m' == m, so an all-padding chunk cannot make -inf - -inf = NaN); then
    s += exp2(x log2 e - m' log2 e) per value (one FFMA + one ex2.approx, added in element order
    into NACC independent accumulators).  About 5 instructions and one MUFU op per value, inside
    the ~16-instruction budget of a 2-byte-per-value stream at 4.17 TB/s on 132 SMs.
  * End of row: M = block max of the per-thread m (warp butterflies + shared memory), every thread
    rescales its s by exp2((m - M) log2 e), S = block sum, lse = M + log2(S) ln 2 (lg2.approx),
    and thread 0 writes lse - logits[t, target[t]] (that logit and the target are read once by
    plain scalar loads issued before the loop, so their latency is hidden).
  * fp32 throughout; the common rounding of m' log2 e shifts every exponent of a row alike (lse
    error ~1e-5 absolute, against a ~4e-3 bound); no bf16 rounding anywhere.
  * Ragged edges: V % 8 == 0, so a 128-bit vector is fully inside or outside the row; the tail
    iteration predicates each vector and fills padding with -inf (max unchanged, exp2 -> 0).  T is
    the grid size, so there are no ragged rows.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Speed notes: there is no software prefetch across iterations; latency hiding relies on several
CTAs per SM (4096 rows = 31 CTAs per SM).  Limits: T * V < 2**31 (32-bit offsets); build()
raises ValueError beyond that.  Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md,
one run): 244.0 us, 92.2% of the roofline ideal.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import dsl_user_op

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # bf16 per 128-bit load
UNROLL = 8         # 128-bit vectors per thread and loop iteration
TPR_MAX = 256      # threads per row (one row per CTA)
NACC = 4           # independent fp32 accumulators of the exp sum (add latency)
LOG2_E = math.log2(math.e)
LN_2 = math.log(2.0)


def _config(V: int) -> tuple[int, int, int]:
    """(TPR threads per row, number of full unpredicated iterations, tail vectors) for V."""
    nvec = V // VEC
    tpr = 32
    while tpr < TPR_MAX and tpr * UNROLL < nvec:
        tpr *= 2
    per_iter = tpr * UNROLL
    return tpr, nvec // per_iter, nvec % per_iter


@dsl_user_op
def _bf16x2_max(a: cutlass.Uint32, b: cutlass.Uint32, *, loc=None, ip=None) -> cutlass.Uint32:
    """Lane-wise max of two packed bf16 pairs (max.bf16x2; exact, no widening)."""
    return cutlass.Uint32(llvm.inline_asm(
        cutlass.Uint32.mlir_type,
        [cutlass.Uint32(a).ir_value(loc=loc, ip=ip), cutlass.Uint32(b).ir_value(loc=loc, ip=ip)],
        "max.bf16x2 $0, $1, $2;",
        "=r,r,r",
        has_side_effects=False,
        loc=loc,
        ip=ip,
    ))


@dsl_user_op
def _u32_as_f32(w: cutlass.Uint32, *, loc=None, ip=None) -> cutlass.Float32:
    """Reinterpret the bits of a 32-bit word as fp32."""
    return cutlass.Float32(llvm.bitcast(cutlass.Float32.mlir_type,
                                        cutlass.Uint32(w).ir_value(loc=loc, ip=ip), loc=loc, ip=ip))


def _packed_max(words: cute.Tensor) -> cutlass.Float32:
    """fp32 max of all bf16 values in a register tensor of packed bf16 pairs (Uint32 view).

    Plain Python, unrolled at trace time: a tree of max.bf16x2, then the two halves of the last
    word are widened (bf16 -> fp32 is a 16-bit shift).
    """
    vals = [words[i] for i in range(cute.size(words))]
    while len(vals) > 1:
        nxt = [_bf16x2_max(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2 == 1:
            nxt.append(vals[-1])
        vals = nxt
    w = vals[0]
    return cute.arch.fmax(_u32_as_f32(w << 16), _u32_as_f32(w & 0xFFFF0000))


@cute.jit
def _group_reduce(val: cutlass.Float32, is_max: cutlass.Constexpr, tpr: cutlass.Constexpr,
                  buf: cute.Tensor):
    """Reduce one fp32 per thread over the TPR threads of the CTA; all of them get the result."""
    if cutlass.const_expr(is_max):
        val = cute.arch.warp_reduction_max(val, threads_in_group=32)
    else:
        val = cute.arch.warp_reduction_sum(val, threads_in_group=32)
    if cutlass.const_expr(tpr > 32):            # combine the warps via smem
        nwarps = tpr // 32
        lane = cute.arch.lane_idx()
        warp = cute.arch.warp_idx()
        if lane == 0:
            buf[warp] = val
        cute.arch.sync_threads()
        v = buf[lane % nwarps]
        if cutlass.const_expr(is_max):
            val = cute.arch.warp_reduction_max(v, threads_in_group=nwarps)
        else:
            val = cute.arch.warp_reduction_sum(v, threads_in_group=nwarps)
    return val


@cute.jit
def _online_update(frag: cute.Tensor, m: cutlass.Float32, s: cutlass.Float32):
    """Fold one register chunk of bf16 values into the running (max m, sum s of exp(x - m))."""
    words = cute.recast_tensor(frag, cutlass.Uint32)
    m_new = cute.arch.fmax(m, _packed_max(words))
    # m_new == m (also both -inf: a thread whose chunks so far were all padding): no rescale.
    rescale = cutlass.Float32(cutlass.select_(
        m_new == m, cutlass.Float32(1.0),
        cute.math.exp2((m - m_new) * LOG2_E, fastmath=True)))
    m_l2 = m_new * LOG2_E
    acc = [s * rescale] + [cutlass.Float32(0.0) for _ in range(NACC - 1)]
    for k in cutlass.range_constexpr(cute.size(frag)):
        x = frag[k].to(cutlass.Float32)
        acc[k % NACC] = acc[k % NACC] + cute.math.exp2(x * LOG2_E - m_l2, fastmath=True)
    total = acc[0]
    for a in acc[1:]:
        total = total + a
    return m_new, total


@cute.kernel
def _cross_entropy_kernel(
    mX: cute.Tensor,            # (T, V) row-major bf16
    mT: cute.Tensor,            # (T,) int64
    mL: cute.Tensor,            # (T,) fp32
    tiled_copy: cute.TiledCopy,
    tpr: cutlass.Constexpr,
    n_full: cutlass.Constexpr,
    n_tail: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()

    smem = SmemAllocator()
    red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)

    # The target logit: two dependent scalar loads, issued before the stream so they overlap it.
    tcol = cutlass.Int32(mT[row])
    x_tgt = mX[row, tcol].to(cutlass.Float32)

    tile = (1, UNROLL * tpr * VEC)
    thr = tiled_copy.get_slice(tidx)
    frag = cute.make_fragment_like(thr.partition_S(cute.local_tile(mX, tile, (row, 0))))

    m = cutlass.Float32(-math.inf)
    s = cutlass.Float32(0.0)
    for it in cutlass.range(n_full, unroll=1):
        tXgX = thr.partition_S(cute.local_tile(mX, tile, (row, it)))
        cute.copy(tiled_copy, tXgX, frag)
        m, s = _online_update(frag, m, s)
    if cutlass.const_expr(n_tail > 0):
        gX = cute.local_tile(mX, tile, (row, n_full))
        cX = cute.local_tile(cute.make_identity_tensor(mX.shape), tile, (row, n_full))
        tXgX = thr.partition_S(gX)
        tCc = thr.partition_S(cX)
        pred = cute.make_rmem_tensor(
            (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
            for a in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                    pred[j, a, n] = cute.elem_less(tCc[(0, j), a, n], mX.shape)
        frag.fill(-math.inf)                            # padding: max unchanged, exp2 -> 0
        cute.copy(tiled_copy, tXgX, frag, pred=pred)
        m, s = _online_update(frag, m, s)

    row_max = _group_reduce(m, True, tpr, red_max)
    # Threads that saw only padding have m = -inf and s = 0: exp2(-inf) * 0 = 0.
    s = s * cute.math.exp2((m - row_max) * LOG2_E, fastmath=True)
    row_sum = _group_reduce(s, False, tpr, red_sum)
    if tidx == 0:
        lse = row_max + cute.math.log2(row_sum, fastmath=True) * LN_2
        mL[row] = lse - x_tgt


@cute.jit
def _cross_entropy_host(
    mX: cute.Tensor,
    mT: cute.Tensor,
    mL: cute.Tensor,
    stream: cuda.CUstream,
    tpr: cutlass.Constexpr,
    n_full: cutlass.Constexpr,
    n_tail: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_layout((1, tpr))
    val_layout = cute.make_layout((1, VEC))
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    _cross_entropy_kernel(mX, mT, mL, tiled_copy, tpr, n_full, n_tail).launch(
        grid=[mX.shape[0], 1, 1],
        block=[tpr, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, V) and return run(logits, target, loss)."""
    T = int(spec.dims["T"])
    V = int(spec.dims["V"])
    if V % VEC != 0:
        raise ValueError(f"V={V} must be a multiple of {VEC} (128-bit vectors)")
    if T * V >= 2**31:
        raise ValueError("T*V must stay below 2**31 elements (32-bit static index math)")
    tpr, n_full, n_tail = _config(V)
    key = (T, V)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (T, V), stride_order=(1, 0), assumed_align=16)
        tgt = make_fake_compact_tensor(cutlass.Int64, (T,), assumed_align=16)
        loss = make_fake_compact_tensor(cutlass.Float32, (T,), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_cross_entropy_host, x, tgt, loss, stream, tpr, n_full, n_tail,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(logits: torch.Tensor, target: torch.Tensor, loss: torch.Tensor) -> None:
        fn(logits, target, loss)

    return run
