"""F09 embedding_gather_scale, TIRx (tvm_tirx 0.1.0a4) expert solution:
out[t, :] = table[ids[t], :] * sqrt(D), ids int64, table / out bf16.

Pure data movement (each token's table row read once, its output row written once), compiled
for the static shape of one shape set:

* Work decomposition (as A01's streaming kernel, with a gather): a thread owns one 16-byte
  column vector (8 columns) of ROWS = 4 consecutive tokens. Grid x = column chunk of BLOCK
  threads (BLOCK = D / 8 rounded up to a warp, at most 256), grid y = token group (swapped
  onto x when there are more than 65535 groups). Benchmark (T = 32768, D = 4096): 2 x 8192
  CTAs of 256 threads.
* Per thread: the ROWS ids are read first (int64, scalar loads; all threads of a CTA read the
  same 32 bytes: broadcast, L1 hits), narrowed to int32 (ids < V and V * D < 2^31), then the
  ROWS gathered 16-byte row loads (``ld.global.nc.v4.b32``) are written before
  any math. A warp's load covers 512 contiguous bytes of one table row: whole sectors, so the
  scattered rows cost no sector efficiency (each row is 8 KB at the benchmark).
* Math: bf16 -> fp32 by bit shifts, one fp32 multiply by sqrt(D) rounded to fp32 (64.0 for
  D = 4096, exact), one rounding per pair (``cvt.rn.bf16x2.f32``), ``st.global.v4.b32``.
* Ragged edges: D % 8 == 0 is guaranteed, so only whole vectors exist; threads past the row's
  last vector (D = 1000: 125 vectors in a CTA of 128 threads) do nothing; the last token group
  predicates each row on t < T (T = 999: the last group has 3 tokens).
* Int32 index arithmetic: V * D and T * D must stay below 2^31 (benchmark: 5.3e8).
* Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one run): 130.8 us, 87.9% of
  the roofline ideal. The sm_90a cubin (inspected on the CPU) uses 31 registers (full occupancy: 8
  CTAs of 256 threads per SM) and issues the 4 id loads, then the 4 gathered 16-byte loads, before
  any math: 64 B per thread, 128 KB per SM in flight.

An earlier run, before later tuning rounds and the L2 flush fix of 2026-12-02f
(bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`), measured: 152.3 us, 76.0%
of the roofline ideal (115.8 us), 1.81x the fastest eager formulation, 0.88x torch.compile; the CuTe
expert 136.3 us (this one is 1.12x slower).
"""
import math
import struct

import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

ROWS = 4  # tokens per thread (independent 16-byte gathered loads per thread)
MAX_BLOCK = 256  # threads per CTA (upper bound; narrow rows get fewer)
VEC = 8  # bf16 per 16-byte vector
# Table rows are (mostly) read once: read-only path. No .L1::no_allocate hint: the team measured
# plain ld.global.nc 3-9% faster in 18 of 21 TIRx streaming kernels on the H200.
ROW_LOAD = "ld.global.nc.v4.b32"
OUT_STORE = "st.global.v4.b32"


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def fp32_sqrt(d: int) -> float:
    """sqrt(d) rounded to fp32 (as the statement defines the scale)."""
    return struct.unpack("f", struct.pack("f", math.sqrt(d)))[0]


def make_kernel(tokens: int, vocab: int, dim: int):
    """embedding_gather_scale for static T = tokens, V = vocab, D = dim."""
    assert dim % VEC == 0, "D must be a multiple of 8"
    assert vocab * dim < 2**31 and tokens * dim < 2**31, "int32 indexing"
    DV = dim // VEC  # vectors per row
    BLOCK = min(MAX_BLOCK, ((DV + 31) // 32) * 32)
    GC = (DV + BLOCK - 1) // BLOCK  # column chunks per row
    GR = (tokens + ROWS - 1) // ROWS  # token groups
    ROWS_ON_Y = GR <= 65535
    GRID = (GC, GR) if ROWS_ON_Y else (GR, GC)
    ROW_TAIL = tokens % ROWS != 0
    COL_TAIL = DV % BLOCK != 0
    SCALE = fp32_sqrt(dim)
    TT = tokens
    VV = vocab
    D = dim

    @T.function
    def embedding_gather_scale(
        Ids: T.Tensor((TT,), "int64"),
        Table: T.Tensor((VV, D), T.bfloat16),
        Out: T.Tensor((TT, D), T.bfloat16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=BLOCK))
        if T.constexpr(ROWS_ON_Y):
            t0 = T.cuda.block_idx("y") * ROWS
            cv = T.cuda.block_idx("x") * BLOCK + T.cuda.thread_idx("x")
        else:
            t0 = T.cuda.block_idx("x") * ROWS
            cv = T.cuda.block_idx("y") * BLOCK + T.cuda.thread_idx("x")
        row = T.alloc_local((ROWS,), "int32")
        xv = T.alloc_local((ROWS * 4,), "uint32")
        ov = T.alloc_local((4,), "uint32")
        if (not COL_TAIL) or cv < DV:
            c = cv * VEC
            for r in T.unroll(ROWS):
                if (not ROW_TAIL) or t0 + r < TT:
                    row[r] = T.cast(Ids[t0 + r], "int32")
            # all gathered loads first: ROWS independent 16-byte requests
            for r in T.unroll(ROWS):
                if (not ROW_TAIL) or t0 + r < TT:
                    T.ptx[ROW_LOAD](
                        xv[4 * r], xv[4 * r + 1], xv[4 * r + 2], xv[4 * r + 3],
                        Table.ptr_to([row[r], c]),
                    )
            for r in T.unroll(ROWS):
                if (not ROW_TAIL) or t0 + r < TT:
                    for j in T.unroll(4):
                        v_lo = _lo(xv[4 * r + j]) * T.float32(SCALE)
                        v_hi = _hi(xv[4 * r + j]) * T.float32(SCALE)
                        T.ptx.cvt.rn.bf16x2.f32(ov[j], v_hi, v_lo)
                    T.ptx[OUT_STORE](Out.ptr_to([t0 + r, c]), ov[0], ov[1], ov[2], ov[3])

    return embedding_gather_scale


def build(spec):
    """Compile for spec's static (T, V, D) and return run(ids, table, out)."""
    tokens = int(spec.dims["T"])
    vocab = int(spec.dims["V"])
    dim = int(spec.dims["D"])
    kernel = make_kernel(tokens, vocab, dim)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["embedding_gather_scale"]

    def run(ids, table, out):
        fn(ids, table, out)

    run.module = ex  # keep the compiled module alive with the launcher
    return run
