"""A stub OpenAI-compatible Chat Completions server for the sessions benchmark
(scripts/bench-sessions.sh): many concurrent agent sessions of `mkb run` talk to it as to a
slow real model.

Latency: each call takes a lognormal time (median --median-s, sigma --sigma, clipped to
[--min-s, --max-s]); the headers come after 30-60 % of it (time to first byte) and the JSON
body follows in 8-16 chunks spread over the rest (chunked transfer encoding), as a streaming
host delivers a long answer.

The agent is scripted from the conversation it is sent (the server keeps no state): write a
kernel, compile, test, benchmark, and in half of the sessions (chosen at random by the first
call and carried in its text) write a second kernel and benchmark it, then submit; the
distillation prompt gets a short SKILL.md. Usage is reported as request bytes / 4 and answer
bytes / 4 tokens. Every call is appended to --log as one JSON line (start, end, latency,
bytes in and out, the tool called, calls in flight when it started).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import time
from typing import Any

PLANS = {
    "short": ["write_kernel", "compile", "test", "benchmark", "submit"],
    "long": ["write_kernel", "compile", "test", "benchmark", "write_kernel", "benchmark", "submit"],
}

KERNEL = '''import cutlass
import cutlass.cute as cute

# {tag} version {version}


@cute.kernel
def fused_kernel(x, bias, out, n_cols: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    row = bidx
    for col in range(tidx, n_cols, 256):
        v = x[row, col] + bias[col]
        out[row, col] = v * 0.5 * (1.0 + cute.math.tanh(0.7978845608 * (v + 0.044715 * v * v * v)))


def build(spec):
    raise NotImplementedError
'''


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.in_flight = 0
        self.rng = random.Random(args.seed)
        self.log = open(args.log, "a", encoding="utf-8") if args.log else None

    def latency(self) -> float:
        a = self.args
        x = self.rng.lognormvariate(math.log(a.median_s), a.sigma)
        return min(max(x, a.min_s), a.max_s)

    def answer(self, body: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
        """The scripted answer to `body`, the tool it calls ("distill" for the skill) and the
        session's tag."""
        msgs = body.get("messages") or []
        last = msgs[-1] if msgs else {}
        last_text = last.get("content") if isinstance(last.get("content"), str) else ""
        # The session's plan: drawn by its first call, read back from that call's text.
        first = next((m for m in msgs if m.get("role") == "assistant"), None)
        if first is None:
            plan = "long" if self.rng.random() < 0.5 else "short"
            tag = f"session {self.rng.getrandbits(32):08x} plan={plan}"
        else:
            text = first.get("content") or ""
            plan = "long" if "plan=long" in text else "short"
            tag = text.split(".")[0]
        if "Distill what you learned" in last_text:
            text = ("---\nname: wide-loads-fused-epilogue\ndescription: A stub skill for the "
                    "sessions benchmark.\n---\n" + "- Keep loads 128-bit wide; fuse the epilogue.\n" * 20)
            return {"role": "assistant", "content": text}, "distill", tag
        step = sum(1 for m in msgs if m.get("role") == "tool")
        steps = PLANS[plan]
        tool = steps[min(step, len(steps) - 1)]
        thinking = (f"{tag}. Step {step + 1}: next I call {tool}. "
                    + "Reasoning about tiling, vector widths and the epilogue. " * self.rng.randint(5, 30))
        args: dict[str, Any] = {}
        if tool == "write_kernel":
            version = steps[: step + 1].count("write_kernel")
            args = {"source": KERNEL.format(tag=tag, version=version) + "# padding\n" * self.rng.randint(20, 120)}
        call = {"id": f"call_{step}", "type": "function",
                "function": {"name": tool, "arguments": json.dumps(args)}}
        return {"role": "assistant", "content": thinking, "tool_calls": [call]}, tool, tag

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                length = 0
                while True:
                    h = await reader.readline()
                    if not h or h in (b"\r\n", b"\n"):
                        break
                    name, _, value = h.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                raw = await reader.readexactly(length) if length else b""
                await self.respond(line, raw, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def respond(self, line: bytes, raw: bytes, writer: asyncio.StreamWriter) -> None:
        start = time.time()
        self.in_flight += 1
        in_flight = self.in_flight
        try:
            if b"/chat/completions" not in line:
                body = b'{"error": {"message": "not found"}}'
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n"
                             + f"content-length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
                return
            req = json.loads(raw or b"{}")
            message, tool, tag = self.answer(req)
            out_tokens = len(json.dumps(message)) // 4
            payload = json.dumps({
                "id": "stub", "object": "chat.completion", "model": req.get("model", "stub"),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": out_tokens},
            }).encode()
            total = self.latency()
            ttfb = total * self.rng.uniform(0.3, 0.6)
            await asyncio.sleep(ttfb)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            n = self.rng.randint(8, 16)
            size = math.ceil(len(payload) / n)
            gap = (total - ttfb) / n
            for i in range(n):
                part = payload[i * size:(i + 1) * size]
                if part:
                    writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                    await writer.drain()
                await asyncio.sleep(gap)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            if self.log:
                self.log.write(json.dumps({
                    "start": start, "end": time.time(), "latency_s": round(total, 3),
                    "in_bytes": len(raw), "out_bytes": len(payload), "tool": tool, "session": tag,
                    "in_flight": in_flight}) + "\n")
                self.log.flush()
        finally:
            self.in_flight -= 1


async def serve(args: argparse.Namespace) -> None:
    srv = Server(args)
    server = await asyncio.start_server(srv.handle, "127.0.0.1", args.port, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    if args.port_file:
        with open(args.port_file, "w", encoding="utf-8") as f:
            f.write(f"{port}\n")
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0, help="0: any free port (see --port-file)")
    p.add_argument("--port-file", help="write the port here once listening")
    p.add_argument("--log", help="append one JSON line per call here")
    p.add_argument("--median-s", type=float, default=5.0)
    p.add_argument("--sigma", type=float, default=0.6)
    p.add_argument("--min-s", type=float, default=2.0)
    p.add_argument("--max-s", type=float, default=20.0)
    p.add_argument("--seed", type=int, default=None)
    asyncio.run(serve(p.parse_args()))


if __name__ == "__main__":
    main()
