"""The small CLI commands (``cli/commands.py``): ``posbias models`` lists the registry, and
``posbias judge-agreement`` scores a judge against human labels and names a file it cannot read."""

from __future__ import annotations

import csv
import re
import subprocess
import sys

import pytest


def test_cli_models_lists_the_registry():
    out = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "models"], capture_output=True, text=True, check=True).stdout
    assert "qwen3vl8b" in out and "Qwen/Qwen3-VL-8B-Instruct" in out and "NOT NATIVE" in out


def test_cli_judge_agreement(tmp_path):
    path = tmp_path / "labels.csv"
    rows = [
        ("A red circle moves from left to right.\nThe background is cream.", "A red circle moves from left to right. The background is cream.", 1.0, 1.0),
        ("A blue square stays still.\nA white flash fills the screen.", "A blue square stays still in the same place.", 0.5, 0.5),
        ("A green triangle sinks to the bottom.\nThe screen goes black.", "Nothing is visible.", 0.0, 0.0),
        ("A purple circle rises.\nThe background is grey.", "The background is grey.", 0.5, 0.0),
    ]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["reference", "summary", "human_1", "human_2"])
        w.writerows(rows)
    out = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "judge-agreement", str(path), "--judge", "fragment"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ["pair", "n"]
    from scipy import stats

    h = stats.pearsonr([1.0, 0.5, 0.0, 0.5], [1.0, 0.5, 0.0, 0.0]).statistic
    assert f"{h:.3f}" in lines[1]  # human_1 vs human_2, computed independently
    assert "fragment judge vs mean human" in lines[2]


def test_cli_judge_agreement_names_a_labels_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_bytes("reference,summary,human_1\nCaf\u00e9 scene,Caf\u00e9,1\n".encode("latin-1"))
    out = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "judge-agreement", str(path), "--judge", "fragment"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert f"{path}: not UTF-8 text (byte b'\\xe9' at offset" in out.stderr and "save the labels file as UTF-8" in out.stderr


def test_data_import_refuses_a_count_below_one(tmp_path, capsys):
    """--sample 0 or --groups 0 would write a manifest no suite can use: argparse refuses it (exit 2) naming the option."""
    from pytest_posbias.cli import main

    for option, value in (("--sample", "0"), ("--groups", "-1"), ("--sample", "two")):
        args = ["data", "import", "mvbench", "--videos", str(tmp_path), "--annotations", str(tmp_path),
                "--out", str(tmp_path / "m.jsonl"), option, value]
        try:
            main(args)
        except SystemExit as exc:
            assert exc.code == 2 and f"argument {option}:" in capsys.readouterr().err
        else:
            raise AssertionError(f"{option} {value} was accepted")
    assert not (tmp_path / "m.jsonl").exists()


def test_a_deeply_nested_caption_line_is_a_config_error_naming_the_line(tmp_path):
    """A JSONL caption line nested past the recursion limit is a ConfigError naming the file and line."""
    from pytest_posbias.cli.commands import read_captions
    from pytest_posbias.errors import ConfigError

    path = tmp_path / "captions.jsonl"
    path.write_text('{"text": "ok"}\n{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}:2")):
        read_captions(str(path))


def test_read_captions_takes_text_caption_or_output_and_names_a_bad_line(tmp_path):
    """JSONL lines give their text, caption or output string; a broken JSON line is a ConfigError naming its line."""
    from pytest_posbias.cli.commands import read_captions
    from pytest_posbias.errors import ConfigError

    path = tmp_path / "captions.jsonl"
    path.write_text('{"caption": "a b"}\n\nplain line\n{"output": "c", "text": 3}\n')
    assert read_captions(str(path)) == ["a b", "plain line", "c"]
    path.write_text('{"text": "a"}\n{"text": NaN}\n')
    with pytest.raises(ConfigError, match=re.escape(f"{path}:2")):
        read_captions(str(path))
    path.write_text('{"text": "a"}\n{broken\n')
    with pytest.raises(ConfigError, match=re.escape(f"{path}:2")):
        read_captions(str(path))


@pytest.mark.parametrize("same", ["path", "link"])
def test_report_output_that_is_one_of_its_run_logs_is_refused_and_the_log_kept(tmp_path, capsys, same):
    """posbias report RUN_LOG -o RUN_LOG (or a link to it) wrote the HTML over the run log it read; now exit 2 naming -o."""
    from pytest_posbias.cli import main

    log = tmp_path / "run.jsonl"
    log.write_text('{"kind": "header", "schema_version": 1}\n')
    out = tmp_path / "out.html"
    if same == "link":
        out.symlink_to(log)
    target = log if same == "path" else out
    assert main(["report", str(log), "-o", str(target)]) == 2
    assert "-o" in capsys.readouterr().err and log.read_text() == '{"kind": "header", "schema_version": 1}\n'


def test_data_import_out_that_is_its_annotations_is_refused_and_the_file_kept(tmp_path, capsys):
    """posbias data import --out ANNOTATIONS wrote the manifest over the dataset's annotation file; now exit 2 naming --out."""
    from pytest_posbias.cli import main

    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "v1.mp4").write_bytes(b"x")
    ann = tmp_path / "ann.csv"
    text = "video,question,answer,a0,a1,a2,a3,a4\nv1,What?,0,a,b,c,d,e\n"
    ann.write_text(text)
    argv = ["data", "import", "nextqa", "--videos", str(tmp_path / "v"), "--annotations", str(ann), "--out", str(ann)]
    assert main(argv) == 2
    assert "--out" in capsys.readouterr().err and ann.read_text() == text


