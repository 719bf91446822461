"""A search many workers share, on a real PostgreSQL server: two ``python -m labkit search`` workers on one study,
one killed with ``kill -9`` in the middle of a trial; no finished trial is lost, and the heartbeat marks the dead
worker's trial FAIL within its grace period. Bad and unreachable URLs fail fast with a ValueError.

The server is Debian's ``postgresql`` package (``apt-get install postgresql``; ``.ci/run`` installs it), started
here with ``initdb``/``pg_ctl`` in a temporary folder on a free port (as the ``postgres`` user when run as root,
which PostgreSQL refuses). Without its binaries these tests skip, except under ``CI=true``, where they fail.
"""
import glob
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
import psycopg
import pytest

from labkit.search import SearchConfig, open_storage, run_search
from labkit.search import storage as storage_module
from labkit.search.__main__ import main

from tiny_models import save_tiny_model_folder

REPO = Path(__file__).resolve().parents[2]
HEARTBEAT, GRACE = 1, 3                                    # seconds: the workers' --heartbeat-interval, --grace-period
RUNNING, COMPLETE, FAIL = (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.COMPLETE,
                           optuna.trial.TrialState.FAIL)


# -- the server ------------------------------------------------------------------------------------------
def _pg_bin() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin holding pg_ctl (Debian's layout), else pg_ctl's folder on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).resolve().parent if on_path else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(folder: Path) -> list[str]:
    """The command prefix that runs the server's tools: PostgreSQL refuses root, so root runs them as postgres."""
    if os.geteuid() != 0:
        return []
    user = pwd.getpwnam("postgres")                        # Debian's package creates it
    os.chown(folder, user.pw_uid, user.pw_gid)
    return ["runuser", "-u", "postgres", "--"]


