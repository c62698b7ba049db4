"""Independent recomputation of the headline of `mkb analyze` (docs/analysis.md, "Headline").

Reads the exported rows (JSONL, the documented export schema) and the analysis JSON that the
Rust test wrote, recomputes every headline number from the rows with pandas / numpy / scipy,
and checks: point statistics exactly (1e-9), bootstrap intervals within bootstrap noise (its own
problem-clustered resampling, a different random stream). Run by tests/headline_python.rs with
the export-check venv (MKB_EXPORT_PYTHON).

usage: python recompute_headline.py ROWS.jsonl ANALYSIS.json RESAMPLES
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict

import numpy as np
import pandas as pd
from scipy import stats

TREATMENTS = ["conditioned", "placebo", "repeat_solo"]
CONF = 0.95


def compare(t: float, s: float, eps: float) -> str:
    if abs(t - s) <= eps * max(t, s):
        return "tied"
    return "improved" if t > s else "regressed"


def standing(src: float | None, base: float, eps: float) -> str:
    if src is None:
        return "unknown"
    if src <= 0 and base <= 0:
        return "both_failed"
    o = compare(max(src, 0.0), base, eps)
    return {"improved": "above", "regressed": "below", "tied": "level"}[o]


def expanded_tail(n: int) -> float:
    t = stats.t.ppf(1 - (1 - CONF) / 2, n - 1)
    return stats.norm.cdf(-math.sqrt(n / (n - 1)) * t)


def interval(reps: np.ndarray, n: int) -> tuple[float, float]:
    reps = reps[~np.isnan(reps)]
    tail = expanded_tail(n)
    return float(np.quantile(reps, tail)), float(np.quantile(reps, 1 - tail))


def close_ci(name: str, mine: tuple[float, float], theirs: dict, log: bool = False) -> None:
    """End points within a tenth of the interval's width (on the log(1 + x) scale for a lift,
    whose replicates are a skewed ratio)."""
    lo, hi = theirs["lo"], theirs["hi"]
    if log:
        mine = (math.log1p(mine[0]), math.log1p(mine[1]))
        lo, hi = math.log1p(lo), math.log1p(hi)
    width = hi - lo
    tol = 0.1 * width + 1e-9
    assert abs(mine[0] - lo) <= tol and abs(mine[1] - hi) <= tol, (name, mine, (lo, hi))


def main() -> None:
    rows_path, analysis_path, resamples = sys.argv[1], sys.argv[2], int(sys.argv[3])
    df = pd.read_json(rows_path, lines=True)
    a = json.load(open(analysis_path))
    h = a["headline"]
    ok = df["correct"].astype(bool) & np.isfinite(df["score"]) & (df["score"] > 0)
    df["s"] = np.where(ok, df["score"], 0.0)
    rng = np.random.default_rng(12345)
    checked = 0

    # Per model x direction: lift and share of regressing problems (conditioned vs solo).
    cells = {(c["model"], c["direction"]["target"]): c for c in h["cells"]}
    eps_of = df.groupby(["model", "target_dsl", "problem"])["noise_eps"].max()
    r1 = bool((df["run_index"] == 0).all())
    lifts = {}
    for (m, tgt), g in df.groupby(["model", "target_dsl"]):
        solo = g[g.condition == "solo"].groupby("problem")["s"].mean()
        cond = g[g.condition == "conditioned"].groupby("problem")["s"].mean()
        common = solo.index.intersection(cond.index)
        lift = cond[common].mean() / solo[common].mean() - 1
        outs = [compare(cond[p], solo[p], eps_of[(m, tgt, p)]) for p in common]
        c = cells[(m, tgt)]
        assert c["problems"] == len(common), (m, tgt)
        assert abs(c["lift"] - lift) < 1e-9, (m, tgt, c["lift"], lift)
        reg = sum(o == "regressed" for o in outs) / len(outs)
        assert abs(c["regressed_share"] - reg) < 1e-9, (m, tgt, c["regressed_share"], reg)
        lifts[(m, tgt)] = lift
        checked += 2
        if r1:
            # R = 1: the CI resamples problems (expanded percentile); recompute it.
            sv, cv = solo[common].to_numpy(), cond[common].to_numpy()
            n = len(sv)
            idx = rng.integers(0, n, size=(resamples, n))
            with np.errstate(divide="ignore", invalid="ignore"):
                reps = cv[idx].mean(1) / sv[idx].mean(1) - 1
            close_ci(f"lift {m} {tgt}", interval(reps, n), c["lift_ci"], log=True)
            checked += 1
    lo = min(lifts.values())
    hi = max(lifts.values())
    assert abs(h["lift_range"]["min"] - lo) < 1e-9 and abs(h["lift_range"]["max"] - hi) < 1e-9
    models = sorted({m for m, _ in lifts})
    gain = [m for m in models if all(lifts[(m, t)] > 0 for t in ("cute", "tirx"))]
    assert sorted(h["gain_both_point"]) == gain, (h["gain_both_point"], gain)
    checked += 2

    # Pair records: every treated attempt, classified two ways.
    recs = []
    by = {k: g.sort_values("run_index") for k, g in df.groupby(["model", "target_dsl", "problem", "condition"])}
    units = {(m, t, p) for (m, t, p, _c) in by}
    for m, t, p in sorted(units):
        solo = by.get((m, t, p, "solo"))
        if solo is None or len(solo) == 0:
            continue
        other = "cute" if t == "tirx" else "tirx"
        src_solo = by.get((m, other, p, "solo"))
        rep = by.get((m, t, p, "repeat_solo"))
        eps = eps_of[(m, t, p)]
        ss = solo["s"].to_numpy()
        sruns = solo["run_index"].to_list()
        smean = ss.mean()
        for arm in TREATMENTS:
            g = by.get((m, t, p, arm))
            if g is None:
                continue
            for _, r in g.iterrows():
                matched = None
                if src_solo is not None and len(src_solo):
                    hit = src_solo[src_solo.run_index == r.run_index]
                    matched = float(hit["s"].iloc[0]) if len(hit) else float(src_solo["s"].mean())
                src = matched
                if arm == "conditioned" and r.source_score is not None and np.isfinite(r.source_score):
                    src = max(float(r.source_score), 0.0)
                naive = (standing(src, smean, eps), compare(r.s, smean, eps))
                held = None
                if len(ss) >= 2:
                    k = sruns.index(r.run_index) if r.run_index in sruns else r.run_index % len(ss)
                    rest = np.delete(ss, k).mean()
                    held = (standing(src, ss[k], eps), compare(r.s, rest, eps))
                elif rep is not None and len(rep) and arm != "repeat_solo":
                    held = (standing(src, rep["s"].mean(), eps), compare(r.s, smean, eps))
                passed = None if src is None else src > 0
                recs.append((p, arm, passed, naive, held))

    # Pooled standing tables: exact counts.
    for t in h["standing"]:
        arm, cl = t["arm"], t["classifier"]
        acc = defaultdict(lambda: [0, 0, 0])
        for p, ar, passed, naive, held in recs:
            if ar != arm:
                continue
            x = naive if cl == "solo_mean" else held
            if x is None:
                continue
            keys = [x[0]]
            if passed is not None:
                ps = "source passed" if passed else "source failed"
                keys += [ps, f"{ps} & {x[0]}"]
            for k in keys:
                acc[k][0] += 1
                acc[k][1] += x[1] == "improved"
                acc[k][2] += x[1] == "regressed"
        for row in t["rows"]:
            n, i, rg = acc.get(row["group"], [0, 0, 0])
            assert (row["attempts"], row["improved"], row["regressed"]) == (n, i, rg), (arm, cl, row, (n, i, rg))
            checked += 1

    # Regression-to-the-mean control: conditioned - placebo, held-out classifier.
    probs = sorted({r[0] for r in recs})
    pidx = {p: i for i, p in enumerate(probs)}
    nc = len(probs)
    # counts[cluster, arm(0 cond, 1 placebo), group(0 above, 1 below), (imp, reg, n)]
    counts = np.zeros((nc, 2, 2, 3))
    for p, ar, _passed, _naive, held in recs:
        if ar not in ("conditioned", "placebo") or held is None or held[0] not in ("above", "below"):
            continue
        c = counts[pidx[p], 0 if ar == "conditioned" else 1, 0 if held[0] == "above" else 1]
        c[0] += held[1] == "improved"
        c[1] += held[1] == "regressed"
        c[2] += 1

    def diffs(c: np.ndarray) -> np.ndarray:
        t = c.sum(0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ia = t[:, 0, 0] / t[:, 0, 2]
            rb = t[:, 1, 1] / t[:, 1, 2]
            ib = t[:, 1, 0] / t[:, 1, 2]
        return np.array([ia[0] - ia[1], rb[0] - rb[1], (ia[0] - ib[0]) - (ia[1] - ib[1])])

    point = diffs(counts)
    reps = np.array([diffs(counts[rng.integers(0, nc, nc)]) for _ in range(resamples)])
    for k, d in enumerate(h["rtm"]["diffs"]):
        assert abs(d["diff"] - point[k]) < 1e-9, (d, point[k])
        close_ci(f"rtm {d['statistic']}", interval(reps[:, k], nc), d["ci"])
        checked += 2

    # Association: least squares of improved / regressed on [1, above, passed], clustered.
    X, Y, C = [], [], []
    for p, ar, passed, _naive, held in recs:
        if ar != "conditioned" or held is None or passed is None or held[0] not in ("above", "below"):
            continue
        X.append([1.0, 1.0 if held[0] == "above" else 0.0, 1.0 if passed else 0.0])
        Y.append([held[1] == "improved", held[1] == "regressed"])
        C.append(pidx[p])
    X, Y, C = np.array(X), np.array(Y, dtype=float), np.array(C)
    assoc = h["association"]
    assert assoc["attempts"] == len(X)
    beta = np.linalg.lstsq(X, Y, rcond=None)[0]
    used = np.unique(C)
    members = [np.flatnonzero(C == i) for i in used]
    na = len(used)
    assert assoc["clusters"] == na
    boot = []
    for _ in range(resamples):
        take = np.concatenate([members[i] for i in rng.integers(0, na, na)])
        xs = X[take]
        if np.linalg.matrix_rank(xs) < 3:
            continue
        boot.append(np.linalg.lstsq(xs, Y[take], rcond=None)[0])
    boot = np.array(boot)
    for k, name in enumerate(["improved", "regressed"]):
        for j, coef in enumerate(assoc[name]):
            assert abs(coef["estimate"] - beta[j + 1, k]) < 1e-9, (name, coef, beta[:, k])
            close_ci(f"assoc {name} {coef['name']}", interval(boot[:, j + 1, k], na), coef["ci"])
            checked += 2
    print(f"ok: {checked} headline numbers agree ({len(recs)} treated attempts, {nc} problem clusters)")


if __name__ == "__main__":
    main()
