"""Regenerate tests/data/upstream/newsroom_fragments.json by RUNNING lil-lab/newsroom's
``newsroom/analyze/fragments.py`` (``Fragments``) with spaCy.

    python scripts/upstream_fragment_data.py --newsroom PATH/TO/newsroom [--commit SHA]

NEWSROOM loads ``en_core_web_sm`` (a model download); the script gives its ``Fragments``
class ``spacy.blank("en")`` instead (``Fragments._en``), whose English tokenizer rules are
the ones that pipeline tokenizes with. The upstream file is imported from the checkout,
never copied. NEWSROOM's "summary" argument is the reference, its "text" the generated
summary (pytest-posbias's reference-fragment coverage).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
from pathlib import Path

import spacy

PAIRS = [
    ("The U.S. economy grew 3.14% in Q2, officials said.",
     "Officials said the U.S. economy grew 3.14% in the second quarter."),
    ("Don't panic: the meeting starts at 10:30 a.m. and ends by 12:15 p.m.",
     "The meeting starts at 10:30 a.m., so don't be late; it ends by 12:15 p.m."),
    ("Dr. Smith treated 5,000 COVID-19 patients at St. Mary's Hospital.",
     "St. Mary's Hospital: Dr. Smith treated over 5,000 patients with COVID-19."),
    ("Read the full report at https://www.example.org/report?id=42 before Friday.",
     "The full report is at https://www.example.org/report?id=42, read it before Friday."),
    ("It's 9:45 and the U.K. team can't find Mr. Jones' e-mail (jones@example.com).",
     "The U.K. team can't find the e-mail of Mr. Jones; it's 9:45."),
    ("Prices rose from $1,250.50 to $1,300 on Jan. 5, 2024, i.e. about 4%.",
     "On Jan. 5, 2024 prices rose to $1,300 from $1,250.50, about 4%, i.e. a rise."),
    ("A man walks a dog. The dog barks at a cat. The cat runs up a tree.",
     "A dog barks at a cat while a man walks it; the cat runs up a tree."),
    ("They'll arrive at 7 p.m.; we'd better be ready -- they won't wait!",
     "We'd better be ready, they'll arrive at 7 p.m. and won't wait."),
    ("Visit www.news-site.com/live or call 555-0199 for U.N. updates at 08:00 GMT.",
     "For U.N. updates at 08:00 GMT visit www.news-site.com/live."),
    ("The score was 3-2 after 90+4 minutes; the coach's 4-4-2 worked.",
     "After 90+4 minutes the score was 3-2 and the coach's 4-4-2 worked."),
    ("", "Anything."),
    ("Nothing in common here.", "Completely different words."),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--newsroom", type=Path, required=True)
    ap.add_argument("--commit")
    ap.add_argument("--out", type=Path, default=Path("tests/data/upstream/newsroom_fragments.json"))
    a = ap.parse_args()
    commit = a.commit or subprocess.check_output(["git", "-C", str(a.newsroom), "rev-parse", "HEAD"], text=True).strip()
    spec = importlib.util.spec_from_file_location("newsroom_fragments", a.newsroom / "newsroom/analyze/fragments.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    mod.Fragments._en = spacy.blank("en")
    cases = []
    for ref, summ in PAIRS:
        f = mod.Fragments(ref, summ)
        cases.append({"reference": ref, "summary": summ, "coverage": f.coverage(), "density": f.density(),
                      "matches": [list(m) for m in f.overlaps()], "reference_tokens": f._norm_summary})
    out = {"repository": "lil-lab/newsroom", "commit": commit,
           "function": "newsroom/analyze/fragments.py Fragments(summary=reference, text=summary).coverage()/.density()",
           "spacy": spacy.__version__, "tokenizer": 'spacy.blank("en") as Fragments._en',
           "command": "python scripts/upstream_fragment_data.py --newsroom NEWSROOM", "cases": cases}
    a.out.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases -> {a.out}")


if __name__ == "__main__":
    main()
