"""The positional suite as a user runs it: ``pytest -m meg --model ...`` in a project."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support import REPO
from support.suite_project import write_suite_project

pytestmark = pytest.mark.usefixtures("heavy_modules")


def make_project(pytester: pytest.Pytester, manifest: Path, extra_toml: str = "", positional: str = "groups = 12") -> None:
    write_suite_project(pytester.path, manifest, ("test_positional.py",),
                        f"{extra_toml}\n\n[tool.posbias.probes.positional]\n{positional}")


def calls_line(output: str) -> tuple[int, int]:
    m = re.search(r"model calls: (\d+) made, (\d+) (?:cache hits|served from the cache)", output)
    assert m, output[-2000:]
    return int(m.group(1)), int(m.group(2))


def test_meg_fails_on_middle_weak_and_passes_on_unbiased(pytester, small_set):
    make_project(pytester, small_set)
    bad = pytester.runpytest("-m", "meg and not slow", "--posbias-model", "sim:middle-weak", "-p", "no:randomly")
    assert bad.ret == 1
    out = bad.stdout.str()
    assert re.search(r"MEG domestic-short-P4 = -0\.\d+ \(90% repeated CI \[-0\.\d+, -0\.\d+\], threshold within ±0\.02, "
                     r"n = \d+ of at most 12 groups, p = ", out), out[-3000:]
    assert "the repeated CI lies wholly outside the allowed region" in out
    good = pytester.runpytest("-m", "meg and not slow", "--posbias-model", "sim:unbiased", "-p", "no:randomly")
    assert good.ret == 0, good.stdout.str()[-3000:]
    good.assert_outcomes(passed=6)


def test_dpb_fails_on_primacy_and_passes_on_unbiased(pytester, small_set):
    make_project(pytester, small_set)
    bad = pytester.runpytest("-m", "dpb and not slow", "--posbias-model", "sim:primacy", "-p", "no:randomly")
    assert bad.ret == 1
    assert "DPB cooking-short-P2 = -0." in bad.stdout.str()
    good = pytester.runpytest("-m", "(dpb or contamination) and not slow", "--posbias-model", "sim:unbiased", "-p", "no:randomly",
                              "--posbias-json=good.json")
    assert good.ret == 0, good.stdout.str()[-3000:]
    contamination = [v for v in json.loads((pytester.path / "good.json").read_text())["verdicts"]
                     if v["name"].startswith("contaminated-slot rate")]
    news = [v for v in contamination if "news-" in v["name"]]
    other = [v for v in contamination if "news-" not in v["name"]]
    assert news and other
    # news descriptions are not exhaustive: the rate is reported, not gated
    assert all("news descriptions" in v["reason"] and v["p_value"] == 1.0 and v["estimate"] == v["estimate"] for v in news)
    assert all("news descriptions" not in v["reason"] for v in other)
    # a rate's repeated CI stays in [0, 1] (the t-based looks can reach past it; the record is clipped)
    assert all(0.0 <= v["ci_low"] <= v["estimate"] <= v["ci_high"] <= 1.0 for v in other if v["ci_low"] is not None)


@pytest.mark.slow  # three end-to-end runs: serial, cached, -n 2
def test_second_run_makes_zero_calls_and_xdist_gives_the_same_verdicts(pytester, small_set):
    make_project(pytester, small_set)
    args = ["-m", "(meg or dpb or coverage) and not slow", "--posbias-model", "sim:middle-weak", "-p", "no:randomly"]
    first = pytester.runpytest(*args, "--posbias-json=first.json")
    made, _ = calls_line(first.stdout.str())
    assert made > 0
    second = pytester.runpytest(*args, "--posbias-json=second.json")
    made2, hits2 = calls_line(second.stdout.str())
    assert made2 == 0 and hits2 >= made  # (sequential looks re-read earlier groups: more hits than calls)
    par = pytester.runpytest_subprocess(*args, "-n", "2", "--posbias-json=par.json")
    assert par.ret == first.ret == second.ret == 1
    verdicts = []
    for name in ("first.json", "second.json", "par.json"):
        data = json.loads((pytester.path / name).read_text())
        verdicts.append([(v["nodeid"], v["passed"], round(v["estimate"], 12), v["ci_low"], v["ci_high"], v["p_bh"]) for v in data["verdicts"]])
    assert verdicts[0] == verdicts[1] == verdicts[2]
    assert len(verdicts[0]) == 6 + 12 + 12
    # the run log of the xdist run holds both workers' requests, merged, header first
    runs = sorted((pytester.path / ".posbias" / "runs").glob("*/run.jsonl"))
    assert len(runs) == 3
    header = json.loads(runs[-1].read_text().splitlines()[0])
    assert header["kind"] == "header" and header["schema_version"] == 1 and header["workers"] == ["gw0", "gw1"]


def test_suite_runs_end_to_end_on_a_tiny_random_weight_checkpoint(pytester, small_set, tiny_checkpoints):
    make_project(pytester, small_set, positional="groups = 2\nmax_new_tokens = 24\nscales = [4]\nframes_short = 4\nframes_long = 4\nresolution = 56")
    model = str(tiny_checkpoints["qwen2_vl"])
    # a user who writes `--model PATH` with a space gets told how to write it
    wrong = pytester.runpytest("-m", "not slow", "--posbias-model", model)
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR, wrong.stdout.str()[-2000:]
    assert f"write --posbias-model={model}" in wrong.stderr.str()
    res = pytester.runpytest("-m", "not slow", f"--posbias-model={model}", "--posbias-device", "cpu", "-p", "no:randomly",
                             "--posbias-json=tiny.json")
    out = res.stdout.str()
    outcomes = res.parseoutcomes()
    assert outcomes.get("errors", 0) == 0, out[-4000:]
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 6 * 4  # dpb, meg, coverage, contamination x 6 configs
    data = json.loads((pytester.path / "tiny.json").read_text())
    # random weights write no [videoK] markers: handled, counted and scored, not crashed
    fails = [v["extra"]["failures"] for v in data["verdicts"]]
    assert sum(f["marker_failure"] + f["fallback"] + f["empty"] + f["placeholder"] for f in fails) > 0
    # 2 groups x 4 cyclic orders planned per configuration; a random-weight answer may be lost
    # (empty, unalignable), and is then counted as lost, never dropped
    for v in data["verdicts"]:
        m = v["extra"]["measurement"]
        assert m["planned"] == 8 and m["measured"] + sum(m["lost"].values()) == 8, (v["name"], m)


class GarbageJudge:
    """A chat-completions endpoint whose replies are never the judge's JSON."""

    def __init__(self):
        srv = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                srv.count += 1
                body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "j",
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": "I think it is covered."}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 5, "total_tokens": 6}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.count = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def test_bad_data_is_recorded_counted_and_the_run_completes(pytester, small_set):
    lines = small_set.read_text().splitlines()
    bad_manifest = pytester.path / "bad.jsonl"
    broken = []
    for line in lines:
        d = json.loads(line)
        if d["type"] == "video" and d["id"] == "syn-cooking-short-00":
            d["path"] = "videos/does-not-exist.mp4"  # a missing video
        if d["type"] == "video" and d["id"] == "syn-news-short-01":
            del d["references"]  # a line missing a field
        d = {k: (str(small_set.parent / v) if k == "path" else v) for k, v in d.items()}
        broken.append(json.dumps(d))
    broken.append("{ this line is not json")
    bad_manifest.write_text("\n".join(broken) + "\n")
    judge = GarbageJudge()
    make_project(pytester, bad_manifest)
    res = pytester.runpytest("-m", "coverage and not slow", "--posbias-model", "sim:unbiased", "-p", "no:randomly",
                             "--posbias-judge", "openai:judge", "--posbias-api-base", judge.url, "--posbias-json=bad.json")
    judge.httpd.shutdown()
    out = res.stdout.str()
    assert res.parseoutcomes().get("errors", 0) == 0, out[-4000:]
    assert "missing field 'references'" in out and "file does not exist" in out and "not valid JSON" in out
    data = json.loads((pytester.path / "bad.json").read_text())
    by_config = {v["extra"]["spec"]: v for v in data["verdicts"]}
    # sentence-style references went to the judge, whose replies were never JSON: retried, then recorded
    assert judge.count > 0
    assert by_config["domestic-short-P2"]["extra"]["failures"]["judge_failure"] > 0
    assert by_config["domestic-short-P2"]["extra"]["excluded"] > 0
    # News references use fragment coverage and need no judge call: that configuration still decides
    assert by_config["news-short-P2"]["extra"]["failures"]["judge_failure"] == 0


