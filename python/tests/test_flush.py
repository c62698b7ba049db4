"""The L2 flush of the timing loop (timing.flush_l2) on CPU tensors: which half each mode writes,
that reading leaves the buffer as it was, the mode check; flushprobe's argument checks."""

from __future__ import annotations

import pytest
import torch

from mkb_eval import flushprobe, timing


def buf() -> torch.Tensor:
    return torch.full((64,), 7, dtype=torch.uint8)


def test_write_zeroes_the_first_half_only() -> None:
    b = buf()
    timing.flush_l2(b, "write")
    assert int(b[:32].sum()) == 0
    assert bool((b[32:] == 7).all())


def test_read_changes_nothing() -> None:
    b = buf()
    timing.flush_l2(b, "read")
    assert bool((b == 7).all())


def test_write_then_read_zeroes_the_first_half_and_keeps_the_second() -> None:
    b = buf()
    timing.flush_l2(b, "write+read")
    assert int(b[:32].sum()) == 0
    assert bool((b[32:] == 7).all())


def test_default_mode_is_one_of_the_modes() -> None:
    assert timing.FLUSH_MODE in timing.FLUSH_MODES
    b = buf()
    timing.flush_l2(b)
    assert int(b[:32].sum()) == 0 or timing.FLUSH_MODE == "read"


def test_unknown_mode_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="flush mode 'clean': expected one of write, read, write\\+read"):
        timing.flush_l2(buf(), "clean")


def test_flush_l2_is_watched() -> None:
    ids = timing.watched_identities()
    assert ids["mkb_eval.timing.flush_l2"] == id(timing.flush_l2)
    assert ids["mkb_eval.timing._zero"] == id(torch.Tensor.zero_)


def test_timed_reps_flushes_with_the_given_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []
    monkeypatch.setattr(timing, "flush_l2", lambda b, mode=None: seen.append(mode))
    if not torch.cuda.is_available():
        # the timed window itself needs CUDA events: stop at the first sync
        monkeypatch.setattr(timing, "_sync", lambda: (_ for _ in ()).throw(RuntimeError("stop")))
        with pytest.raises(RuntimeError, match="stop"):
            timing.timed_reps(lambda: None, 1, buf(), flush_mode="read")
    else:
        timing.timed_reps(lambda: None, 1, buf().cuda(), flush_mode="read")
    assert seen == ["read"]


def test_flushprobe_rejects_zero_rounds() -> None:
    with pytest.raises(SystemExit) as e:
        flushprobe.main(["F08", "--rounds", "0"])
    assert e.value.code == 2
