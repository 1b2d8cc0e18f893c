# deepsolve's persistent Python driver: one per turn, inside the sandbox.
#
# Run as `python3 -I -B -c <loader> <options as JSON> <this file>`, compiled under the name
# DRIVER below so tracebacks can leave its frames out. It speaks length-prefixed JSON frames
# (4-byte big-endian length, then UTF-8 JSON) on two pipes handed over as fds 3 (requests in)
# and 4 (replies out), so the user's stdout and stderr (fds 1 and 2) stay theirs and are read
# by the host while a cell runs. Requests: {"op": "run", "id", "code", "cpu_s"} and
# {"op": "interrupt", "id"}. Replies: one {"ready": ...} after start-up, then one result per
# run. The protocol is not a security boundary (the sandbox is): hostile code can write
# anything here, and the host treats every frame as untrusted.
import ast
import fcntl
import json
import linecache
import os
import queue
import resource
import signal
import struct
import sys
import threading
import traceback
import warnings

DRIVER = "<deepsolve driver>"
OPTIONS = json.loads(sys.argv[1])
WORKDIR = OPTIONS["workdir"]
MAX_VALUE = 20_000
MAX_ERROR = 16_000

# Keep the control pipes away from the low fds user code and libraries touch, and out of
# every child process (close-on-exec).
REQ = fcntl.fcntl(3, fcntl.F_DUPFD_CLOEXEC, 100)
REP = fcntl.fcntl(4, fcntl.F_DUPFD_CLOEXEC, 100)
os.close(3)
os.close(4)

# The process limit is set here, inside the sandbox's user namespace, so it counts only this
# sandbox's processes (set outside, the kernel would also count every process of the host
# user). It cannot be raised again: the hard limit goes down too.
_nproc = int(OPTIONS.get("nproc", 0))
if _nproc > 0:
    resource.setrlimit(resource.RLIMIT_NPROC, (_nproc, _nproc))

# Line-buffered output: what a cell printed before it was killed is already in the pipe.
for _stream in (sys.stdout, sys.stderr):
    try:
        _stream.reconfigure(line_buffering=True)
    except Exception:
        pass

sys.path.insert(0, WORKDIR)
os.chdir(WORKDIR)
warnings.filterwarnings("ignore", message=".*non-interactive.*")

_send_lock = threading.Lock()


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(obj):
    data = json.dumps(obj).encode("utf-8")
    with _send_lock:
        _write_all(REP, struct.pack(">I", len(data)) + data)


def _read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def clean(text):
    """Text that survives JSON on the way out (no lone surrogates)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def clip(text, limit):
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n… [{len(text) - limit} characters omitted] …\n" + text[-half:]


# --- interrupts ------------------------------------------------------------------------------
# The host asks for an interrupt when a cell runs past its time. The reader thread sends SIGINT
# to the main thread (a real signal, so a blocking call such as sleep returns), and the handler
# raises KeyboardInterrupt only while user code runs, so a late signal never breaks the driver.
_main = threading.main_thread().ident
_state = threading.Lock()
_running = None
_armed = False


def _on_sigint(signum, frame):
    if _armed:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, _on_sigint)

_requests = queue.Queue()


def _reader():
    while True:
        header = _read_exact(REQ, 4)
        if header is None:
            os._exit(0)  # the host is gone
        (length,) = struct.unpack(">I", header)
        body = _read_exact(REQ, length)
        if body is None:
            os._exit(0)
        try:
            msg = json.loads(body)
        except ValueError:
            continue
        if msg.get("op") == "interrupt":
            with _state:
                if _running is not None and _running == msg.get("id"):
                    signal.pthread_kill(_main, signal.SIGINT)
        else:
            _requests.put(msg)


# --- running a cell --------------------------------------------------------------------------
user_ns = {"__name__": "__main__", "__builtins__": __builtins__}


def _set_cpu_limit(seconds):
    """A CPU-time backstop per cell: the soft limit is what this interpreter used so far plus
    the cell's budget (the hard limit was fixed by the host)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = int(used.ru_utime + used.ru_stime)
        want = spent + int(seconds) + 2
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (want, hard))
    except (ValueError, OSError):
        pass


def _user_traceback(exc):
    """The traceback without the driver's frames: only the user's code and what it called."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if f.filename != DRIVER
    ]
    lines = []
    if frames and not isinstance(exc, SyntaxError):
        lines.append("Traceback (most recent call last):\n")
        lines.extend(traceback.format_list(frames))
    lines.extend(traceback.format_exception_only(type(exc), exc))
    return clip("".join(lines).rstrip(), MAX_ERROR)


def _repr(value):
    try:
        text = repr(value)
    except BaseException as e:  # a hostile __repr__ must not take the driver down
        text = f"<repr failed: {type(e).__name__}: {e}>"
    return clip(text, MAX_VALUE)


def _next_free(pattern):
    k = 1
    while os.path.exists(os.path.join(WORKDIR, pattern.format(k))):
        k += 1
    return pattern.format(k)


def _save_figures():
    """Every open matplotlib figure becomes figure_<k>.png in the workspace, then is closed.

    A figure whose current state was already drawn (the cell saved it with savefig and did
    not change it since: matplotlib marks a figure stale when it changes) is not saved a
    second time: one savefig is one file."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return [], None
    saved, problem = [], None
    try:
        for num in list(plt.get_fignums()):
            figure = plt.figure(num)
            if not getattr(figure, "stale", True):
                continue
            name = _next_free("figure_{}.png")
            figure.savefig(os.path.join(WORKDIR, name), format="png", dpi=100)
            saved.append(name)
    except BaseException as e:
        problem = f"saving a figure failed: {type(e).__name__}: {e}"
    try:
        plt.close("all")
    except BaseException:
        pass
    return saved, problem


