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
import time
import weakref
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

__all__ = ["NodeProcess", "NodeProcessError", "format_parameter_value", "ros_arguments"]

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
    process goes on. :meth:`NodeProcess.dump_stacks` sends it before a SIGKILL, so the log says where it hung."""
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)


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
