"""Hostile inputs of the tuner (issue 30, items 6 and 7): tuning databases edited or replaced by
something else, `report` and `explain` on a database that does not exist, and a `tune` stopped by
SIGTERM, SIGINT or kill -9 while a candidate runs.

Every tune here searches the one knob of a one-Relu model with --plant-faults, so its candidates
are few and come in a fixed order (strategy `fast`), and one of them (tactic.relu=planted_hang)
never returns: a candidate that is surely running when the signal comes.
"""
import json
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import craft
from hostile import CaseFailed, case  # the running hostile.py (it registers itself as 'hostile')

HANG = "tactic.relu=planted_hang"


def relu_model(ctx):
    return craft.save(craft.relu_model((1, 64)), ctx.path("relu.onnx"))


# The cases that stop the tune in the middle of the planted-hang candidate find that candidate by
# its command line, which only a fresh child per candidate has (a persistent worker's is
# `tactician evaluate --serve DATA_DIR`, whatever it evaluates): they run with --evaluator fresh;
# tuner.kill9_leaves_no_worker covers the persistent worker, the unit test
# Evaluator.AnInterruptStopsAPersistentWorker its interrupt.
FRESH = ("--evaluator", "fresh")


def tune_args(ctx, model, db, out=None, timeout="20s", extra=()):
    args = ["tune", model, "--plant-faults", "--strategy", "fast", "--knobs", "tactic.relu", "--threads", "1",
            "--budget", "120s", "--timeout", timeout, "--db", db]
    if out:
        args += ["--out", out]
    return args + list(extra)


def rows(db, where="1"):
    con = sqlite3.connect(db)
    try:
        return con.execute(f"SELECT id, route, status, reason FROM candidates WHERE {where} ORDER BY id").fetchall()
    finally:
        con.close()


_SEEDED = {}


def seeded_db(ctx):
    """A database holding one real tune of relu.onnx (the default route and a few candidates, no
    planted hang), copied into this case's folder with the model. The first call runs the tune."""
    if "dir" not in _SEEDED:
        model = relu_model(ctx)
        db = ctx.path("seed.db")
        r = ctx.run(*tune_args(ctx, model, db, extra=["--max-candidates", "2"]), timeout=120)
        ctx.expect_ok(r, r"2 candidates evaluated")
        keep = pathlib.Path(ctx.dir).parent / f"hostile-tuner-seed-{os.getpid()}"
        shutil.rmtree(keep, ignore_errors=True)
        keep.mkdir()
        shutil.copy(model, keep / "relu.onnx")
        shutil.copy(db, keep / "t.db")
        _SEEDED["dir"] = keep
        import atexit
        atexit.register(shutil.rmtree, keep, True)
    model, db = ctx.path("relu.onnx"), ctx.path("t.db")
    shutil.copy(_SEEDED["dir"] / "relu.onnx", model)
    shutil.copy(_SEEDED["dir"] / "t.db", db)
    return str(model), str(db)


