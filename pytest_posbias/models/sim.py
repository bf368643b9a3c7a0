"""Simulated video LLMs (DESIGN.md section 7)."""

from __future__ import annotations

PROFILES: dict[str, str] = {
    "unbiased": "describes every slot and answers from what it saw",
    "primacy": "drops detail in later slots",
    "recency": "drops detail in earlier slots",
    "middle-weak": "drops detail in middle slots",
    "looping": "enters n-gram loops, more often under temporal discontinuity",
    "letter-bias": "prefers early option letters when unsure",
}