@pytest.mark.parametrize("value", ["0", "-3"])
def test_fixtures_build_refuses_groups_below_one(tmp_path, capsys, value):
    """posbias fixtures build --groups 0 (or -3) rendered a set with no group and exited 0; argparse now refuses it naming --groups."""
    from pytest_posbias.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["fixtures", "build", "--groups", value, "--out", str(tmp_path / "set")])
    assert exc.value.code == 2 and "argument --groups:" in capsys.readouterr().err
    assert not (tmp_path / "set").exists()


def test_models_tiny_into_a_folder_with_files_is_refused_and_the_files_kept(tmp_path, capsys):
    """posbias models tiny FAMILY DIR wrote random weights and a config over what DIR held (a real checkpoint's
    config.json); a non-empty DIR is now refused with exit 2 naming it."""
    from pytest_posbias.cli import main

    (tmp_path / "config.json").write_text('{"mine": true}')
    assert main(["models", "tiny", "qwen2_vl", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err and (tmp_path / "config.json").read_text() == '{"mine": true}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_judge_agreement_names_an_unknown_judge_on_stderr(tmp_path, capsys):
    """An unknown --judge was reported on stdout (where the table goes); it is an error on stderr naming --judge, exit 2."""
    from pytest_posbias.cli import main

    assert main(["judge-agreement", str(tmp_path / "labels.csv"), "--judge", "gpt4"]) == 2
    out, err = capsys.readouterr()
    assert "--judge must be embed, fragment or openai:MODEL; got 'gpt4'" in err and not out


def test_report_refuses_a_run_log_given_twice(tmp_path, capsys):
    """posbias report LOG LOG rendered the run as its own baseline (every paired difference 0); now exit 2 naming the log."""
    from pytest_posbias.cli import main

    log = tmp_path / "run.jsonl"
    log.write_text('{"kind": "header", "schema_version": 1}\n')
    link = tmp_path / "same.jsonl"
    link.symlink_to(log)
    assert main(["report", str(log), str(link), "-o", str(tmp_path / "r.html")]) == 2
    assert "given twice" in capsys.readouterr().err and not (tmp_path / "r.html").exists()


def test_cli_gates_shows_no_baseline_margin_for_a_gate_without_a_paired_form(capsys):
    """The attack, equivalence and parity gates keep their absolute threshold against a baseline: no margin."""
    from pytest_posbias.cli import main
    from pytest_posbias.gate_registry import GATES

    assert main(["gates"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    end = header.index("baseline margin") + len("baseline margin")  # the column is right-aligned under its title
    rows = {line.split()[0]: line[:end].split()[-1] for line in lines}
    assert rows.keys() == GATES.keys()
    assert {g for g, m in rows.items() if m == "-"} == {g for g, s in GATES.items() if s.worse is None} == {
        "attack", "equivalence", "parity", "parity_coverage", "parity_repetition"}
    assert rows["meg"] == "0.01"