def _run(cmd: list, cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="module")
def postgres():
    """A fresh PostgreSQL server: yields the URL prefix ``postgresql+psycopg://labkit@127.0.0.1:<port>/``."""
    bin_dir = _pg_bin()
    if bin_dir is None:
        reason = "PostgreSQL's initdb/pg_ctl not found (apt-get install -y postgresql; .ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + ": CI must run these tests")
        pytest.skip(reason)
    folder = Path(tempfile.mkdtemp(prefix="labkit-pg-"))
    prefix, port, data = _as_server_user(folder), _free_port(), folder / "data"
    options = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
               "-c max_connections=50")
    try:
        _run([*prefix, bin_dir / "initdb", "-D", data, "-A", "trust", "-U", "labkit", "-E", "UTF8", "--no-sync"],
             folder)
        _run([*prefix, bin_dir / "pg_ctl", "-D", data, "-l", folder / "server.log", "-w", "-t", "30", "-o", options,
              "start"], folder)
        yield f"postgresql+psycopg://labkit@127.0.0.1:{port}/"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*prefix, bin_dir / "pg_ctl", "-D", data, "-m", "immediate", "stop"], cwd=folder,
                           capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def new_database(server: str, name: str) -> str:
    with psycopg.connect(server.replace("postgresql+psycopg", "postgresql") + "postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server + name


# -- the workers -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(save_tiny_model_folder(tmp_path_factory.mktemp("models") / "tiny4", n_layers=4))


def worker(model: str, url: str, study_name: str, seed: int) -> subprocess.Popen:
    """``python -m labkit search`` on ``url`` until stopped (random sampler, modelled objective, tiny settings)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "labkit", "search", "--model", model, "--objective", "modelled", "--sampler",
           "random", "--trials", "100000", "--storage", url, "--study-name", study_name, "--prompts", "1",
           "--tokens", "4", "--no-progress", "--seed", str(seed), "--heartbeat-interval", str(HEARTBEAT),
           "--grace-period", str(GRACE)]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def worker_id(proc: subprocess.Popen) -> str:
    return f"{socket.gethostname()}:{proc.pid}"            # what run.py records as a trial's "worker"


def trials(store, name: str) -> list:
    """The study's trials as the database holds them now ([] before the study exists)."""
    try:
        return optuna.load_study(study_name=name, storage=store).get_trials(deepcopy=False)
    except KeyError:
        return []


def state_of(store, name: str, number: int):
    return next(t.state for t in trials(store, name) if t.number == number)


def wait_for(condition, seconds: float, what: str, procs=()):
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        for p in procs:
            assert p.poll() is None, f"a worker exited early:\n{p.stdout.read()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return found


def has_heartbeat(url: str, trial_id: int) -> bool:
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        return conn.execute("SELECT 1 FROM trial_heartbeats WHERE trial_id = %s", (trial_id,)).fetchone() is not None


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def freeze_mid_trial(proc: subprocess.Popen, store, url: str, name: str):
    """SIGSTOP ``proc`` until it is frozen inside a RUNNING trial whose heartbeat is recorded; that trial."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        os.kill(proc.pid, signal.SIGSTOP)
        wait_for(lambda: stopped(proc.pid), 10, "SIGSTOP")
        mine = [t for t in trials(store, name) if t.state == RUNNING and t.user_attrs.get("worker") == worker_id(proc)]
        if mine and has_heartbeat(url, mine[0]._trial_id):
            return mine[0]
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(random.uniform(0.02, 0.3))
    pytest.fail("never caught the worker inside a trial with a heartbeat")


def completed_by(found: list, proc: subprocess.Popen) -> list:
    return [t for t in found if t.state == COMPLETE and t.user_attrs["worker"] == worker_id(proc)]


# -- the tests -----------------------------------------------------------------------------------------------
def test_two_workers_one_killed_mid_trial(postgres, tiny):
    url, name = new_database(postgres, "shared"), "shared-pg"
    store = open_storage(url)                               # the test's own reader of the database
    a, b = worker(tiny, url, name, seed=0), worker(tiny, url, name, seed=1)
    try:
        wait_for(lambda: all(len(completed_by(trials(store, name), p)) >= 2 for p in (a, b)), 120,
                 "both workers to complete 2 trials", (a, b))
        victim = freeze_mid_trial(a, store, url, name)
        finished = {t.number: (t.value, t.params) for t in trials(store, name) if t.state == COMPLETE}
        os.kill(a.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        assert a.wait(timeout=30) == -signal.SIGKILL
        assert state_of(store, name, victim.number) == RUNNING            # the kill alone changes nothing
        wait_for(lambda: state_of(store, name, victim.number) != RUNNING, GRACE + HEARTBEAT + 10,
                 "the killed worker's trial to leave RUNNING", (b,))
        failed_after = time.monotonic() - killed_at
        n_b = len(completed_by(trials(store, name), b))
        wait_for(lambda: len(completed_by(trials(store, name), b)) >= n_b + 2, 60, "b to go on", (b,))
    finally:
        a.kill()                                            # (dead already, unless the test failed before)
        b.terminate()                                       # as a job scheduler ends it
        out_b = b.communicate(timeout=60)[0]
        a.communicate(timeout=60)
    assert b.returncode == -signal.SIGTERM, out_b           # b worked on until it was stopped
    assert state_of(store, name, victim.number) == FAIL
    assert failed_after <= GRACE + HEARTBEAT + 5, f"marked FAIL {failed_after:.1f} s after the kill"
    final = {t.number: t for t in trials(store, name)}
    assert {n: (final[n].state, final[n].value, final[n].params) for n in finished} == {
        n: (COMPLETE, *kept) for n, kept in finished.items()}                   # no finished trial lost or changed
    assert [t.number for t in final.values() if t.user_attrs.get("worker") == worker_id(a)
            and t.state != COMPLETE] == [victim.number]    # a's other trials all finished, and are all kept
    resumed = run_search(tiny, SearchConfig(sampler="random", study_name=name, n_prompts=1, n_tokens=4), trials=2,
                         storage=url, progress=False)      # a third worker, in this process, from the URL alone
    assert resumed.n_complete == sum(t.state == COMPLETE for t in final.values()) + 2


def test_bad_server_urls_fail_fast(postgres, tiny, monkeypatch):
    closed = f"postgresql://labkit:secret@127.0.0.1:{_free_port()}/search"
    started = time.monotonic()
    with pytest.raises(ValueError, match="cannot open Optuna storage 'postgresql://labkit:\\*\\*\\*@") as err:
        open_storage(closed)
    assert "secret" not in str(err.value) and "refused" in str(err.value)
    with pytest.raises(ValueError, match='database "nosuchdb" does not exist'):
        open_storage(postgres + "nosuchdb")
    with pytest.raises(ValueError, match="cannot open Optuna storage"):   # `python -m labkit`: one line, status 1
        main(["--model", tiny, "--storage", closed, "--trials", "1", "--no-progress"])
    with pytest.raises(SystemExit) as exit_:                             # a usage error: status 2, before any work
        main(["--model", tiny, "--storage", postgres + "x", "--grace-period", "1", "--no-progress"])
    assert exit_.value.code == 2
    assert time.monotonic() - started < 10
    monkeypatch.setattr(storage_module, "CONNECT_TIMEOUT_S", 2)
    with socket.socket() as silent:                         # accepts the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        started = time.monotonic()
        with pytest.raises(ValueError, match="cannot open Optuna storage.*timeout"):
            open_storage(f"postgresql+psycopg://labkit@127.0.0.1:{silent.getsockname()[1]}/search")
        assert time.monotonic() - started < 10
