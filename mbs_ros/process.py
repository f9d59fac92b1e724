"""Start and stop ROS 2 nodes as OS processes, without ``launch``.

One small class, :class:`NodeProcess`, used by the demo, the integration tests and (later) the scenario
runner. It builds the standard command line that rclpy parses::

    python -m mbs_ros.nodes.dynamics_node --ros-args -r __ns:=/ns -r __node:=name \
        --params-file f.yaml -p key:=value -r from:=to

runs it with the caller's environment (plus overrides), sends its stdout and stderr to one log file
(so a failed node's reason can be shown), and stops it cleanly: SIGINT, then SIGTERM, then SIGKILL,
each after a timeout. As a context manager it starts on entry and always stops on exit; processes
still running when the interpreter exits are stopped too.

Example::

    with NodeProcess("mbs_ros.nodes.dynamics_node", namespace="/robot1",
                     params_file="config/rigid_body.yaml", parameters={"mass": 2.0}) as p:
        ...
    print(p.returncode, p.log_tail())
"""

from __future__ import annotations

import atexit
import faulthandler
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

__all__ = ["THREAD_VARIABLES", "limit_threads", "NodeProcess", "NodeProcessError", "format_parameter_value", "ros_arguments", "TeardownGuard",
           "TEARDOWN_TIMEOUT_S"]

_RUNNING: "weakref.WeakSet[NodeProcess]" = weakref.WeakSet()


class NodeProcessError(RuntimeError):
    """A node process failed to start or exited when it should still be running."""