def _flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass


def _assigned_name(stmt):
    """The one name a statement assigns (`x = ...`, `x += ...`, `x: int = ...`), else None."""
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[-1], ast.Name):
        return stmt.targets[-1].id
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    if (
        isinstance(stmt, ast.AnnAssign)
        and stmt.value is not None
        and isinstance(stmt.target, ast.Name)
    ):
        return stmt.target.id
    return None


def _name_value(stmt):
    """The value of the name `stmt` assigned, shown as a last expression's would be (IPython's
    `last_expr_or_assign`): a model that computes `total = 30 * 7` and prints nothing reads
    `210` instead of "(no output)" (small models often forget the print)."""
    name = ast.copy_location(ast.Name(id=_assigned_name(stmt), ctx=ast.Load()), stmt)
    return ast.fix_missing_locations(ast.Expression(name))


def _parse(code, name):
    """The cell's syntax tree, and the source it was read from. A one-line program whose line
    breaks are written as the two characters `\\n` (its JSON escaped twice: the 1.5B model did
    so in 3 of 14 programs, each a SyntaxError) is read with them as line breaks, but only when
    it does not parse as written and does once they are: nothing has run yet, and a program
    that parses is never changed."""
    try:
        return ast.parse(code, name, "exec"), code
    except SyntaxError as broken:
        if "\n" in code.strip() or "\\n" not in code:
            raise
        fixed = code.replace("\\r\\n", "\n").replace("\\n", "\n").replace("\\t", "\t")
        try:
            return ast.parse(fixed, name, "exec"), fixed
        except SyntaxError:
            raise broken from None


def run_cell(msg):
    global _running, _armed
    cell_id = msg.get("id")
    code = msg.get("code", "")
    name = f"<cell {cell_id}>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    _set_cpu_limit(msg.get("cpu_s", 60))
    status, value, error = "ok", None, None
    with _state:
        _running = cell_id
    try:
        tree, code = _parse(code, name)
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        elif tree.body and _assigned_name(tree.body[-1]) is not None:
            last = _name_value(tree.body[-1])
        body = compile(tree, name, "exec")
        tail = compile(last, name, "eval") if last is not None else None
        _armed = True
        try:
            exec(body, user_ns)
            if tail is not None:
                result = eval(tail, user_ns)
                if result is not None:
                    user_ns["_"] = result
                    value = _repr(result)
        finally:
            _armed = False
    except KeyboardInterrupt as e:
        _armed = False
        status, error = "interrupted", _user_traceback(e)
    except BaseException as e:  # SystemExit included: the interpreter stays up
        _armed = False
        status, error = "error", _user_traceback(e)
    finally:
        with _state:
            _running = None
    if status == "interrupted" and OPTIONS.get("isolated"):
        _kill_the_rest()
    figures, problem = _save_figures()
    if problem:
        error = f"{error}\n{problem}" if error else problem
    _flush()
    return {
        "id": cell_id,
        "status": status,
        "value": clean(value) if value is not None else None,
        "error": clean(error) if error is not None else None,
        "figures": figures,
    }


def _kill_the_rest():
    """After a timed-out cell, stop whatever it started (a fork bomb's copies included).
    Only in a sandbox: kill(-1) reaches every process of this pid namespace but us and its
    init; outside a sandbox it would reach every process of the user."""
    for _ in range(50):
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        while True:  # reap our own children so they leave the process table
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
        if not others:
            return


def _preload():
    loaded, failed = [], []
    for module in OPTIONS.get("preload", []):
        try:
            __import__(module)
            loaded.append(module)
        except BaseException as e:
            failed.append(f"{module}: {type(e).__name__}: {e}")
    return loaded, failed


def main():
    threading.Thread(target=_reader, name="deepsolve-requests", daemon=True).start()
    ready = {"ready": True, "python": sys.version.split()[0]}
    if OPTIONS.get("preload_in_background"):
        # Ready now; a cell that imports a module being preloaded waits on the import lock.
        threading.Thread(target=_preload, name="deepsolve-preload", daemon=True).start()
        ready["preloading"] = OPTIONS.get("preload", [])
    else:
        loaded, failed = _preload()
        ready.update(preloaded=loaded, preload_failed=failed)
    send(ready)
    while True:
        msg = _requests.get()
        if msg.get("op") != "run":
            continue
        try:
            reply = run_cell(msg)
        except BaseException as e:  # a late interrupt in driver code: report, keep serving
            reply = {"id": msg.get("id"), "status": "error",
                     "error": clean(f"driver: {type(e).__name__}: {e}"), "value": None,
                     "figures": []}
        send(reply)


main()
