"""Model calls shared between xdist workers (work_share): each request made once, an idle worker helps.

Two engines on one cache stand for two workers (``fcntl`` locks taken through separate open files
conflict between threads of one process as between processes); a killed helper is a real process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from pytest_posbias.engine import (
    Decoding,
    Engine,
    Generation,
    GenerationCache,
    Request,
    RunLog,
    read_run_log,
)
from pytest_posbias.video.compose import TextPart
from pytest_posbias.work_share import WorkShare


class EchoBackend:
    """Answers ``echo <prompt>``; records what it made; ``fail`` answers every call with an error."""

    name = "echo"

    def __init__(self, *, delay: float = 0.0, batch: int = 4, revision: str = "r1", fail: bool = False) -> None:
        self.delay = delay
        self.max_batch_size = batch
        self.revision = revision
        self.fail = fail
        self.made: list[str] = []

    def identity(self):
        return {"backend": "echo", "model_id": "echo", "revision": self.revision}

    def generate(self, requests):
        time.sleep(self.delay)
        self.made += [r.prompt_text for r in requests]
        if self.fail:
            return [Generation(finish_reason="error", error="boom") for _ in requests]
        return [Generation(f"echo {r.prompt_text}", 2, "stop") for r in requests]

    def score_options(self, requests, letters):
        raise NotImplementedError

    def close(self):
        pass


def _requests(n: int) -> list[Request]:
    return [Request("echo", (TextPart(f"q{i}"),), Decoding(max_new_tokens=8), meta={"probe": "t"}) for i in range(n)]


def _engine(tmp_path: Path, worker: str, backend: EchoBackend) -> Engine:
    eng = Engine(GenerationCache(tmp_path / "gen.sqlite"), backend_for=lambda _m: backend,
                 runlog=RunLog(tmp_path / f"log-{worker}.jsonl", {"worker": worker}))
    eng.share = WorkShare(tmp_path / "work", worker)
    return eng


def _help(engine: Engine, backend: EchoBackend):
    return lambda pub, i: engine.make_published(pub, i, backend)


def _owner_thread(owner: Engine, reqs: list[Request], out: dict[str, list[Generation]]) -> threading.Thread:
    """The busy worker: runs ``reqs`` on a thread, puts the answers in ``out["g"]``, then retires."""
    def run() -> None:
        try:
            out["g"] = owner.run(reqs, probe="t")
        finally:
            owner.share.retire()  # this worker's tests are done: a helper may stop

    t = threading.Thread(target=run)
    t.start()
    return t


def test_an_idle_worker_makes_part_of_a_busy_workers_calls_and_none_twice(tmp_path):
    owner_b, helper_b = EchoBackend(delay=0.05), EchoBackend(delay=0.05)
    owner, helper = _engine(tmp_path, "gw0", owner_b), _engine(tmp_path, "gw1", helper_b)
    reqs = _requests(80)  # 20 batches of 4
    out: dict[str, list[Generation]] = {}
    t = _owner_thread(owner, reqs, out)
    time.sleep(0.2)  # the owner has published and made a few batches
    helped = helper.share.help_until_idle(_help(helper, helper_b))
    t.join()

    assert [g.text for g in out["g"]] == [f"echo q{i}" for i in range(80)]
    assert helped == helper.helped == len(helper_b.made) > 0  # the idle worker made part of the calls
    assert owner_b.made and set(owner_b.made).isdisjoint(helper_b.made)  # none made twice
    assert sorted(owner_b.made + helper_b.made) == sorted(f"q{i}" for i in range(80))
    # the owner's gate counts every call of its probe as made, as a serial run would; the helper counts none
    assert owner.stats.made == 80 and helper.stats.made == 0 and owner.stats.cache_hits == 0
    # one request record per key across the two logs: the helper logged what it made, the owner the rest
    for eng in (owner, helper):
        eng.runlog.close()
    recs = [r for w in ("gw0", "gw1") for r in read_run_log(tmp_path / f"log-{w}.jsonl")[1] if r.get("kind") == "request"]
    assert sorted(r["request"]["parts"][0]["text"] for r in recs) == sorted(f"q{i}" for i in range(80))
    assert not any(r["cache_hit"] for r in recs)
    assert not list((tmp_path / "work").glob("gw0-*"))  # the publication is withdrawn when the call returns


def test_a_helper_with_another_model_identity_makes_nothing(tmp_path):
    owner_b, helper_b = EchoBackend(delay=0.02), EchoBackend(revision="r2")
    owner, helper = _engine(tmp_path, "gw0", owner_b), _engine(tmp_path, "gw1", helper_b)
    t = _owner_thread(owner, _requests(40), {})
    time.sleep(0.1)
    assert helper.share.help_until_idle(_help(helper, helper_b)) == 0
    t.join()
    assert helper_b.made == [] and len(owner_b.made) == 40


def test_calls_the_helper_failed_are_lost_units_of_the_owner_not_sent_again(tmp_path):
    """A call that fails for the helper is made once, as serially: the owner takes the failed
    generation from the publication as its own call's (a lost unit, counted failed), not a second send."""
    owner_b, helper_b = EchoBackend(delay=0.05), EchoBackend(delay=0.05, fail=True)
    owner, helper = _engine(tmp_path, "gw0", owner_b), _engine(tmp_path, "gw1", helper_b)
    out: dict[str, list[Generation]] = {}
    t = _owner_thread(owner, _requests(40), out)
    time.sleep(0.15)
    helper.share.help_until_idle(_help(helper, helper_b))
    t.join()
    assert helper_b.made and owner_b.made  # the helper tried, and every answer it got was an error
    assert set(owner_b.made).isdisjoint(helper_b.made) and len(owner_b.made) + len(helper_b.made) == 40
    lost = {f"q{i}" for i, g in enumerate(out["g"]) if not g.ok}
    assert lost == set(helper_b.made)  # fail closed: the helper's failures are the owner's lost units
    assert all(g.text == f"echo q{i}" for i, g in enumerate(out["g"]) if g.ok)
    assert owner.stats.made == 40 and owner.stats.failed == len(helper_b.made)
    for eng in (owner, helper):
        eng.runlog.close()
    recs = [r for w in ("gw0", "gw1") for r in read_run_log(tmp_path / f"log-{w}.jsonl")[1] if r.get("kind") == "request"]
    assert sorted(r["request"]["parts"][0]["text"] for r in recs) == sorted(f"q{i}" for i in range(40))