def test_progress_lines_are_whole_lines_and_quiet_mode_drops_them(pytester, small_set, monkeypatch):
    from pytest_posbias.run import context as run_context

    monkeypatch.setattr(run_context, "PROGRESS_AFTER_S", 0.0)  # the synthetic probe is fast: show every batch
    make_project(pytester, small_set)
    args = ["-m", "dpb and not slow", "-k", "cooking-short-P2", "--posbias-model", "sim:recency", "-p", "no:randomly"]
    loud = pytester.runpytest(*args).stdout.lines
    lines = [ln for ln in loud if "[posbias] model calls" in ln]
    pattern = r"\[posbias\] model calls \d+/\d+ \(\d+%\), [\d.e+]+/s, ETA (\d+ s|\d+ min|–)(; \d+ more answered from the cache)?"
    assert lines and all(re.fullmatch(pattern, ln) for ln in lines), lines
    done, total = (int(x) for x in re.search(r"(\d+)/(\d+)", lines[-1]).groups())
    assert done == total > 0
    quiet = pytester.runpytest(*args, "-q", f"--posbias-cache={pytester.path / 'fresh-cache'}").stdout.lines
    assert not any("[posbias] model calls" in ln for ln in quiet)


def test_a_gate_reading_its_own_probe_again_reuses_nothing_and_two_gates_on_one_probe_do(pytester, small_set):
    """The sequential MEG gate reads its last look again for its description: that is its own probe,
    so no request counts as reused from another gate; DPB at P = 4 after it reads the same probe,
    which counts as reused (and is no new call)."""
    make_project(pytester, small_set)
    one = pytester.runpytest("-m", "meg and not slow", "-k", "cooking-short", "--posbias-model", "sim:unbiased",
                             "-p", "no:randomly", "--posbias-json=one.json")
    assert one.ret == 0, one.stdout.str()[-3000:]
    (meg,) = json.loads((pytester.path / "one.json").read_text())["verdicts"]
    assert meg["extra"]["calls"]["made"] > 0 and not meg["extra"]["calls"].get("shared"), meg["extra"]["calls"]
    assert "reused from a probe another gate ran" not in one.stdout.str()
    both = pytester.runpytest("-m", "(meg or dpb) and not slow", "-k", "cooking-short-P4", "--posbias-model",
                              "sim:unbiased", "-p", "no:randomly", "--posbias-json=both.json", "--posbias-fixed",
                              "--posbias-cache=fresh")
    assert both.ret == 0, both.stdout.str()[-3000:]
    calls = {v["extra"]["gate"]: v["extra"]["calls"] for v in json.loads((pytester.path / "both.json").read_text())["verdicts"]}
    assert set(calls) == {"dpb", "meg"}
    first, second = sorted(calls.values(), key=lambda c: c.get("made", 0), reverse=True)
    assert first["made"] > 0 and second.get("made", 0) == 0 and second["shared"] == first["made"], calls


