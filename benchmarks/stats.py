"""Summaries of a run's `RequestRecord`s (pure): latency percentiles, underruns, throughput."""

import math
from collections import Counter

from benchmarks.playback import RequestRecord, playback


def pct(values, q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation; None for no values."""
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summarize(records: list[RequestRecord], duration_s: float) -> dict:
    """One run's figures; `duration_s` is the wall time over which the audio was produced.

    Keys: requests, ok, errors {code: n}, ttfa_ms_{p50,p95,p99}, gap_ms_{p50,p99} (between chunks of
    one request), underruns (total), underrun_requests (requests with >= 1), underruns_max (per
    request), stall_s, prebuffer_ms_{p50,p99} (client start delay that would avoid every underrun,
    playback.py), underrun_at_audio_s {min, p50, max} (where in the stream underruns fell: seconds of
    audio played before each; None without any), underruns_first_s (those within the first second of
    audio, where the client's buffer is the first chunks alone), rtf_{p50,p95} (wall to last chunk /
    audio), audio_s, audio_s_per_s.
    """
    ok = [r for r in records if r.ok]
    errors = Counter(r.error or "no_audio" for r in records if not r.ok)
    ttfa = [1000 * r.ttfa_s for r in ok if r.ttfa_s is not None]  # set on every ok record
    gaps = [1000 * g for r in ok for g in r.gaps_s()]
    plays = [playback(r) for r in ok]
    at = [a for p in plays for a in p.underrun_at_s]
    rtf = [r.rtf for r in ok if r.rtf is not None]
    audio = sum(r.audio_s for r in records)  # audio that reached the client, failed requests included
    r3 = lambda x: None if x is None else round(x, 3)  # noqa: E731
    return {
        "requests": len(records),
        "ok": len(ok),
        "errors": dict(sorted(errors.items())),
        "ttfa_ms_p50": r3(pct(ttfa, 50)),
        "ttfa_ms_p95": r3(pct(ttfa, 95)),
        "ttfa_ms_p99": r3(pct(ttfa, 99)),
        "gap_ms_p50": r3(pct(gaps, 50)),
        "gap_ms_p99": r3(pct(gaps, 99)),
        "underruns": sum(p.underruns for p in plays),
        "underrun_requests": sum(1 for p in plays if p.underruns),
        "underruns_max": max((p.underruns for p in plays), default=0),
        "stall_s": r3(sum(p.stall_s for p in plays)),
        "prebuffer_ms_p50": r3(pct([1000 * p.prebuffer_s for p in plays], 50)),
        "prebuffer_ms_p99": r3(pct([1000 * p.prebuffer_s for p in plays], 99)),
        "underrun_at_audio_s": {"min": r3(min(at)), "p50": r3(pct(at, 50)), "max": r3(max(at))} if at else None,
        "underruns_first_s": sum(1 for a in at if a < 1.0),
        "rtf_p50": r3(pct(rtf, 50)),
        "rtf_p95": r3(pct(rtf, 95)),
        "audio_s": r3(audio),
        "duration_s": r3(duration_s),
        "audio_s_per_s": r3(audio / duration_s if duration_s > 0 else 0.0),
    }


def steady_audio_rate(records: list[RequestRecord], t0: float, end: float) -> float:
    """Audio seconds per second that reached the clients in the second half of a closed loop's window
    [t0, end): past the burst of first requests at t0 and before the drain after `end`, when no worker
    starts a new request and the rate falls with the finishing ones (`audio_s_per_s` spans both)."""
    mid = (t0 + end) / 2
    if end <= mid:
        return 0.0
    audio = sum(n / r.sample_rate for r in records for t, n in r.arrivals if mid <= t < end)
    return round(audio / (end - mid), 3)


def by_kind(records: list[RequestRecord]) -> dict:
    """TTFA p50 and underruns per text kind (short/medium/long)."""
    out = {}
    for kind in sorted({r.kind for r in records}):
        rs = [r for r in records if r.kind == kind and r.ok]
        out[kind] = {
            "n": len(rs),
            "ttfa_ms_p50": round(pct([1000 * r.ttfa_s for r in rs if r.ttfa_s is not None], 50) or 0, 3),
            "underruns": sum(playback(r).underruns for r in rs),
        }
    return out


def paired_difference(a: list[float], b: list[float]) -> dict:
    """B − A over paired values: n, mean, its standard error (0 for one pair), how many are higher and lower."""
    d = [y - x for x, y in zip(a, b, strict=True)]
    n = len(d)
    mean = sum(d) / n if n else math.nan
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n) if n > 1 else 0.0
    return {"n": n, "mean": mean, "se": se, "higher": sum(x > 0 for x in d), "lower": sum(x < 0 for x in d)}