def format_parameter_value(value) -> str:
    """A Python value as the YAML text of a ``-p name:=value`` argument.

    Floats always carry a decimal point (so ``1.0`` stays a double), lists become ``[a, b]`` (all doubles
    if any element is one: ROS parameter arrays are homogeneous).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        s = repr(value)
        if "e" in s and "." not in s:
            s = s.replace("e", ".0e")
        return s
    if isinstance(value, str):
        return value
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return format_parameter_value(value.tolist())
    if isinstance(value, (list, tuple)):
        numbers = [v for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) == len(value) and any(isinstance(v, float) for v in value):
            value = [float(v) for v in value]  # ROS arrays are homogeneous: [0, 0.5] -> [0.0, 0.5]
        return "[" + ", ".join(format_parameter_value(v) for v in value) + "]"
    raise TypeError(f"cannot pass a {type(value).__name__} as a ROS parameter: {value!r}")


def ros_arguments(
    *,
    name: Optional[str] = None,
    namespace: Optional[str] = None,
    params_file: Optional[Union[str, os.PathLike]] = None,
    parameters: Optional[Mapping[str, object]] = None,
    remappings: Optional[Mapping[str, str]] = None,
    log_level: Optional[str] = None,
) -> list:
    """The ``--ros-args ...`` part of a node command line (empty if nothing is set)."""
    args = []
    if namespace:
        args += ["-r", "__ns:=" + ("/" + namespace.lstrip("/"))]
    if name:
        args += ["-r", "__node:=" + name]
    if params_file:
        args += ["--params-file", os.fspath(params_file)]
    for k, v in (parameters or {}).items():
        args += ["-p", f"{k}:={format_parameter_value(v)}"]
    for src, dst in (remappings or {}).items():
        args += ["-r", f"{src}:={dst}"]
    if log_level:
        args += ["--log-level", log_level]
    return ["--ros-args"] + args if args else []


def dump_stacks_on_sigusr1() -> None:
    """In a node's process: SIGUSR1 writes every thread's Python stack to stderr (:mod:`faulthandler`) and the
    process goes on. :meth:`NodeProcess.dump_stacks` sends it before a SIGKILL, so the log says where it hung. A
    fatal signal (SIGSEGV, SIGFPE, SIGABRT, SIGBUS, SIGILL) writes them too before the process dies, so a crash in
    native code leaves more than an exit code."""
    faulthandler.enable(all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)


#: Seconds the release of a stopped node's ROS entities (executor, node, context) may take before
#: :class:`TeardownGuard` ends the process: below the 10 s a parent waits after SIGINT (the bringup runner's
#: ``--stop-timeout``), far above the 0.1-2 s it takes on a busy 2-core machine.
TEARDOWN_TIMEOUT_S = 7.0
#: Seconds after the guard's timeout at which its native timers act when the guard's Python thread could not: the
#: warning line and the stacks at +0.5 s, the exit with the node's code at +1 s (still below the parent's 10 s).
NATIVE_GRACE_S = (0.5, 1.0)


class _NativeTimers:
    """Calls of libc functions at set times on threads that never touch Python: POSIX timers (``timer_create``
    with ``SIGEV_THREAD``, monotonic clock) whose expiry runs ``function(argument)`` on a thread of glibc's, so
    they act even while another thread holds the GIL for good (a middleware call that blocks without releasing
    it). Used for three calls only: ``puts`` and ``fflush(NULL)`` of a prepared line, and ``_exit(rc)``. Linux
    with glibc; elsewhere (or if libc has no ``timer_create``) :attr:`available` is False and nothing is armed."""

    SIGEV_THREAD = 2
    CLOCK_MONOTONIC = 1

    def __init__(self):
        import ctypes
        import ctypes.util

        self._ct = ctypes
        self._keep = []  # the buffers the armed calls point into, alive as long as the process
        self._timers = []
        self.available = False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            create = getattr(libc, "timer_create", None)
            if create is None:  # glibc before 2.34 keeps it in librt
                create = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1").timer_create
            self._create = create
            self._settime = getattr(libc, "timer_settime", None) or ctypes.CDLL("librt.so.1").timer_settime
            self._delete = getattr(libc, "timer_delete", None) or ctypes.CDLL("librt.so.1").timer_delete
            self.functions = {name: ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
                              for name in ("_exit", "puts", "fflush")}
        except (OSError, AttributeError):
            return

        class Sigevent(ctypes.Structure):  # struct sigevent of Linux (64 bytes): value, signo, notify, thread
            _fields_ = [("sigev_value", ctypes.c_void_p), ("sigev_signo", ctypes.c_int),
                        ("sigev_notify", ctypes.c_int), ("sigev_notify_function", ctypes.c_void_p),
                        ("sigev_notify_attributes", ctypes.c_void_p), ("_pad", ctypes.c_byte * 32)]

        class Timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

        class Itimerspec(ctypes.Structure):
            _fields_ = [("it_interval", Timespec), ("it_value", Timespec)]

        self._Sigevent, self._Timespec, self._Itimerspec = Sigevent, Timespec, Itimerspec
        self.available = ctypes.sizeof(Sigevent) == 64 and sys.platform.startswith("linux")

    def call_later(self, delay: float, function: str, argument: int = 0) -> bool:
        """Arm ``function(argument)`` (a name of :attr:`functions`; ``argument`` an int or an address) ``delay``
        seconds from now; False if it could not be armed."""
        ct = self._ct
        if not self.available:
            return False
        event = self._Sigevent(sigev_value=argument, sigev_notify=self.SIGEV_THREAD,
                               sigev_notify_function=self.functions[function])
        timer = ct.c_void_p()
        if self._create(self.CLOCK_MONOTONIC, ct.byref(event), ct.byref(timer)) != 0:
            return False
        sec = int(delay)
        spec = self._Itimerspec(it_value=self._Timespec(sec, max(1, int((delay - sec) * 1e9))))
        if self._settime(timer, 0, ct.byref(spec), None) != 0:
            self._delete(timer)
            return False
        self._timers.append(timer)
        return True

    def text(self, line: str) -> int:
        """The address of ``line`` as a C string kept alive for the process's life (an argument of ``puts``)."""
        buf = self._ct.create_string_buffer(line.encode("utf-8", "replace"))
        self._keep.append(buf)
        return self._ct.addressof(buf)

    @property
    def armed(self) -> int:
        """How many timers are armed (and not cancelled)."""
        return len(self._timers)

    def cancel(self, count: Optional[int] = None) -> None:
        """Disarm the first ``count`` timers armed (all if None)."""
        count = len(self._timers) if count is None else count
        for timer in self._timers[:count]:
            self._delete(timer)
        del self._timers[:count]


