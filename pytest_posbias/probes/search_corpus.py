"""The regression corpus of the property search: every minimal counterexample, kept for replay.

Stored in hypothesis's ``DirectoryBasedExampleDatabase`` under ``<cache>/hypothesis`` (atomic
writes, so xdist workers can add at once and the folder can be copied between machines). Key:
``posbias-search|<property>|<item>``; value: the canonical JSON of ``{"value": <perturbation>,
"model": <spec>, "identity": <hash of the backend identity>, "run": <run id>}`` — the
perturbation itself, not hypothesis's choice sequence, so it replays whatever the strategy's
internals.

Replay scope (decisions): a run replays, in canonical-JSON order, every stored perturbation of the
key that no backend with the *same identity* found (its own counterexamples are found again by
its deterministic search, so a second run makes 0 model calls) and no model found *in this run*
(so several models give the same result serially and with ``-n 2``). Nothing is ever deleted.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..gate_context import ProbeContext, SearchContext
    from .search import ItemProperty


def _canon(d: object) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def identity_hash(ctx: ProbeContext, model: str) -> str:
    """SHA-256 (16 hex) of the backend identity (model id, revision, settings) of ``model``."""
    ident = dict(ctx.engine.backend(model).identity())
    return hashlib.sha256(_canon(ident).encode()).hexdigest()[:16]


class Corpus:
    """Counterexamples by (property, item) in a hypothesis example database under ``root``."""

    def __init__(self, root: str | Path) -> None:
        from hypothesis.database import DirectoryBasedExampleDatabase

        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # e.g. a file where the folder should be, or no permission
            raise ConfigError(f"the search corpus folder {str(self.root)!r} (under `cache`, --posbias-cache) "
                              f"is not a usable directory: {exc.strerror or exc}; remove or fix it") from None
        self.db = DirectoryBasedExampleDatabase(str(self.root))

    @staticmethod
    def key(prop: ItemProperty[Any]) -> bytes:
        return f"posbias-search|{prop.corpus_key()}".encode()

    def entries(self, prop: ItemProperty[Any]) -> list[dict[str, Any]]:
        """Every stored entry of the property's key (unreadable files are skipped)."""
        out = []
        for raw in self.db.fetch(self.key(prop)):
            try:
                d = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(d, dict) and isinstance(d.get("value"), dict):
                out.append(d)
        return sorted(out, key=_canon)

    def replayable(self, prop: ItemProperty[Any], ctx: SearchContext) -> list[dict[str, Any]]:
        """Distinct stored perturbations to replay for ``prop`` (see the module docstring):
        ``{"value", "found_by": [model specs], "runs": [run ids]}`` in canonical order."""
        mine = identity_hash(ctx, prop.model)
        groups: dict[str, dict[str, Any]] = {}
        for e in self.entries(prop):
            g = groups.setdefault(_canon(e["value"]), {"value": e["value"], "found_by": set(), "identities": set(),
                                                        "runs": set()})
            g["found_by"].add(str(e.get("model", "?")))
            g["identities"].add(str(e.get("identity", "")))
            g["runs"].add(str(e.get("run", "")))
        run = getattr(ctx, "run_id", None)
        return [{"value": g["value"], "found_by": sorted(g["found_by"]), "runs": sorted(g["runs"])}
                for _k, g in sorted(groups.items()) if mine not in g["identities"] and run not in g["runs"]]

    def add(self, prop: ItemProperty[Any], ctx: SearchContext, value: dict[str, Any]) -> None:
        """Store a minimal counterexample found on ``prop.model`` in this run."""
        if not isinstance(value, dict):
            raise ConfigError(f"a corpus value must be a JSON object; got {type(value).__name__}")
        ident = identity_hash(ctx, prop.model)
        if any(e.get("identity") == ident and _canon(e["value"]) == _canon(value) for e in self.entries(prop)):
            return  # this model's counterexample is stored already (a re-run finds the same one)
        entry = {"value": value, "model": prop.model, "identity": ident, "run": str(getattr(ctx, "run_id", ""))}
        self.db.save(self.key(prop), _canon(entry).encode("utf-8"))


def corpus_for(ctx: SearchContext) -> Corpus:
    """The run's corpus: ``<cache>/hypothesis``."""
    return Corpus(Path(ctx.cache_dir) / "hypothesis")


__all__ = ["Corpus", "corpus_for", "identity_hash"]
