"""mkb_eval: the GPU side of MetaKernelBench (see docs/evaluator.md)."""

PROTOCOL_VERSION = 1

