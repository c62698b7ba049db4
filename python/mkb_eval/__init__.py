"""mkb_eval: the GPU side of MetaKernelBench (see docs/evaluator.md)."""

PROTOCOL_VERSION = 2  # docs/protocol.md; crates/mkb-core/src/lib.rs has the same number

