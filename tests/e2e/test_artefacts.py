"""What leaves a run in its artefacts: no secret from a URL, no live text from data.

Real runs of the suites (a loopback OpenAI-compatible server, the simulated model on a hostile
manifest) write every artefact the plugin makes: the run log, the HTML report, the Markdown
summary, ``--posbias-json``, junit XML and the terminal; each one is read back whole.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.suite_project import write_suite_project


def _artefacts(root: Path) -> dict[str, bytes]:
    """Every file a run left under ``root`` (run logs, report, Markdown, JSON, junit), by relative path;
    the generation cache and decoded frames are the model's inputs and outputs, not artefacts."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".jsonl", ".html", ".md", ".json", ".xml"):
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


@pytest.mark.usefixtures("heavy_modules")
def test_no_secret_from_the_api_base_reaches_any_artefact(pytester, small_set, monkeypatch):
    pytest.importorskip("openai")
    from support.fault_server import FaultServer

    monkeypatch.setenv("POSBIAS_API_TIMEOUT", "3")
    monkeypatch.setenv("POSBIAS_API_BACKOFF", "0.01")
    monkeypatch.setenv("POSBIAS_API_KEY", "sk-env-key-4242")
    write_suite_project(pytester.path, small_set, ("test_phase_order.py",), """
[tool.posbias.probes.phase]
items = 4
orderings = 2
""", model=None)
    user_secret, query_secret = "sk-userinfo-7f3a9c", "sk-query-51be02"
    with FaultServer() as srv:
        base = srv.url.replace("http://", f"http://me:{user_secret}@") + f"?api-key={query_secret}"
        res = pytester.runpytest("suites", "-m", "option_order", "--posbias-fixed", "--posbias-model", "openai:x",
                                 f"--posbias-api-base={base}", "-p", "no:randomly", "--posbias-json=out.json",
                                 "--posbias-markdown=out.md", "--junitxml=junit.xml", "-v")
        assert srv.chat_requests > 1  # the run really called the server through that URL
    terminal = res.stdout.str() + res.stderr.str()
    assert res.ret in (0, 1), terminal[-3000:]
    files = _artefacts(pytester.path)
    assert any(n.endswith("run.jsonl") for n in files) and "out.md" in files and "junit.xml" in files
    assert any(n.startswith("reports/") for n in files) and "out.json" in files
    for secret in (user_secret, query_secret, "sk-env-key-4242"):
        assert secret not in terminal
        leaked = [n for n, data in files.items() if secret.encode() in data]
        assert not leaked, (secret, leaked)
    [log] = [n for n in files if n.endswith("run.jsonl")]
    header = json.loads(files[log].splitlines()[0])
    assert any("***@127.0.0.1" in a and "api-key=***" in a for a in header["command"])  # shown, redacted
    assert "***@127.0.0.1" in json.dumps(header["config"]["api_base"])


HOSTILE = "x`y``<img src=x onerror=alert(1)>|\u202e\u2066\u200f\x1b[31m\x00\x85"


UNSAFE_CHARS = ("\u202e", "\u2066", "\u200f", "\x1b", "\x00", "\x85")


def hostile_manifest(small_set: Path, out: Path) -> Path:
    """The small set's cooking/short videos, P4 groups and questions, with the domain, every
    reference and every question and option carrying markup, back-ticks, bidi overrides,
    an escape sequence, NUL and a C1 control."""
    base = small_set.parent
    rows = []
    for line in small_set.read_text().splitlines():
        rec = json.loads(line)
        if rec["type"] == "video" and rec["domain"] == "cooking" and rec["bucket"] == "short":
            rows.append({**rec, "path": str((base / rec["path"]).resolve()), "domain": f"cook{HOSTILE}",
                         "references": [f"{r} {HOSTILE}" for r in rec["references"]]})
            rows[-1].pop("scene", None)
        elif rec["type"] == "group" and rec["domain"] == "cooking" and rec["bucket"] == "short" and rec["P"] == 4:
            rows.append({**rec, "domain": f"cook{HOSTILE}"})
        elif rec["type"] == "mcq" and rec["video"].startswith("syn-cooking-short"):
            rows.append({**rec, "question": f"{rec['question']} {HOSTILE}", "options": [f"{o}{HOSTILE}" for o in rec["options"]]})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