class TeardownGuard:
    """Ends the process with ``rc`` if the teardown after the spin loop (``executor.shutdown()``,
    ``destroy_node()``, ``rclpy.try_shutdown()``: middleware code, with nothing of the node's work left) has not
    finished within ``timeout`` seconds (default :data:`TEARDOWN_TIMEOUT_S`): one warning line (rcutils' format,
    so the bringup runner counts it) and every thread's Python stack on stderr, then ``os._exit(rc)``. The node
    has stopped by then, so its exit code stands; a middleware hang shows in the log (and in the bringup runner's
    warning summary) instead of as a node that needed SIGKILL.

    However the teardown hangs: the guard's Python thread acts when the stuck call leaves the GIL free (a wait in
    the middleware); when it holds the GIL (the thread cannot run), :class:`_NativeTimers` act instead, on threads
    of their own outside Python, :data:`NATIVE_GRACE_S` later: the same warning line, then :mod:`faulthandler`'s
    stacks (its own C thread), then ``_exit(rc)``. The exit timer stays armed after :meth:`done`, so a hang in
    the interpreter's finalization after :func:`run_node` returns also ends with ``rc``; a process that exits
    normally never sees it. Where native timers are not available (not Linux/glibc), faulthandler exits with 1
    instead, as before."""

    def __init__(self, label: str, rc: int, timeout: Optional[float] = None):
        self.label, self.rc = label, rc
        self.timeout = TEARDOWN_TIMEOUT_S if timeout is None else float(timeout)
        self._finished = threading.Event()
        warn_at, exit_at = (self.timeout + g for g in NATIVE_GRACE_S)
        self._native = _NativeTimers()
        armed = self._native.available and all((
            self._native.call_later(warn_at, "puts", self._native.text(self._warning(time.time() + warn_at,
                                                                                       "holding the GIL"))),
            self._native.call_later(warn_at + 0.01, "fflush", 0),
            self._native.call_later(exit_at, "_exit", int(rc) & 0xFF)))
        if armed:
            faulthandler.dump_traceback_later(warn_at + 0.1, exit=False)
        else:
            self._native.cancel()
            faulthandler.dump_traceback_later(self.timeout + 3.0, exit=True)
        self._thread = threading.Thread(target=self._watch, daemon=True, name="teardown-guard")
        self._thread.start()

    def _warning(self, stamp: float, how: str) -> str:
        return (f"[WARN] [{stamp:.9f}] [{self.label}]: stopping: the release of the "
                f"ROS entities did not finish within {self.timeout:g} s (middleware teardown hung, {how}); exiting "
                f"with code {self.rc} anyway. Stacks:")

    def _watch(self) -> None:
        if self._finished.wait(self.timeout):
            return
        print(self._warning(time.time(), "the GIL free"), file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(self.rc)

    def done(self) -> None:
        """The teardown finished: the warning and the stacks are disarmed; the exit with ``rc`` (or, without native
        timers, faulthandler's exit with 1) stays armed for the interpreter's finalization."""
        self._finished.set()
        if self._native.armed == 3:
            faulthandler.cancel_dump_traceback_later()
            self._native.cancel(2)


class NodeProcess:
    """A ROS 2 node running in its own process.

    ``target`` is a Python module run with ``python -m`` (e.g. ``"mbs_ros.nodes.dynamics_node"``) or a
    full command as a list (e.g. ``["ros2", "run", "mbs_ros", "dynamics_node"]``); the ROS arguments
    built from ``name``, ``namespace``, ``params_file``, ``parameters``, ``remappings`` are appended.
    ``env`` entries are added to (``None`` values removed from) the inherited environment.
    """

    def __init__(
        self,
        target: Union[str, Sequence[str]],
        *,
        name: Optional[str] = None,
        namespace: Optional[str] = None,
        params_file: Optional[Union[str, os.PathLike]] = None,
        parameters: Optional[Mapping[str, object]] = None,
        remappings: Optional[Mapping[str, str]] = None,
        log_level: Optional[str] = None,
        args: Sequence[str] = (),
        env: Optional[Mapping[str, Optional[str]]] = None,
        log_file: Optional[Union[str, os.PathLike]] = None,
        label: Optional[str] = None,
        python: str = sys.executable,
    ):
        base = [python, "-m", target] if isinstance(target, str) else list(target)
        self.command = base + list(args) + ros_arguments(
            name=name,
            namespace=namespace,
            params_file=params_file,
            parameters=parameters,
            remappings=remappings,
            log_level=log_level,
        )
        if label is None:
            short = name or (target.rsplit(".", 1)[-1] if isinstance(target, str) else Path(base[0]).name)
            ns = (namespace or "").strip("/")
            label = f"{ns}/{short}" if ns else short
        self.label = label
        self._env_overrides = dict(env or {})
        self._log_file = Path(log_file) if log_file else None
        self._proc: Optional[subprocess.Popen] = None
        self._log_handle = None
        self.stop_signal: Optional[str] = None  # the signal that ended the process in stop()

    # ------------------------------------------------------------------------------- life cycle

    def start(self) -> "NodeProcess":
        if self._proc is not None:
            raise NodeProcessError(f"{self.label}: already started")
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("RCUTILS_COLORIZED_OUTPUT", "0")
        for k, v in self._env_overrides.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        if self._log_file is None:
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.label).strip("_") or "node"
            fd, path = tempfile.mkstemp(prefix=f"{safe}-", suffix=".log")
            os.close(fd)
            self._log_file = Path(path)
        self._log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log_handle = open(self._log_file, "wb")
        try:
            self._proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=self._log_handle,
                stderr=subprocess.STDOUT,
                env=env,
            )
        except OSError as e:
            self._log_handle.close()
            raise NodeProcessError(f"{self.label}: cannot start {self.command[0]!r}: {e}") from e
        _RUNNING.add(self)
        return self

    def stop(self, sigint_timeout: float = 30.0, sigterm_timeout: float = 10.0) -> Optional[int]:
        """Stop the process: SIGINT, then SIGTERM, then SIGKILL (after SIGUSR1 and a second for its stacks:
        :meth:`dump_stacks`). Returns its exit code.

        A node that handles shutdown properly exits 0 on the first signal: in 0.4 s here, but more than 8 s on a
        2-core machine whose cores are kept busy, hence the generous deadlines (a deadline, not a wait).
        """
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            for sig, timeout in ((signal.SIGINT, sigint_timeout), (signal.SIGTERM, sigterm_timeout),
                                 (signal.SIGKILL, None)):
                self.stop_signal = sig.name
                if sig == signal.SIGKILL:
                    self.dump_stacks()
                try:
                    self._proc.send_signal(sig)
                except ProcessLookupError:
                    break
                try:
                    self._proc.wait(timeout=timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._proc.wait()
        self._close_log()
        _RUNNING.discard(self)
        return self._proc.returncode

    def dump_stacks(self, wait: float = 1.0) -> None:
        """Ask a stuck node for its threads' Python stacks (SIGUSR1: :mod:`faulthandler`, registered by
        :func:`mbs_ros.nodes.runtime.run_node`), written to its log; then wait ``wait`` seconds for them."""
        if hasattr(signal, "SIGUSR1") and self.running:
            self.send_signal(signal.SIGUSR1)
            time.sleep(wait)

    def send_signal(self, sig: int) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(sig)

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Wait for the process to exit; its exit code, or ``None`` on timeout."""
        if self._proc is None:
            return None
        try:
            rc = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._close_log()
        _RUNNING.discard(self)
        return rc

    def __enter__(self) -> "NodeProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --------------------------------------------------------------------------------- queries

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> Optional[int]:
        return self._proc.poll() if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Optional[Path]:
        return self._log_file

    def log_text(self) -> str:
        """Everything the process wrote to stdout and stderr so far."""
        if self._log_file is None or not self._log_file.exists():
            return ""
        return self._log_file.read_bytes().decode("utf-8", errors="replace")

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_for_log(self, pattern: str, timeout: float = 10.0, regex: bool = False) -> bool:
        """Wait until ``pattern`` (a substring, or a regular expression) appears in the log."""
        match = re.compile(pattern).search if regex else (lambda text: pattern in text)
        deadline = time.monotonic() + timeout
        while True:
            exited = not self.running
            if match(self.log_text()):
                return True
            if exited or time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def check_running(self) -> None:
        """Raise :class:`NodeProcessError` with the end of the log if the process has exited."""
        if self._proc is None:
            raise NodeProcessError(f"{self.label}: not started")
        rc = self._proc.poll()
        if rc is not None:
            raise NodeProcessError(
                f"{self.label} exited with code {rc}; last lines of {self._log_file}:\n"
                + self.log_tail())

    def __repr__(self) -> str:
        state = "not started" if self._proc is None else (
            f"running pid {self.pid}" if self.running else f"exited {self.returncode}")
        return f"<NodeProcess {self.label} ({state})>"

    def _close_log(self) -> None:
        if self._log_handle is not None and not self._log_handle.closed:
            self._log_handle.close()


@atexit.register
def _stop_leftovers() -> None:
    for p in list(_RUNNING):
        try:
            p.stop(sigint_timeout=2.0, sigterm_timeout=1.0)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


#: Environment variables that size the thread pools of numpy's BLAS (OpenBLAS, MKL, BLIS, Accelerate) and OpenMP.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS")


def limit_threads(n: int = 1) -> bool:
    """At most ``n`` threads in numpy's BLAS and OpenMP pools, unless the environment chooses otherwise: each
    variable of :data:`THREAD_VARIABLES` it does not set becomes ``n`` (for the libraries loaded from now on and
    for child processes), and the pools already loaded are resized to ``OPENBLAS_NUM_THREADS`` /
    ``OMP_NUM_THREADS`` with threadpoolctl when it is installed (True then). Without threadpoolctl a pool loaded
    before this call keeps its size: the dynamics node's module therefore sets the same variables before it imports
    numpy when it is the program being run."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, str(n))
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return False

    def size(var):
        try:
            return max(1, int(os.environ[var]))
        except ValueError:
            return n

    threadpool_limits(limits={"blas": size("OPENBLAS_NUM_THREADS"), "openmp": size("OMP_NUM_THREADS")})
    return True