def copy_row(db, route, **columns):
    """Inserts a copy of row 1 (the default route of the seeded tune) with `route` and `columns`
    replaced, as `sqlite3` at a shell would; returns the new row's id."""
    con = sqlite3.connect(db)
    try:
        names = [r[1] for r in con.execute("PRAGMA table_info(candidates)") if r[1] != "id"]
        values = dict(zip(names, con.execute(f"SELECT {', '.join(names)} FROM candidates WHERE id = 1").fetchone()))
        values["route"] = route
        values.update(columns)
        cur = con.execute(f"INSERT INTO candidates ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                          [values[n] for n in names])
        con.commit()
        return cur.lastrowid
    finally:
        con.close()


def temp_env(ctx):
    """TMPDIR inside the case's folder: the tune's temporary folder (no --out) must be gone after."""
    tmp = ctx.path("tmp", ".keep").parent
    return {"TMPDIR": str(tmp)}, tmp


def expect_no_temp_left(ctx, tmp):
    left = [p.name for p in tmp.iterdir() if p.name != ".keep"] if tmp.exists() else []
    ctx.check(not left, f"the tune left its temporary folder behind: {left}")


# ---- tampered databases ------------------------------------------------------------------------

@case("tuner.db_route_without_equals")
def db_route_without_equals(ctx):
    model, db = seeded_db(ctx)
    bad1 = copy_row(db, "threadsX")
    bad2 = copy_row(db, "a=b c")
    env, tmp = temp_env(ctx)
    # Resume leaves such rows out with a warning naming the file, the row and the reason (not
    # fatal: the route is evaluated again if proposed), and the tune goes on from the good rows.
    r = ctx.run(*tune_args(ctx, model, db, extra=["--max-candidates", "1"]), env=env, timeout=120)
    ctx.expect_ok(r, rf"warning: {db}: row {bad1} \(route 'threadsX'\): route: 'threadsX' is not of the form knob=value; "
                     r"row ignored",
                  rf"warning: {db}: row {bad2} \(route 'a=b c'\): route: 'c' is not of the form knob=value",
                  r"\b2 resumed\b")
    expect_no_temp_left(ctx, tmp)
    # The report leaves them out too, and says so (in the page and on stderr).
    html = ctx.path("r.html")
    r = ctx.run("report", db, "-o", html)
    ctx.expect_ok(r, rf"warning: {db}: row {bad1} \(route 'threadsX'\)", rf"warning: {db}: row {bad2} ")
    page = html.read_text()
    ctx.check("Rows left out" in page and "threadsX" in page, "the report does not list the rows left out")


@case("tuner.db_garbage_numbers")
def db_garbage_numbers(ctx):
    model, db = seeded_db(ctx)
    bad = {
        copy_row(db, "threads=1 x.a=1", median_ms="fast"): r"column 'median_ms' holds text 'fast', not a number",
        copy_row(db, "threads=1 x.b=1", runs="many"): r"column 'runs' holds text 'many', not an integer",
        copy_row(db, "threads=1 x.c=1", threads=1 << 40): r"column 'threads' holds 1099511627776, out of range",
        copy_row(db, "threads=1 x.d=1", seed=b"\x00\x01"): r"column 'seed' holds a blob of 2 bytes, not an integer",
        copy_row(db, "threads=1 x.e=1", median_ms=-2.5): r"median_ms is -2\.5",
        copy_row(db, "threads=1 x.f=1", status="excellent"): r"unknown status 'excellent'",
        copy_row(db, "threads=1 x.g=1", metrics_json='[{"l2": "0.1\\"}]'): r"metrics JSON at byte 16: syntax error while parsing value - invalid string: missing closing quote",
        copy_row(db, "threads=1 x.h=1", metrics_json='[{"l2": 1e999}]'): r"metrics JSON at byte 12: number overflow parsing '1e999'",
        copy_row(db, "threads=1 x.l=1", metrics_json='[{"l2": "0.1"}]'): r"metrics JSON, output 0: metric 'l2' is not a number",
        copy_row(db, "threads=1 x.i=1", cv=float("inf")): r"cv is inf",
        copy_row(db, "threads=1 x.j=1", runs=0): r"runs is 0 for an ok candidate",
        copy_row(db, "x.k=1  threads=1"): r"route is not in the canonical form",
    }
    r = ctx.run(*tune_args(ctx, model, db, extra=["--max-candidates", "1"]), timeout=120)
    ctx.expect_ok(r, r"\b2 resumed\b", *[rf"warning: {db}: row {i} \(route '[^']*'\): {why}" for i, why in bad.items()])
    html = ctx.path("r.html")
    r = ctx.run("report", db, "-o", html, "--jsonl", ctx.path("r.jsonl"))
    ctx.expect_ok(r, *[rf"warning: {db}: row {i} " for i in bad])
    # The JSONL export keeps every row whose columns hold what the tuner writes, and no other.
    lines = [json.loads(line) for line in ctx.path("r.jsonl").read_text().splitlines()]
    exported = {row["id"] for row in lines}
    ctx.check(not exported & set(list(bad)[:4]), f"rows with text or blobs in number columns were exported: {exported}")
    r = ctx.run("explain", model, "--db", db, "--threads", "1", "--rounds", "1", timeout=120)
    ctx.expect_ok(r, *[rf"warning: {db}: row {i} " for i in bad])


@case("tuner.db_not_sqlite")
def db_not_sqlite(ctx):
    model = relu_model(ctx)
    db = ctx.path("t.db")
    junk = bytes(range(256)) * 64
    db.write_bytes(junk)
    env, tmp = temp_env(ctx)
    r = ctx.run(*tune_args(ctx, model, db), env=env)
    ctx.expect_error(r, rf"{db}: not a Tactician tuning database", rc=2)
    expect_no_temp_left(ctx, tmp)
    r = ctx.run("report", db, "-o", ctx.path("r.html"))
    ctx.expect_error(r, rf"{db}: not a Tactician tuning database", rc=1)
    r = ctx.run("explain", model, "--db", db, "--threads", "1")
    ctx.expect_error(r, rf"{db}: not a Tactician tuning database", rc=2)
    ctx.check(db.read_bytes() == junk, "the file was modified")
    ctx.check(not ctx.path("r.html").exists(), "a report was written")


@case("tuner.report_explain_missing_db")
def report_explain_missing_db(ctx):
    model = relu_model(ctx)
    db = ctx.path("missing.db")
    r = ctx.run("report", db, "-o", ctx.path("r.html"))
    ctx.expect_error(r, rf"^tactician report: io_error: {db}: no such tuning database$", rc=1)
    r = ctx.run("report", db, "--jsonl", ctx.path("r.jsonl"))
    ctx.expect_error(r, rf"{db}: no such tuning database", rc=1)
    r = ctx.run("explain", model, "--db", db, "--threads", "1")
    ctx.expect_error(r, rf"^tactician explain: io_error: {db}: no such tuning database$", rc=1)
    left = sorted(p.name for p in ctx.dir.iterdir() if p.name.startswith("missing") or p.name.startswith("r."))
    ctx.check(not left, f"a reader created files: {left}")
    # An empty file is not a database either (and stays empty).
    db.write_bytes(b"")
    r = ctx.run("report", db, "-o", ctx.path("r.html"))
    ctx.expect_error(r, rf"{db}: not a Tactician tuning database: the file is empty", rc=1)
    ctx.check(db.stat().st_size == 0, "report wrote into an empty file")


# ---- signals -----------------------------------------------------------------------------------

def default_signals():
    # The runner may have been started with SIGINT ignored (a background job of a script): the
    # tuner keeps an ignored SIGINT ignored, so give it the default disposition explicitly.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start(ctx, args, name="tune"):
    out = open(ctx.path(f"{name}.out"), "wb")
    err = open(ctx.path(f"{name}.err"), "wb")
    p = subprocess.Popen([ctx.tactician] + [str(a) for a in args], stdout=out, stderr=err, cwd=ctx.dir,
                         stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=default_signals)
    out.close()
    err.close()
    return p


def output(ctx, name="tune"):
    return ctx.path(f"{name}.out").read_text(errors="replace") + ctx.path(f"{name}.err").read_text(errors="replace")


def evaluate_children(ctx):
    """pid -> argv of the live `tactician evaluate` processes of this case."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        argv = [a.decode(errors="replace") for a in argv if a]
        if len(argv) > 1 and argv[1] == "evaluate" and str(ctx.dir) in " ".join(argv) and state != "Z":
            found[int(pid)] = argv
    return found


def wait_for_hang(ctx, p, limit=60):
    """Waits until the tuner runs the planted-hang candidate; returns that child's pid."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise CaseFailed(f"the tune ended (exit {p.returncode}) before the hanging candidate:\n{output(ctx)[-1500:]}")
        for pid, argv in evaluate_children(ctx).items():
            if "--route" in argv and HANG in argv[argv.index("--route") + 1]:
                time.sleep(0.5)  # well inside it (the model is loaded, the engine runs)
                return pid
        time.sleep(0.02)
    p.kill()
    raise CaseFailed(f"no candidate with {HANG} within {limit} s:\n{output(ctx)[-1500:]}")


def wait_gone(pid, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def interrupt_mid_candidate(ctx, sig, name, code):
    model = relu_model(ctx)
    db, out = ctx.path("t.db"), ctx.path("out")
    p = start(ctx, tune_args(ctx, model, db, out, extra=FRESH))
    child = wait_for_hang(ctx, p)
    t0 = time.monotonic()
    p.send_signal(sig)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise CaseFailed(f"tune still running 30 s after {name}:\n{output(ctx)[-1500:]}")
    text = output(ctx)
    ctx.check(rc == code, f"tune exited {rc} after {name}, expected {code}:\n{text[-2000:]}")
    ctx.check(time.monotonic() - t0 < 15, f"tune took {time.monotonic() - t0:.1f} s to stop after {name}")
    ctx.check(f"tactician tune: interrupted ({name}): stopped early; the database keeps every finished candidate, "
              f"{out} has the best of them" in text, f"no one-line message about {name}:\n{text[-2000:]}")
    ctx.check("terminate called" not in text and "Traceback" not in text, text[-2000:])
    ctx.check(wait_gone(child, 3), f"the interrupted candidate (pid {child}) is still running")
    for f in ("best.route", "summary.json", "best.plan"):
        ctx.check((out / f).exists(), f"{f} was not written after {name}:\n{text[-1500:]}")
    summary = json.loads((out / "summary.json").read_text())
    ctx.check(summary["stop_reason"] == f"interrupted ({name})", f"stop_reason {summary['stop_reason']!r}")
    ctx.check(HANG not in summary["best_route"], summary["best_route"])
    recorded = rows(db)
    ctx.check(recorded, "nothing was recorded before the interrupt")
    ctx.check(not [r for r in recorded if HANG in r[1]], f"the interrupted candidate was recorded: {recorded}")
    ctx.check(not [r for r in recorded if r[2] not in ("ok", "rejected", "crashed")],
              f"an interrupted evaluation was recorded as a failure: {recorded}")
    return model, db, out, recorded


@case("tuner.sigterm_mid_candidate")
def sigterm_mid_candidate(ctx):
    interrupt_mid_candidate(ctx, signal.SIGTERM, "SIGTERM", 143)


@case("tuner.sigint_mid_candidate")
def sigint_mid_candidate(ctx):
    interrupt_mid_candidate(ctx, signal.SIGINT, "SIGINT", 130)


@case("tuner.sigterm_removes_temp_folder")
def sigterm_removes_temp_folder(ctx):
    # Without --out the reference data lives in a temporary folder: an interrupted tune removes it.
    model = relu_model(ctx)
    env, tmp = temp_env(ctx)
    p = subprocess.Popen([ctx.tactician] + tune_args(ctx, model, str(ctx.path("t.db")), extra=FRESH), cwd=ctx.dir,
                         stdout=open(ctx.path("tune.out"), "wb"), stderr=open(ctx.path("tune.err"), "wb"),
                         stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=default_signals,
                         env={**os.environ, **env})
    wait_for_hang(ctx, p)
    ctx.check(any(f.name.startswith("tactician-tune-") for f in tmp.iterdir()),
              "the tune made no temporary folder under TMPDIR")
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    ctx.check(rc == 143, f"tune exited {rc} after SIGTERM:\n{output(ctx)[-1500:]}")
    ctx.check("tactician tune: interrupted (SIGTERM): stopped early; the database keeps every finished candidate\n"
              in output(ctx), output(ctx)[-1500:])
    expect_no_temp_left(ctx, tmp)


@case("tuner.kill9_leaves_no_candidate")
def kill9_leaves_no_candidate(ctx):
    model = relu_model(ctx)
    p = start(ctx, tune_args(ctx, model, ctx.path("t.db"), ctx.path("out"), extra=FRESH))
    child = wait_for_hang(ctx, p)
    p.kill()
    p.wait(timeout=10)
    ctx.check(p.returncode == -signal.SIGKILL, f"tune exited {p.returncode}")
    ctx.check(wait_gone(child, 3), f"the candidate (pid {child}) outlived its tuner's kill -9")
    ctx.check(not evaluate_children(ctx), f"candidates left: {evaluate_children(ctx)}")


@case("tuner.kill9_leaves_no_worker")
def kill9_leaves_no_worker(ctx):
    # The persistent worker (the default) dies with its tuner, however the tuner ends.
    model = relu_model(ctx)
    p = start(ctx, tune_args(ctx, model, ctx.path("t.db"), ctx.path("out")))
    deadline = time.monotonic() + 60
    workers = {}
    while not workers and time.monotonic() < deadline and p.poll() is None:
        workers = {pid: a for pid, a in evaluate_children(ctx).items() if "--serve" in a}
        time.sleep(0.02)
    if not workers:
        p.kill()
        raise CaseFailed(f"no persistent worker seen:\n{output(ctx)[-1500:]}")
    time.sleep(0.3)
    p.kill()
    p.wait(timeout=10)
    for pid in workers:
        ctx.check(wait_gone(pid, 3), f"the worker (pid {pid}) outlived its tuner's kill -9")
    ctx.check(not evaluate_children(ctx), f"evaluators left: {evaluate_children(ctx)}")


@case("tuner.resume_after_interrupt")
def resume_after_interrupt(ctx):
    model, db, out, first = interrupt_mid_candidate(ctx, signal.SIGTERM, "SIGTERM", 143)
    # The rerun resumes every finished candidate, evaluates the interrupted one (a planted hang:
    # killed at its 3 s limit and recorded as a timeout this time) and finishes.
    r = ctx.run(*tune_args(ctx, model, db, out, timeout="3s"), timeout=120)
    ctx.expect_ok(r, rf"\b{len(first)} resumed\b")
    now = rows(db)
    ctx.check(now[:len(first)] == first, "the first run's rows changed")
    again = [row for row in now[len(first):] if row[1] in {f[1] for f in first}]
    ctx.check(not again, f"resumed routes were evaluated again: {again}")
    hang = [row for row in now if HANG in row[1]]
    ctx.check(len(hang) == 1 and hang[0][2] == "timeout", f"the interrupted candidate after the resume: {hang}")
    summary = json.loads((out / "summary.json").read_text())
    ctx.check(not summary["stop_reason"].startswith("interrupted"), summary["stop_reason"])
