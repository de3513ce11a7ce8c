"""Lifecycle: use after close, double close, garbage collection in any order, exit, fork, Ctrl-C.

Interpreter exit, fork and KeyboardInterrupt run in subprocesses; the simulator's exit
report (``CANN_SIM_REPORT``) says how often aclInit and aclFinalize ran and what was
still live.  Decisions pinned here:

* every method of a closed Session or DeviceArray raises ``ClosedError`` (a ValueError);
  ``close()`` itself may be called any number of times;
* in a forked child every use raises ``ProcessForkedError`` (naming the 'spawn' start
  method), while ``close()`` is quiet: the handles belong to the parent, and nothing is
  released in the child;
* a KeyboardInterrupt during a long device call leaves nothing leaked and the session
  usable.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import upsample3d_grad as ug
from acl_bindings import ClosedError, sim
from upsample3d_grad import Session

REPO = Path(__file__).resolve().parents[2]
SAMPLE = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
EXPECTED = [36.0, 100.0, 164.0, 228.0]
ARGS = ((2, 2, 2), (2, 2, 1, 1, 1))


def _run(code: str, tmp_path: Path, *, env: dict[str, str] | None = None, args: tuple[str, ...] = (),
         timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run *code* as a script on the simulator; return the process and the simulator's exit report."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    report = tmp_path / "report.json"
    full = {k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM_")}
    full.update({"ACL_BINDINGS_BACKEND": "sim", "CANN_SIM_REPORT": str(report),
                 "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
    full.update(env or {})
    proc = subprocess.run([sys.executable, str(script), *args], cwd=REPO, env=full, capture_output=True, text=True,
                          timeout=timeout)
    return proc, json.loads(report.read_text()) if report.exists() else {}


# --------------------------------------------------------------------------- use after close

def test_use_after_close_and_double_close(no_leaks: None) -> None:
    s = Session(0)
    go = s.upload(SAMPLE)
    out = s.backward(go, *ARGS)
    kept = s.empty((2, 2, 1, 1, 1))
    s.close()
    s.close()
    for call in (lambda: s.backward(SAMPLE, *ARGS), lambda: s.upload(SAMPLE), lambda: s.empty((1, 1, 1, 1, 1)),
                 s.synchronize, lambda: s.timed_backward(go, *ARGS, out=kept), lambda: go.download(),
                 lambda: out.download(), lambda: kept.download(np.empty((2, 2, 1, 1, 1), np.float32))):
        with pytest.raises(ClosedError):
            call()
    for arr in (go, out, kept):  # the session closed them; closing again is fine
        assert arr.closed
        arr.close()
    with Session(0) as s2:
        with s2.upload(SAMPLE) as arr:
            pass
        arr.close()
        with pytest.raises(ClosedError):
            arr.download()
        with pytest.raises(ClosedError):
            s2.backward(arr, *ARGS)
        assert s2.backward(SAMPLE, *ARGS).ravel().tolist() == EXPECTED


def test_the_default_session_comes_back_after_close() -> None:
    assert ug.upsample_nearest_exact3d_backward(SAMPLE, *ARGS).ravel().tolist() == EXPECTED
    first = ug.default_session()
    ug.close_default_session()
    ug.close_default_session()
    assert first.closed
    assert ug.upsample_nearest_exact3d_backward(SAMPLE, *ARGS).ravel().tolist() == EXPECTED
    assert ug.default_session() is not first
    ug.close_default_session()


# --------------------------------------------------------------------------- garbage collection

NAMES = ("session", "grad_output", "result", "plan")


@pytest.mark.parametrize("deferred", [False, True], ids=["eager", "deferred"])
def test_garbage_collection_in_any_order(deferred: bool, no_leaks: None) -> None:
    """Sessions, device arrays and plans dropped in every order; pending kernels included."""
    previous = sim.set_defer(deferred)
    try:
        for order in itertools.permutations(NAMES):
            s = Session(0)
            objs: dict[str, Any] = {"session": s, "grad_output": s.upload(SAMPLE)}
            objs["result"] = s.backward(objs["grad_output"], *ARGS)  # queued, in deferred mode
            objs["plan"] = next(iter(s.plans.calls.values()))
            del s
            for name in order:
                del objs[name]
                if "result" in objs:  # whatever is left still works: the result keeps its session alive
                    assert objs["result"].download().ravel().tolist() == EXPECTED
                gc.collect()
            assert not objs
    finally:
        sim.set_defer(previous)


def test_dropping_a_session_with_queued_work_frees_everything(no_leaks: None) -> None:
    previous = sim.set_defer(True)
    try:
        s = Session(0)
        go = s.upload(SAMPLE)
        for _ in range(3):
            s.backward(go, *ARGS)  # results dropped at once, before their kernels ran
        del s, go
        gc.collect()
    finally:
        sim.set_defer(previous)


# --------------------------------------------------------------------------- interpreter exit

def test_exit_with_live_objects_and_queued_work(tmp_path: Path) -> None:
    code = """
        import threading
        import numpy as np
        import acl_bindings as ab
        import upsample3d_grad as ug
        from acl_bindings import sim
        S = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
        s = ug.Session(0)
        print(s.backward(S, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist())
        print(ug.upsample_nearest_exact3d_backward(S, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist())
        sim.set_defer(True)
        go = s.upload(S)
        pending = s.backward(go, (2, 2, 2), (2, 2, 1, 1, 1))  # queued, never downloaded
        event = ab.Event(s.device)
        event.record(s.stream)
        host = ab.HostBuffer(s.device, 256)
        made = {}
        def other_thread():
            made["s"] = s1 = ug.Session(1, plans=False)
            made["out"] = s1.backward(s1.upload(S), (2, 2, 2), (2, 2, 1, 1, 1))
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        cycle = [s, go]
        cycle.append(cycle)  # some of it in a reference cycle
        print("exiting")
    """
    proc, report = _run(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.split("\n")[:3] == [str(EXPECTED), str(EXPECTED), "exiting"]
    assert report["aclInit"] == 1 and report["aclFinalizeReference"] == 1 and report["aclFinalize"] == 0, report
    assert report["initialized_at_exit"] is False
    # the runtime's resources were still alive at exit and went with the last reference
    released = report["released_by_finalize"]
    assert released["device_buffer"] > 0 and released["stream"] >= 2 and released["event"] == 1, released
    assert not any(report["live"][k] for k in ("device_buffer", "host_buffer", "stream", "event", "device_ref"))


def test_exit_while_a_daemon_thread_is_inside_a_long_call(tmp_path: Path) -> None:
    """No crash and no hang; at most that thread's own error (ACL was finalised under it) is printed,
    possibly cut short by the exit."""
    code = """
        import threading, time
        import numpy as np
        import upsample3d_grad as ug
        from acl_bindings import sim
        S = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
        s = ug.Session(0)
        sim.set_delay(300)
        threading.Thread(target=lambda: s.backward(S, (2, 2, 2), (2, 2, 1, 1, 1)), daemon=True).start()
        time.sleep(0.05)
        print("exiting")
    """
    proc, report = _run(code, tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "exiting\n"
    assert proc.stderr == "" or proc.stderr.startswith("Exception in thread"), proc.stderr
    assert "Fatal Python error" not in proc.stderr
    assert report["aclFinalizeReference"] == 1 and report["initialized_at_exit"] is False


def test_daemon_threads_calling_at_exit_fail_with_one_clear_error(tmp_path: Path) -> None:
    """Threads still calling every public path when the interpreter exits: ACL is released under them, and
    every call that fails then raises the one ClosedError that says so (never an error about aclInit), and
    nothing crashes.  Each thread writes the error it got to a file (what a daemon thread prints to stderr may
    be cut short by the exit)."""
    code = """
        import os, sys, threading, time
        import numpy as np
        import upsample3d_grad as ug
        S = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
        def reported(body):
            def run():
                try:
                    body()
                except BaseException as exc:
                    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                    os.write(fd, f"{type(exc).__name__}: {exc}\\n".encode())
                    os.close(fd)
                    raise
            return run
        def session_calls():
            s = ug.Session(0)
            go, gi = s.upload(S), s.empty((2, 2, 1, 1, 1))
            call = s.prepare(go, (2, 2, 2), (2, 2, 1, 1, 1), out=gi)
            while True:
                s.backward(S, (2, 2, 2), (2, 2, 1, 1, 1))
                s.backward(go, (2, 2, 2), (2, 2, 1, 1, 1), out=gi)
                call()
        def module_calls():
            while True:
                ug.upsample_nearest_exact3d_backward(S, (2, 2, 2), (2, 2, 1, 1, 1))
        for target in (session_calls, session_calls, module_calls, module_calls):
            threading.Thread(target=reported(target), daemon=True).start()
        time.sleep(0.3)
        print("exiting")
    """
    seen: list[str] = []
    for k in range(5):
        errors = tmp_path / f"errors{k}.txt"
        proc, report = _run(code, tmp_path, args=(str(errors),), timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "exiting\n"
        assert "Fatal Python error" not in proc.stderr and "Segmentation" not in proc.stderr
        assert "aclInit was not called" not in proc.stderr and "ACL_ERROR_UNINITIALIZE" not in proc.stderr, \
            proc.stderr
        assert report["aclFinalizeReference"] == 1
        seen += errors.read_text().splitlines() if errors.exists() else []
    assert seen, "no thread was caught calling at exit: the test did not exercise the window"
    assert all(line.startswith("ClosedError: ") and "released at interpreter exit" in line for line in seen), seen


def test_another_component_initialised_first(tmp_path: Path) -> None:
    """aclInit's 100002 is success and one reference: at exit this one releases it (aclFinalizeReference) and
    the other component's reference keeps the runtime up; plain aclFinalize is never called."""
    code = """
        import numpy as np
        from acl_bindings import lib, sim
        import upsample3d_grad as ug
        lib.aclInit(None)  # "another component" (torch_npu, say)
        with ug.Session(0) as s:
            print(s.backward(np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2), (2, 2, 2),
                             (2, 2, 1, 1, 1)).ravel().tolist())
        print(sim.live_handles())
    """
    proc, report = _run(code, tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines()[0] == str(EXPECTED)
    assert report["aclInit"] == 2 and report["aclFinalize"] == 0 and report["aclFinalizeReference"] == 1
    assert report["initialized_at_exit"] is True and report["init_references_at_exit"] == 1
    assert not any(report["live"].values()), report["live"]


def test_after_finalize_new_work_fails_clearly_and_old_objects_close_quietly(tmp_path: Path) -> None:
    code = """
        import numpy as np
        import acl_bindings as ab
        import upsample3d_grad as ug
        s = ug.Session(0)
        arr = s.upload(np.ones((1, 1, 2, 2, 2), np.float32))
        ab.finalize()
        ab.finalize()
        try:
            ug.Session(0)
        except ab.AclError as exc:
            print(type(exc).__name__, exc.code, exc.func)
        arr.close()
        s.close()
        print("closed", s.closed, arr.closed)
    """
    proc, report = _run(code, tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines() == ["AclStateError 100001 aclInit", "closed True True"]
    assert report["aclFinalizeReference"] == 1 and report["aclFinalize"] == 0


def test_close_after_finalize_is_quiet_with_prepared_calls(tmp_path: Path) -> None:
    code = """
        import numpy as np
        import acl_bindings as ab
        import upsample3d_grad as ug
        s = ug.Session(0)
        go, gi = s.upload(np.ones((1, 1, 2, 2, 2), np.float32)), s.empty((1, 1, 1, 1, 1))
        plan = s.prepare(go, (2, 2, 2), (1, 1, 1, 1, 1), out=gi)
        one_shot = s.prepare(go, (2, 2, 2), (1, 1, 1, 1, 1), out=gi, plan=False)
        print(plan().download().item(), one_shot().download().item())
        ab.finalize()
        s.close()
        plan.close()
        one_shot.close()
        print("closed", s.closed, plan.closed, one_shot.closed)
    """
    proc, report = _run(code, tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines() == ["8.0 8.0", "closed True True True"]
    assert report["aclFinalizeReference"] == 1 and report["initialized_at_exit"] is False


# --------------------------------------------------------------------------- fork

def test_forked_child_gets_a_clear_error_and_exits_quietly(tmp_path: Path) -> None:
    code = """
        import json, os, sys, warnings
        import numpy as np
        import upsample3d_grad as ug
        from acl_bindings import ProcessForkedError
        # CPython 3.12+ warns when a process with threads forks (the simulator's stream workers are threads): the
        # fork is this test's subject, and the package's own output must still be empty
        warnings.filterwarnings("ignore", message=r"This process \\(pid=\\d+\\) is multi-threaded",
                                category=DeprecationWarning)
        S = np.arange(1, 33, dtype=np.float32).reshape(2, 2, 2, 2, 2)
        s = ug.Session(0)
        ug.upsample_nearest_exact3d_backward(S, (2, 2, 2), (2, 2, 1, 1, 1))
        arr = s.upload(S)
        gi = s.empty((2, 2, 1, 1, 1))
        s.backward(arr, (2, 2, 2), (2, 2, 1, 1, 1), out=gi)  # remembered: the next such call is one
        plan = s.prepare(arr, (2, 2, 2), (2, 2, 1, 1, 1), out=gi)
        oneshot = s.prepare(arr, (2, 2, 2), (2, 2, 1, 1, 1), out=gi, plan=False)
        plan(), oneshot()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.environ["CANN_SIM_REPORT"] = sys.argv[1]  # the child's own exit report
            seen = {}
            # (the prepared calls first: before anything in the child closed a buffer, which they would notice)
            for name, fn in [("prepared plan", plan), ("prepared one-shot", oneshot),
                             ("backward", lambda: s.backward(S, (2, 2, 2), (2, 2, 1, 1, 1))),
                             ("module function", lambda: ug.upsample_nearest_exact3d_backward(
                                 S, (2, 2, 2), (2, 2, 1, 1, 1))),
                             ("new session", lambda: ug.Session(0)), ("download", arr.download),
                             ("upload", lambda: s.upload(S)), ("synchronize", s.synchronize),
                             ("remembered backward", lambda: s.backward(arr, (2, 2, 2), (2, 2, 1, 1, 1), out=gi)),
                             ("close array", arr.close), ("close", s.close), ("close again", s.close)]:
                try:
                    fn()
                    seen[name] = "ok"
                except ProcessForkedError as exc:
                    seen[name] = "spawn" in str(exc) and "fork" in str(exc)
                except BaseException as exc:
                    seen[name] = repr(exc)
            os.write(w, json.dumps(seen).encode())
            os.close(w)
            sys.exit(0)  # a normal exit: atexit handlers run in the child too
        os.close(w)
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"child": json.loads(data), "status": os.waitstatus_to_exitcode(status),
                          "parent": s.backward(S, (2, 2, 2), (2, 2, 1, 1, 1)).ravel().tolist(),
                          "array": arr.download().ravel().tolist()[:3]}))
        s.close()
    """
    child_report = tmp_path / "child.json"
    proc, report = _run(code, tmp_path, args=(str(child_report),))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == 0
    assert out["child"] == {"backward": True, "module function": True, "new session": True, "download": True,
                            "upload": True, "synchronize": True, "remembered backward": True, "prepared plan": True,
                            "prepared one-shot": True, "close array": "ok", "close": "ok", "close again": "ok"}
    assert out["parent"] == EXPECTED and out["array"] == [1.0, 2.0, 3.0]  # the parent is unaffected
    child = json.loads(child_report.read_text())
    assert child["aclFinalize"] == child["aclFinalizeReference"] == 0  # the child neither finalised ...
    assert child["live"]["device_buffer"] > 0  # ... nor released the parent's handles
    assert report["aclFinalizeReference"] == 1 and report["initialized_at_exit"] is False


FORK_AFTER_IMPORT = """
    import json, multiprocessing as mp, os, sys
    import numpy as np
    import upsample3d_grad as ug

    def work(k):
        g = np.full((1, 1, 2, 2, 2), float(k), np.float32)
        with ug.Session(0) as s:
            return [s.backward(g, (2, 2, 2), (1, 1, 1, 1, 1)).item(),
                    ug.upsample_nearest_exact3d_backward(g, (2, 2, 2), (1, 1, 1, 1, 1)).item()]

    if __name__ == "__main__":
        if sys.argv[1] == "os.fork":
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                try:
                    os.write(w, json.dumps(work(1)).encode())
                finally:
                    os.close(w)
                sys.exit(0)  # a normal exit: atexit handlers run in the child too
            os.close(w)
            data = b""
            while chunk := os.read(r, 1 << 16):
                data += chunk
            _, status = os.waitpid(pid, 0)
            got = [json.loads(data or b"null"), os.waitstatus_to_exitcode(status)]
        else:
            with mp.get_context("fork").Pool(2) as pool:
                got = pool.map(work, [1, 2, 3])
        print(json.dumps({"child": got, "parent": work(4)}))
"""


@pytest.mark.parametrize("how", ["os.fork", "multiprocessing"])
def test_fork_after_a_bare_import_works(how: str, tmp_path: Path) -> None:
    """Nothing was initialised before the fork, so the child may use the package; so may the parent."""
    proc, report = _run(FORK_AFTER_IMPORT, tmp_path, args=(how,))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)
    if how == "os.fork":
        assert out["child"] == [[8.0, 8.0], 0]
    else:
        assert out["child"] == [[8.0, 8.0], [16.0, 16.0], [24.0, 24.0]]
    assert out["parent"] == [32.0, 32.0]
    assert report["initialized_at_exit"] is False


def test_spawned_workers_are_the_way(tmp_path: Path) -> None:
    """What the fork error recommends works: 'spawn' workers with their own sessions."""
    code = """
        import multiprocessing as mp
        import numpy as np

        def work(k):
            import upsample3d_grad as ug
            g = np.full((1, 1, 2, 2, 2), float(k), np.float32)
            return ug.upsample_nearest_exact3d_backward(g, (2, 2, 2), (1, 1, 1, 1, 1)).item()

        if __name__ == "__main__":
            import upsample3d_grad as ug
            ug.upsample_nearest_exact3d_backward(np.ones((1, 1, 2, 2, 2), np.float32), (2, 2, 2), (1, 1, 1, 1, 1))
            with mp.get_context("spawn").Pool(2) as pool:
                print(pool.map(work, [1, 2, 3]))
    """
    proc, report = _run(code, tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.strip() == "[8.0, 16.0, 24.0]"
    assert report["aclFinalizeReference"] == 1


# --------------------------------------------------------------------------- Ctrl-C

def test_keyboard_interrupt_during_a_long_call_leaks_nothing(tmp_path: Path) -> None:
    code = """
        import _thread, gc, json, os, signal, threading, time
        import numpy as np
        from acl_bindings import sim
        from upsample3d_grad import Session, reference

        s = Session(0)
        g = np.random.default_rng(0).standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
        sizes = ((4, 5, 6), (2, 3, 2, 3, 4))
        want = reference.upsample_nearest_exact3d_backward(g, *sizes)
        go, out = s.upload(g), s.empty(sizes[1])

        def numpy_path():
            return s.backward(g, *sizes)
        def device_path():
            s.backward(go, *sizes, out=out)
            return out.download()
        def one_shot_path():
            s.use_plans = False
            try:
                return s.backward(g, *sizes)
            finally:
                s.use_plans = True
        def timed_path():
            s.timed_backward(go, *sizes, out=out)
            return out.download()
        def interrupt(how):
            if how == "interrupt_main":
                _thread.interrupt_main()
            else:
                os.kill(os.getpid(), signal.SIGINT)

        paths = (numpy_path, device_path, one_shot_path, timed_path)
        for path in paths:
            path()
        def live():  # the session's cached device memory is not a leak (freed by close(), checked below)
            now = sim.live_handles()
            now["device_buffer"] -= s.allocator.blocks
            return now
        steady = live()
        runs = interrupted = wrong = 0
        leaks = []
        for deferred in (False, True):
            sim.set_defer(deferred)
            for path in paths:
                for how in ("interrupt_main", "SIGINT"):
                    for wait in (0.003, 0.015):
                        sim.set_delay(40)  # each kernel: 40 ms of simulated device time
                        timer = threading.Timer(wait, interrupt, (how,))
                        runs += 1
                        try:
                            try:
                                timer.start()
                                path()
                            finally:
                                timer.join()
                                time.sleep(0.002)
                        except KeyboardInterrupt:
                            interrupted += 1
                        sim.set_delay(0)
                        if not np.allclose(path(), want, rtol=1e-5, atol=1e-5):  # still works
                            wrong += 1
                        now = live()
                        if now != steady:
                            gc.collect()
                            now = live()
                        if now != steady:
                            leaks.append([deferred, path.__name__, how, wait, now])
        go.close()
        out.close()
        s.close()
        gc.collect()
        print(json.dumps({"runs": runs, "interrupted": interrupted, "wrong": wrong, "leaks": leaks,
                          "live": sim.live_handles()}))
    """
    proc, report = _run(code, tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)
    assert out["interrupted"] == out["runs"] == 32, out
    assert out["wrong"] == 0 and out["leaks"] == [], out
    assert not any(out["live"].values()), out["live"]
    assert report["aclFinalizeReference"] == 1