@pytest.mark.usefixtures("heavy_modules")
def test_text_from_a_hostile_manifest_is_inert_in_every_artefact(pytester, small_set):
    manifest = hostile_manifest(small_set, pytester.path / "hostile.jsonl")
    write_suite_project(pytester.path, manifest, ("test_positional.py", "test_phase_order.py"), """
[tool.posbias.probes.positional]
groups = 3

[tool.posbias.probes.phase]
items = 4
orderings = 2
""", model=None)
    res = pytester.runpytest_subprocess("-m", "meg or option_order", "--posbias-model", "sim:middle-weak", "--posbias-fixed",
                                        "-p", "no:randomly", "--posbias-json=out.json", "--posbias-markdown=out.md",
                                        "--junitxml=junit.xml", "-v", "--posbias-judge", "fragment", timeout=900)
    terminal = res.stdout.str() + res.stderr.str()
    assert res.ret in (0, 1), terminal[-3000:]
    files = _artefacts(pytester.path)
    names = set(files)
    [log] = [n for n in names if n.endswith(".jsonl") and "/runs/" in n]
    assert log.endswith("/run.jsonl")  # one copy of the run's log: the workers' logs are removed once merged
    html = [n for n in names if n.startswith("reports/")]
    assert html and {"out.md", "out.json", "junit.xml"} <= names
    # the data really reached the run: the hostile domain names the gates, its references and questions are logged
    text = files[log].decode()
    assert "\\u202e" in text and '"kind": "reference"' in text and "onerror" in text
    for name in [log, *html, "out.md", "out.json", "junit.xml"]:
        data = files[name].decode("utf-8")
        bad = [repr(c) for c in UNSAFE_CHARS if c in data]
        assert not bad, (name, bad)
    for c in UNSAFE_CHARS:
        assert c not in terminal, repr(c)
    report = files["reports/latest.html"].decode()
    assert "<img src=x" not in report and "cook" in report and "\\u202e" in report  # shown, escaped
    md = outside = files["out.md"].decode()
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and "cook" in ln]
    assert rows
    for row in rows:
        cell = row.split(" | ")[1]  # the gate's node id: one code span that its back-ticks cannot close
        fence = len(cell) - len(cell.lstrip("`"))
        assert fence >= 3 and cell.endswith("`" * fence) and "`" * fence not in cell[fence:-fence], cell
        outside = outside.replace(cell, "")
    assert "<img" in md and "<" not in outside  # the tag is text inside a code span, nowhere else


def test_the_report_shows_a_slots_references_from_the_reference_record(tmp_path):
    from pytest_posbias import SCHEMA_VERSION
    from pytest_posbias.engine import reference_id
    from pytest_posbias.report.render import Run, _examples

    refs = ["The red circle rolls left.", "A blue square waits."]
    slot = {"video": "v1", "references_id": reference_id(refs), "covered": [True, False], "reasons": ["", "no match"],
            "summary": "A circle rolls.", "status": "ok", "coverage": 0.5}
    old_slot = {"video": "v2", "references": ["Inline, as older logs hold it."], "covered": [True], "summary": "x"}
    recs = [{"kind": "header", "schema_version": SCHEMA_VERSION, "run_id": "r", "models": ["sim:x"]},
            {"kind": "reference", "id": reference_id(refs), "texts": refs},
            {"kind": "observation", "probe": "positional", "type": "instance", "model": "sim:x", "spec": "S", "group": "g",
             "order": [0, 1], "thumbnails": ["", ""], "slots": [slot, old_slot], "text": ["A circle rolls."]}]
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    [example] = _examples([Run(log)], {"S"})["positional"]
    assert [r["text"] for r in example["slots"][0]["refs"]] == refs
    assert [r["covered"] for r in example["slots"][0]["refs"]] == [True, False]
    assert example["slots"][0]["refs"][1]["reason"] == "no match"
    assert [r["text"] for r in example["slots"][1]["refs"]] == ["Inline, as older logs hold it."]
