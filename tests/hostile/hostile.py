#!/usr/bin/python3
"""The hostile-input corpus (issue 30): crafted models, plans, inputs and databases, made here by
code (no committed binaries), each run through the `tactician` CLI with the exact outcome asserted.

Every case gets a fresh folder, builds its files, runs commands and states what must happen:
a clear error naming the file (or node, knob, input) and the reason, a clean non-zero exit (no
signal, no sanitizer report, no uncaught exception), within a time limit, nothing read outside
the model's folder, and no process left behind.

Usage: hostile.py TACTICIAN [--filter SUBSTRING] [--keep DIR] [--list]
Cases live in cases_*.py beside this file; each module registers its cases with @case.
Run it under an ASan+UBSan build of TACTICIAN too (scripts/sanitize.sh): a sanitizer report
fails the case even where the exit code is right.
"""
import argparse
import importlib
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
CASES = []  # (name, function)

# What a crash, a sanitizer finding or an escaped exception prints: never acceptable.
BAD_OUTPUT = re.compile(r"AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer|runtime error:|"
                        r"terminate called|std::bad_alloc|Segmentation fault|core dumped|"
                        r"what\(\):|Assertion .* failed|uncaught exception")


def case(name):
    def register(fn):
        CASES.append((name, fn))
        return fn
    return register


class CaseFailed(Exception):
    pass


class Result:
    def __init__(self, argv, rc, out, err, seconds):
        self.argv, self.rc, self.out, self.err, self.seconds = argv, rc, out, err, seconds

    @property
    def text(self):
        return self.out + self.err

    def describe(self):
        cmd = " ".join(str(a) for a in self.argv)
        return f"`{cmd}` exited {self.rc} after {self.seconds:.1f} s\n--- output ---\n{self.text[-2000:]}"


class Ctx:
    """One case's folder, its commands and its assertions."""

    def __init__(self, tactician, folder):
        self.tactician = str(tactician)
        self.dir = pathlib.Path(folder)
        self.notes = []

    def path(self, *parts):
        p = self.dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def run(self, *args, timeout=60, env=None, stdin=None):
        """Runs tactician ARGS; a run past `timeout` is a hang and fails the case. The result has
        the command's own peak memory (reaped with wait4)."""
        argv = [self.tactician] + [str(a) for a in args]
        t0 = time.monotonic()
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.dir, env=e,
                             stdin=subprocess.DEVNULL if stdin is None else stdin, start_new_session=True)
        chunks = {p.stdout: [], p.stderr: []}
        readers = [threading.Thread(target=lambda f=f: chunks[f].append(f.read())) for f in chunks]
        for t in readers:
            t.start()
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                os.killpg(p.pid, signal.SIGKILL)
                os.wait4(p.pid, 0)
                p.returncode = -9  # Popen must not wait for it again
                for t in readers:
                    t.join()
                raise CaseFailed(f"`{' '.join(argv)}` hung: still running after {timeout} s\n"
                                 f"{b''.join(chunks[p.stdout] + chunks[p.stderr]).decode(errors='replace')[-1500:]}")
            time.sleep(0.01)
        p.returncode = os.waitstatus_to_exitcode(status)
        for t in readers:
            t.join()
        r = Result(argv, p.returncode, b"".join(chunks[p.stdout]).decode(errors="replace"),
                   b"".join(chunks[p.stderr]).decode(errors="replace"), time.monotonic() - t0)
        r.peak_mib = usage.ru_maxrss / 1024
        self.peak_mib = max(getattr(self, "peak_mib", 0), r.peak_mib)
        return r

    def clean(self, r):
        """No crash, no sanitizer report, no escaped exception."""
        if r.rc < 0 or r.rc >= 128:
            raise CaseFailed("killed by a signal or crashed: " + r.describe())
        m = BAD_OUTPUT.search(r.text)
        if m:
            raise CaseFailed(f"output shows '{m.group(0)}': " + r.describe())

    def expect_error(self, r, *patterns, rc=None):
        """A clean non-zero exit whose output matches every regex in `patterns`."""
        self.clean(r)
        if r.rc == 0:
            raise CaseFailed("succeeded, an error was expected: " + r.describe())
        if rc is not None and r.rc != rc:
            raise CaseFailed(f"exit code {r.rc}, expected {rc}: " + r.describe())
        for pat in patterns:
            if not re.search(pat, r.text):
                raise CaseFailed(f"output does not match /{pat}/: " + r.describe())

    def expect_ok(self, r, *patterns):
        self.clean(r)
        if r.rc != 0:
            raise CaseFailed("failed, success was expected: " + r.describe())
        for pat in patterns:
            if not re.search(pat, r.text):
                raise CaseFailed(f"output does not match /{pat}/: " + r.describe())

    def check(self, cond, message):
        if not cond:
            raise CaseFailed(message)


def leftover_processes(folder):
    """Processes whose command line names the case's folder (a tuner's candidates, say)."""
    found = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(folder) in cmd and state != "Z":
            found.append(f"{pid}: {cmd.strip()[:200]}")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tactician")
    ap.add_argument("--filter", default="")
    ap.add_argument("--keep", help="keep each case's folder under this directory")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    tactician = pathlib.Path(args.tactician).resolve()
    sys.path.insert(0, str(HERE))
    for mod in sorted(HERE.glob("cases_*.py")):
        importlib.import_module(mod.stem)
    selected = [(n, f) for n, f in CASES if args.filter in n]
    if args.list:
        print("\n".join(n for n, _ in selected))
        return 0
    if not selected:
        print(f"hostile: no case matches '{args.filter}'", file=sys.stderr)
        return 2
    failures = []
    t_all = time.monotonic()
    for name, fn in selected:
        root = pathlib.Path(args.keep) if args.keep else None
        if root:
            root.mkdir(parents=True, exist_ok=True)
        folder = tempfile.mkdtemp(prefix=f"hostile-{name}-", dir=root)
        t0 = time.monotonic()
        try:
            fn(Ctx(tactician, folder))
            # Give children a moment to go, then no process may still name the case's folder.
            deadline = time.monotonic() + 3
            left = leftover_processes(folder)
            while left and time.monotonic() < deadline:
                time.sleep(0.1)
                left = leftover_processes(folder)
            if left:
                for line in left:
                    try:
                        os.kill(int(line.split(":")[0]), signal.SIGKILL)
                    except OSError:
                        pass
                raise CaseFailed("processes left behind:\n  " + "\n  ".join(left))
            print(f"ok   {name} ({time.monotonic() - t0:.1f} s)", flush=True)
        except CaseFailed as e:
            failures.append(name)
            print(f"FAIL {name}: {e}", flush=True)
        except Exception:  # a bug in the case itself
            failures.append(name)
            print(f"FAIL {name}: the case raised\n{traceback.format_exc()}", flush=True)
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
    print(f"hostile: {len(selected) - len(failures)}/{len(selected)} cases ok in {time.monotonic() - t_all:.0f} s"
          + (": failed " + ", ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.modules["hostile"] = sys.modules[__name__]  # the cases register here, not in a second copy
    sys.exit(main())