def test_a_helper_killed_while_holding_a_batch_leaves_no_claim(tmp_path):
    """A helper process killed mid-batch: the kernel drops its lock, the owner makes that batch."""
    owner_b = EchoBackend(delay=0.3)  # 10 batches: about 3 s
    owner = _engine(tmp_path, "gw0", owner_b)
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_work_share import EchoBackend, _engine
        from pathlib import Path
        b = EchoBackend(delay=3600)  # claims the last batch, then hangs inside the call
        e = _engine(Path({str(tmp_path)!r}), "gw1", b)
        def make(pub, i):
            print("holding", i, flush=True)
            return e.make_published(pub, i, b)
        e.share.help_until_idle(make)
    """)
    out: dict[str, list[Generation]] = {}
    t = _owner_thread(owner, _requests(40), out)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdout is not None and proc.stdout.readline().split()[0] == "holding"  # the last batch
    time.sleep(0.2)  # stuck in its call, holding the batch
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    t.join(timeout=60)
    assert not t.is_alive()
    assert [g.text for g in out["g"]] == [f"echo q{i}" for i in range(40)]
    assert owner.stats.made == 40 and sorted(owner_b.made) == sorted(f"q{i}" for i in range(40))


def test_an_idle_worker_stops_when_no_other_worker_is_active(tmp_path):
    a, b = WorkShare(tmp_path, "gw0"), WorkShare(tmp_path, "gw1")
    assert a.others_active() and b.others_active()
    b.retire()
    assert not a.others_active()
    t0 = time.monotonic()
    assert a.help_until_idle(lambda pub, i: (1, {})) == 0 and time.monotonic() - t0 < 5


def test_a_helper_does_not_send_again_a_batch_the_owner_made_whose_calls_failed(tmp_path):
    """Failed answers are not cached: a helper walking back over batches the owner already made
    would re-send them (a second call, and a clean answer in the log for a unit the gate lost)."""
    owner_b, helper_b = EchoBackend(delay=0.05, fail=True), EchoBackend(delay=0.05)
    owner, helper = _engine(tmp_path, "gw0", owner_b), _engine(tmp_path, "gw1", helper_b)
    out: dict[str, list[Generation]] = {}
    t = _owner_thread(owner, _requests(40), out)
    time.sleep(0.3)  # the owner has made (and failed) a few batches
    helper.share.help_until_idle(_help(helper, helper_b))
    t.join()
    assert owner_b.made and helper_b.made
    assert set(owner_b.made).isdisjoint(helper_b.made)  # no request sent twice
    assert len(owner_b.made) + len(helper_b.made) == 40
    failed = {f"q{i}" for i, g in enumerate(out["g"]) if not g.ok}
    assert failed == set(owner_b.made)  # what the owner's gate lost is what the owner sent: fail closed


def test_the_publications_of_a_worker_that_is_gone_are_not_made(tmp_path):
    """A killed worker's publication stays on disk with no lock held: nobody waits for its answers."""
    gone, idle = WorkShare(tmp_path, "gw0"), WorkShare(tmp_path, "gw1")
    gone.publish([[("k1", None)], [("k2", None)]], probe="t", model="echo", identity={})
    assert len(idle.others()) == 1
    gone.retire()  # as the kernel does for a killed process
    assert idle.others() == [] and idle.help_once(lambda pub, i: (1, {})) == 0


def test_a_helper_stops_on_a_publication_whose_worker_dies_while_it_helps(tmp_path):
    """The publisher killed while a helper walks its batches: the helper makes no further batch
    (the publisher's replacement makes those requests; both making them would send them twice)."""
    dying, idle = WorkShare(tmp_path, "gw0"), WorkShare(tmp_path, "gw1")
    dying.publish([[("k1", None)], [("k2", None)], [("k3", None)]], probe="t", model="echo", identity={})
    made: list[int] = []

    def make(pub, i):
        made.append(i)
        dying.retire()  # as the kernel does when the publisher is killed
        return 1, {}

    assert idle.help_once(make) == 1 and made == [2]


def test_a_withdrawn_publication_cannot_be_claimed_or_recreated(tmp_path):
    a = WorkShare(tmp_path, "gw0")
    pub = a.publish([[("k1", None)], [("k2", None)]], probe="t", model="echo", identity={})
    WorkShare.withdraw(pub)
    with pub.claim(1, wait=False) as held:
        assert not held
    pub.mark_done(1, {"k2": Generation(finish_reason="error", error="boom")})
    assert not pub.folder.exists() and [p.name for p in tmp_path.iterdir()] == ["active-gw0.lock"]