def test_contamination_is_not_certified_from_fewer_than_24_groups(pytester, small_set):
    """In certify mode the contamination gate does not decide from 12 groups (the t rules certify
    right-skewed group rates past α below 24): not measured, exit 6, with the reason on its run line;
    in detect mode the same groups decide."""
    make_project(pytester, small_set)
    cert = pytester.runpytest("-m", "contamination and not slow", "--posbias-model", "sim:unbiased", "-p", "no:randomly",
                              "--posbias-mode", "certify", "--posbias-json=cert.json")
    out = cert.stdout.str()
    assert cert.ret == 6, out[-3000:]
    other = [v for v in json.loads((pytester.path / "cert.json").read_text())["verdicts"]
             if v["name"].startswith("contaminated-slot rate") and "news-" not in v["name"]]
    assert other and all(v["inconclusive"] and not v["passed"] and "fewer than 24 groups (12 planned)" in v["reason"]
                         for v in other)
    assert "NOT MEASURED (inconclusive (fewer than 24 groups))" in out
    detect = pytester.runpytest("-m", "contamination and not slow", "--posbias-model", "sim:unbiased", "-p", "no:randomly")
    assert detect.ret == 0, detect.stdout.str()[-3000:]


def test_contamination_certifies_at_dose_zero_and_not_just_past_its_threshold(pytester):
    """Certify mode, the contamination gate on one configuration: a dose of 0 (every group's rate 0,
    zero spread) certifies on the exact floor; a dose of 0.12, just past the 0.10 threshold, does not.
    The full synthetic set: 40 groups of that configuration (the small set has 12, too few to certify)."""
    from pytest_posbias.run.context import synthetic_manifest

    make_project(pytester, synthetic_manifest(REPO), positional="groups = 40")
    outcomes = {}
    for dose in ("0", "0.12"):
        res = pytester.runpytest("-m", "contamination and not slow", "-k", "domestic-short-P2", "--posbias-model",
                                 f"sim:dose,contamination={dose}", "--posbias-mode", "certify", "-p", "no:randomly",
                                 f"--posbias-json=d{dose}.json")
        (v,) = json.loads((pytester.path / f"d{dose}.json").read_text())["verdicts"]
        outcomes[dose] = (res.ret, v["passed"], v["n"], v["estimate"])
    assert outcomes["0"][:2] == (0, True) and outcomes["0"][2] >= 24 and outcomes["0"][3] == 0, outcomes
    assert outcomes["0.12"][:2] == (1, False) and outcomes["0.12"][3] > 0.10, outcomes
