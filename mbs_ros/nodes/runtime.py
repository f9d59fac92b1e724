"""Start-up and shutdown shared by the node executables (dynamics, controller, reference).

:func:`run_node` is a node's whole ``main``: ``rclpy.init``, construct, ``configure()``, spin, clean shutdown.
Exit codes: 2 when ``configure()`` raises one of ``errors`` (the reason is logged as fatal) or when one of them
escapes a callback while spinning (the node logs it there); 0 on SIGINT/SIGTERM, including a signal during
set-up (which can show up as an RCLError) and an RCLError from a callback that was publishing while the context
shut down.

Command line: ``-h``/``--help`` before any ``--ros-args`` prints the usage, the node's summary and its parameters and
exits 0, starting nothing. Before ``rclpy.init``, :func:`run_node` reads every ``--params-file`` of the ``--ros-args`` with
:func:`mbs_ros.cores.paramsfile.read_params_file`; a missing, unreadable, non-UTF-8, malformed (YAML syntax) or
mis-shaped file (not node -> ``ros__parameters`` -> values, an empty or mixed-type list, all of which rcl either
refuses with a traceback or silently misreads) is one line on stderr,
``[FATAL] [<node>]: --params-file FILE:LINE:COLUMN: reason``, and exit code 2. A file with a byte-order mark is
read (rcl reads it too). Any other ``RCLError`` of ``rclpy.init`` (e.g. a malformed ``-r`` or ``-p`` argument)
is also one line and exit code 2.

Unknown parameters: once the node is constructed, before ``configure()``, every parameter the command line or a
parameter file gives it must be one of its table (the ``PARAMETERS`` of the factory's module), ``use_sim_time``, a
``qos_overrides.…`` name or one rclpy declared itself; else one fatal line naming the source (``-p`` or
``--params-file FILE``), the name and the parameter meant (``physics_rat: unknown dynamics_node parameter (did you
mean 'physics_rate'?)``) and exit code 2, as the scenario loader refuses it. A section for every node (``/**``)
may carry another of the package's nodes' parameters (one file for both nodes), as in a scenario's ``params``.

Teardown: once stopped, the release of the node's ROS entities is bounded by :class:`TeardownGuard` (a hang in
the middleware's teardown is logged with the stacks and the process exits with its code anyway).

Diagnostics: :func:`run_node` registers :mod:`faulthandler` on SIGUSR1, so ``kill -USR1 PID`` writes every thread's
Python stack to stderr (the node's log) without stopping it; the bringup runner does so before it kills a node that
did not stop, so the log says where it was stuck.

Threads: :func:`run_node` first limits numpy's BLAS/OpenMP thread pools to one thread (:func:`limit_threads`): a
node's matrices are small, and a pool of spinning BLAS threads per node only takes cores from the other nodes.
"""

from __future__ import annotations

import copy
import difflib
import faulthandler
import gc
import os
import re
import signal
import sys
import threading
import time
import warnings
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

try:
    from rclpy._rclpy_pybind11 import RCLError
except ImportError:  # pragma: no cover - other rclpy layouts
    RCLError = RuntimeError

from mbs_ros.dynamics.model import source as ms
from mbs_ros.dynamics.model.source import ParameterError
from mbs_ros.cores.parameters import Parameter, kind, rules_text
from mbs_ros.cores.params import model_parameter_values
from mbs_ros.process import TEARDOWN_TIMEOUT_S, TeardownGuard, dump_stacks_on_sigusr1
from mbs_ros.process import THREAD_VARIABLES, limit_threads  # noqa: F401 - part of this module's API

__all__ = ["init_ros", "spin_until_stopped", "try_shutdown", "run_node", "freeze_heap", "limit_threads",
           "THREAD_VARIABLES", "params_files", "check_command_line", "EXIT_BAD_ARGUMENTS", "TeardownGuard",
           "TEARDOWN_TIMEOUT_S", "descriptor", "declare", "declare_model_parameters", "parameter_overrides",
           "unknown_overrides", "command_line_parameters", "unknown_parameters_problem", "CallbackGuard",
           "realtime_scheduling", "thread_priority", "run_delay_ns"]

EXIT_BAD_ARGUMENTS = 2  # as for invalid parameters

def params_files(argv: Sequence[str]) -> List[str]:
    """The ``--params-file`` paths of a command line, as rcl finds them: inside ``--ros-args`` sections (each
    up to ``--`` or the end)."""
    files: List[str] = []
    in_ros = False
    argv = list(argv)
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--ros-args":
            in_ros = True
        elif a == "--":
            in_ros = False
        elif in_ros and a == "--params-file" and i + 1 < len(argv):
            files.append(argv[i + 1])
            i += 1
        i += 1
    return files


def check_command_line(argv: Sequence[str]) -> Optional[str]:
    """None if every ``--params-file`` of ``argv`` can be read as rcl should read it; else the one-line reason
    (``--params-file FILE:LINE:COLUMN: …``)."""
    from mbs_ros.cores.paramsfile import YamlFileError, read_params_file  # ROS-free, no launch

    for path in params_files(argv):
        try:
            read_params_file(path)
        except YamlFileError as e:
            return f"--params-file {e}"
    return None


def command_line_parameters(argv: Sequence[str]) -> List[str]:
    """The names of the ``-p``/``--param NAME:=VALUE`` arguments of the ``--ros-args`` sections of ``argv``."""
    out: List[str] = []
    in_ros = False
    argv = list(argv)
    for i, a in enumerate(argv):
        if a == "--ros-args":
            in_ros = True
        elif a == "--":
            in_ros = False
        elif in_ros and a in ("-p", "--param") and i + 1 < len(argv) and ":=" in argv[i + 1]:
            out.append(argv[i + 1].split(":=", 1)[0].rsplit(":", 1)[-1])  # node:name:=value names name
    return out


def unknown_parameters_problem(node: "rclpy.node.Node", parameters: Mapping[str, Parameter],
                               argv: Sequence[str]) -> Optional[str]:
    """None when every parameter given to ``node`` (:func:`parameter_overrides`) is one it takes; else the one-line
    reason for the first unknown one, naming where it came from and the name meant (see the module docstring)."""
    from mbs_ros.cores.parameters import ROLES, names
    from mbs_ros.cores.paramsfile import YamlFileError, flatten, read_params_file

    unknown = unknown_overrides(node, parameters)
    if not unknown:
        return None
    others = {n: role for role in ROLES for n in names(role)}
    in_file: Dict[str, str] = {}
    for_every_node = set()
    for path in params_files(argv):
        try:
            sections = read_params_file(path)
        except YamlFileError:  # refused before rclpy.init already
            continue
        for section, values in sections.items():
            for name in flatten(values):
                in_file.setdefault(name, path)
                if section in ("/**", "**"):
                    for_every_node.add(name)
    given = set(command_line_parameters(argv))
    label = node.get_name()
    for name in unknown:
        if name in others and name in for_every_node and name not in given:
            continue  # another node's parameter in a section for every node
        source = "-p" if name in given or name not in in_file else f"--params-file {in_file[name]}"
        if name in others:
            return f"{source}: {name}: not a {label} parameter: a {others[name]} node's"
        close = difflib.get_close_matches(name, list(parameters), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"{label} --help lists them"
        return f"{source}: {name}: unknown {label} parameter ({hint})"
    return None


def wants_help(argv: Sequence[str]) -> bool:
    """``-h``/``--help`` among the program's own arguments (those before ``--ros-args``)."""
    own = list(argv[1:])
    if "--ros-args" in own:
        own = own[:own.index("--ros-args")]
    return any(a in ("-h", "--help") for a in own)


def help_text(factory) -> str:
    """Usage, the node module's first docstring paragraph and its parameters (``PARAMETERS``: name ->
    :class:`~mbs_ros.cores.parameters.Parameter`, with its type, default, rules and read-only flag), for
    ``--help``."""
    module = sys.modules.get(getattr(factory, "__module__", ""), None)
    name = getattr(module, "__name__", "") or ""
    if name in ("", "__main__"):
        name = getattr(getattr(module, "__spec__", None), "name", "") or _node_label(factory)
    lines = [f"usage: python -m {name} [--ros-args [-r __ns:=NS] [-r __node:=NAME] [--params-file FILE] "
             "[-p NAME:=VALUE] ...]",
             f"       ros2 run mbs_ros {name.rsplit('.', 1)[-1]} [--ros-args ...]", ""]
    doc = (getattr(module, "__doc__", "") or "").strip().split("\n\n")[0]
    if doc:
        lines += [doc, ""]
    parameters = getattr(module, "PARAMETERS", {})
    if parameters:
        lines.append("parameters:")
        for p, spec in parameters.items():  # everything from the table: type, default, rules, read-only
            facts = [kind(spec)] if kind(spec) else []
            if spec.default is not None:
                facts.append(f"default {list(spec.default) if isinstance(spec.default, tuple) else spec.default!r}")
            facts += [rules_text(spec)] if rules_text(spec) else []
            if spec.read_only:
                facts.append("start-up only")
            lines.append(f"  {p}" + (f" ({'; '.join(facts)})" if facts else "") + f": {spec.description}")
    return "\n".join(lines)


def _rcl_reason(e: BaseException) -> str:
    """rcl's error text on one line, without its C source locations (``, at /…/parse.c:776``)."""
    text = " ".join(str(e).split())
    return re.sub(r",? at \S+\.c:\d+", "", text).strip()


def _node_label(factory) -> str:
    module = getattr(factory, "__module__", "") or ""
    name = module.rsplit(".", 1)[-1] if module and module != "__main__" else ""
    return name or os.path.splitext(os.path.basename(sys.argv[0] if sys.argv else ""))[0] or "node"


def _fatal(factory, text: str) -> None:
    print(f"[FATAL] [{_node_label(factory)}]: {text}", file=sys.stderr, flush=True)


def settings_executor(node: "rclpy.node.Node"):
    """The executor a node's settings ask for: rclpy's EventsExecutor when ``node.settings.use_events_executor``
    and this rclpy has it (else, with a warning, the SingleThreadedExecutor). The single-threaded executor
    rebuilds its wait set for every message: a third of the controller's CPU time in lockstep."""
    if getattr(getattr(node, "settings", None), "use_events_executor", False):
        try:
            from rclpy.experimental import EventsExecutor
            return EventsExecutor()
        except ImportError:
            node.get_logger().warning("EventsExecutor not available here: using SingleThreadedExecutor")
    return SingleThreadedExecutor()


def try_shutdown() -> None:
    if hasattr(rclpy, "try_shutdown"):
        rclpy.try_shutdown()
    elif rclpy.ok():  # pragma: no cover - very old rclpy
        rclpy.shutdown()


def init_ros(args=None, own_signal_handlers: bool = True) -> threading.Event:
    """``rclpy.init`` with this process's own SIGINT/SIGTERM handlers, which only set the returned event (its
    ``signal_name``: the first signal's name, which :func:`run_node` logs as ``stopping on SIGTERM``).

    rclpy's handlers raise inside whatever Python code runs at that moment, e.g. the conversion of a message
    being taken, which then fails with an unrelated RuntimeError (seen with nodes that are always busy, e.g.
    stepping as fast as possible); with a flag, the spin loop ends between callbacks (within its 0.1 s wait).
    Older rclpy without ``SignalHandlerOptions``, or ``own_signal_handlers=False``: rclpy's own handlers, and
    the exceptions handled in :func:`run_node` (the returned event is then never set)."""
    stop = threading.Event()
    stop.signal_name = None  # "SIGINT" or "SIGTERM" once set: logged by run_node ("stopping on SIGTERM")
    if not own_signal_handlers:
        rclpy.init(args=args)
        return stop
    try:
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):  # pragma: no cover - older rclpy
        rclpy.init(args=args)
        return stop
    def on_signal(signum, _frame) -> None:
        if not stop.is_set():  # the first signal is the one the process stops on
            stop.signal_name = signal.Signals(signum).name
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    return stop


OK_CHECK_S = 0.05  # spin_until_stopped: how often the context is asked whether it is still up


def spin_until_stopped(executor, stop: threading.Event, fatal: Tuple[Type[BaseException], ...] = ()) -> None:
    """Spin until a shutdown signal. spin_once in a loop rather than spin(): rclpy's EventsExecutor.spin() does
    not return on SIGINT/SIGTERM (kilted wheels). Exceptions of the ``fatal`` types always propagate. The context
    is asked every OK_CHECK_S, not after each callback (its lock: 1 µs, four callbacks per step at 1 kHz)."""
    try:
        ok_at = 0.0
        while not stop.is_set():
            now = time.monotonic()
            if now >= ok_at:
                if not rclpy.ok():
                    break
                ok_at = now + OK_CHECK_S
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except fatal:
        raise
    except Exception:
        # With rclpy's own signal handlers, SIGINT/SIGTERM shut the context down; a callback that was publishing
        # at that moment fails with an RCLError ("context is invalid"): that is a clean shutdown too.
        if rclpy.ok() and not stop.is_set():
            raise


def freeze_heap() -> None:
    """A full collection, then what the set-up made (modules, models, compiled kernels: ~160 000 objects) out of the
    collector's reach: a full collection over them took 66 ms, inside whichever callback happened to allocate at
    the time. ~0.1 s: a node that publishes a first message at the end of its set-up calls this before it, so
    that the pause does not fall between that message and the next (a controller took the first state of the
    demo's dynamics node for 0.2 s old)."""
    gc.collect()
    gc.freeze()


def run_node(factory: Callable[[], "rclpy.node.Node"], args=None, *,
             make_executor: Optional[Callable[["rclpy.node.Node"], object]] = None,
             errors: Tuple[Type[BaseException], ...] = (ParameterError,),
             own_signal_handlers: bool = True) -> int:
    """Construct the node with ``factory()``, call its ``configure()`` and spin it until SIGINT/SIGTERM; the
    process's exit code (see the module docstring). ``make_executor(node)`` defaults to a
    SingleThreadedExecutor; ``errors`` are the node's invalid-configuration exceptions. Threads: see
    :func:`limit_threads`."""
    limit_threads(1)
    dump_stacks_on_sigusr1()
    if wants_help(sys.argv if args is None else args):  # before rclpy.init: print, start nothing
        print(help_text(factory))
        return 0
    problem = check_command_line(sys.argv if args is None else args)
    if problem is not None:
        _fatal(factory, problem)
        return EXIT_BAD_ARGUMENTS
    try:
        stop = init_ros(args, own_signal_handlers=own_signal_handlers)
    except RCLError as e:  # what the check above does not cover: rcl's own refusal of the arguments
        _fatal(factory, f"cannot start: {_rcl_reason(e)}")
        return EXIT_BAD_ARGUMENTS
    node = None
    try:
        node = factory()
        parameters = getattr(sys.modules.get(getattr(factory, "__module__", ""), None), "PARAMETERS", None)
        unknown = None if parameters is None else unknown_parameters_problem(
            node, parameters, sys.argv if args is None else args)
        if unknown is not None:
            return _refuse(node, f"invalid parameters: {unknown}", EXIT_BAD_ARGUMENTS)
        node.configure()
    except errors as e:
        return _refuse(node, f"invalid parameters: {e}", 2)
    except (KeyboardInterrupt, ExternalShutdownException):
        try_shutdown()
        return 0
    except Exception:  # a shutdown signal during set-up shows up as an RCLError here
        if not rclpy.ok():
            return 0
        raise
    executor = make_executor(node) if make_executor is not None else SingleThreadedExecutor()
    rc = 0
    freeze_heap()  # the set-up's (a node may have done it already, before its first message: then a short pass)
    try:
        executor.add_node(node)
        spin_until_stopped(executor, stop, fatal=errors)
    except errors:
        rc = 2
    finally:
        if stop.signal_name:  # which signal stopped it: a parent's forwarding is visible in the log
            node.get_logger().info(f"stopping on {stop.signal_name}")
        guard = TeardownGuard(node.get_logger().name, rc)
        executor.shutdown()
        node.destroy_node()
        try_shutdown()
        guard.done()
    return rc


def _refuse(node, message: str, rc: int) -> int:
    """Log ``message`` as FATAL and release the node's ROS entities under a :class:`TeardownGuard`, so a refused
    start ends the process with ``rc`` even when the middleware's teardown hangs."""
    node.get_logger().fatal(message)
    guard = TeardownGuard(node.get_logger().name, rc)
    node.destroy_node()
    try_shutdown()
    guard.done()
    return rc


def descriptor(param: Parameter, value):
    """The ROS descriptor of ``param`` declared with ``value``: strings and bools typed, numbers and lists
    dynamically typed (ints are accepted for doubles; the node checks them), its range and read-only flag."""
    from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, ParameterType

    d = ParameterDescriptor(name=param.name, description=param.description, read_only=param.read_only)
    if param.type == "string" or (param.type is None and isinstance(value, str)):
        d.type = ParameterType.PARAMETER_STRING
    elif param.type == "bool" or (param.type is None and isinstance(value, bool)):
        d.type = ParameterType.PARAMETER_BOOL
    else:
        d.dynamic_typing = True
    if param.range is not None:
        lo, hi = param.range
        d.floating_point_range = [FloatingPointRange(from_value=lo, to_value=hi, step=0.0)]
    return d


def declare(node: "rclpy.node.Node", param: Parameter, value):
    """Declare ``param`` on ``node`` with ``value`` (a tuple as a list) and its :func:`descriptor`; the value it
    gets (an override wins). ParameterError naming it when rclpy refuses (range, type)."""
    value = list(value) if isinstance(value, tuple) else value
    _check_range(param, parameter_overrides(node).get(param.name))
    try:
        return node.declare_parameter(param.name, value, descriptor(param, value)).value
    except Exception as e:  # noqa: BLE001 - rclpy's range/type exceptions differ between distros
        raise ParameterError(str(e) if param.name in str(e) else f"{param.name}: {e}") from None


def _check_range(param: Parameter, override) -> None:
    """A number given out of ``param``'s range is refused with the settings' own message (the one a scenario, a
    headless run and a value inside the range that fails a finer check get), before rclpy's "out of range Min:
    ..." would word the same range differently."""
    value = getattr(override, "value", override)
    if param.range is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    from mbs_ros.cores.params import bounds, number

    lo, lo_open, hi = bounds(param)
    number({param.name: value}, param.name, lo, lo_open, hi)


def declare_model_parameters(node: "rclpy.node.Node", parameters: Mapping[str, Parameter],
                             default: Callable[[str], object]) -> Tuple[Dict[str, object], "ms.Source"]:
    """The first half of a model node's ``configure``: declare ``robot_description`` and ``model_file``, load the
    model source they name (:func:`mbs_ros.dynamics.model.source.load_source`), then declare every other parameter
    of ``parameters`` with ``default(name)``, or the robot's own default (base_group, gravity, base_frame:
    :func:`mbs_ros.dynamics.model.source.model_defaults`). Returns ``(values, source)``: the raw values for the
    node's ``settings_from_values``. ParameterError with the reason."""
    return model_parameter_values(parameters, default, lambda param, value: declare(node, param, value))


def parameter_overrides(node: "rclpy.node.Node") -> Dict[str, object]:
    """The parameter values the command line and parameter files gave ``node`` (rclpy keeps them, Humble..Kilted)."""
    return getattr(node, "_parameter_overrides", {}) or {}


def unknown_overrides(node: "rclpy.node.Node", parameters: Mapping[str, Parameter]) -> List[str]:
    """Overridden names ``node`` does not take (typos): not in ``parameters``, not use_sim_time, a QoS override or
    one the node has declared (rclpy's own, e.g. start_type_description_service)."""
    return sorted(n for n in parameter_overrides(node) if n not in parameters and n != "use_sim_time"
                  and not n.startswith("qos_overrides.") and not node.has_parameter(n))


#: the deepest history a QoS override may ask of a subscription (a command or state stream wants the newest)
MAX_QOS_DEPTH = 100_000


def subscribe_fields(node: "rclpy.node.Node", qos, guard: Callable, msg_type, topic: str, read: Callable,
                     on_fields: Callable, on_msg: Callable):
    """A raw subscription of ``node`` with ``qos`` (rclpy hands over the serialised bytes, not a message built
    through its class's Python ``__init__``): ``read(data)`` gives the fields ``on_fields(*fields)`` takes
    (:mod:`mbs_ros.cores.cdr`), or None for anything it does not read, which then goes through rclpy's own
    deserialisation to ``on_msg(msg)``; the callback wrapped by ``guard(callback, topic)``. Its history, depth and
    reliability can be overridden at start-up, as ROS 2 does it: ``qos_overrides.<topic>.subscription.reliability:
    best_effort`` (``<topic>`` fully qualified; docs/dynamics_node.md, "QoS overrides"); a value rclpy refuses is
    a ParameterError naming the key."""
    from rclpy.qos import HistoryPolicy
    from rclpy.qos_overriding_options import QosCallbackResult, QoSOverridingOptions
    from rclpy.serialization import deserialize_message

    def on_bytes(data: bytes) -> None:
        fields = read(data)
        if fields is None:
            on_msg(deserialize_message(data, msg_type))
        else:
            on_fields(*fields)

    def whole(profile):  # rclpy takes a depth of 0 (with a warning) as the middleware's default
        ok = profile.history != HistoryPolicy.KEEP_LAST or 1 <= profile.depth <= MAX_QOS_DEPTH
        return QosCallbackResult(successful=ok, reason="" if ok else f"depth {profile.depth}")

    options = QoSOverridingOptions(QoSOverridingOptions.with_default_policies().policy_kinds, callback=whole)
    qos = copy.copy(qos)  # rclpy writes the overrides into the profile it is given: not into the caller's
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return node.create_subscription(msg_type, topic, guard(on_bytes, topic), qos, raw=True,
                                            qos_overriding_options=options)
    except Exception as e:  # an override rclpy refuses: a ParameterError naming it, not a traceback
        prefix = f"qos_overrides.{node.resolve_topic_name(topic)}.subscription."
        given = sorted(n for n in parameter_overrides(node) if n.startswith(prefix))
        if not given:
            raise
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__  # pybind's refusals run to many lines
        raise ParameterError(f"{', '.join(given)}: {reason} (history: keep_last or keep_all; depth: a whole "
                             f"number in [1, {MAX_QOS_DEPTH}]; reliability: reliable, best_effort or "
                             "system_default)") from None


def realtime_scheduling(priority: int) -> Optional[str]:
    """SCHED_FIFO at ``priority`` for every thread of this process (Linux: each of /proc/self/task; elsewhere the
    calling thread): the executor's, where a node's callbacks run, and the middleware's, whose locks a callback
    may wait on (one of them left to the default scheduler, preempted while holding such a lock, made the
    executor wait 25 ms on a busy machine: priority inversion); threads started later inherit it. As
    ros2_control's controller_manager sets its update loop's ``thread_priority``. None when set (or ``priority``
    0: nothing asked), else why not: the system's refusal (no right to it: root, CAP_SYS_NICE or an ``rtprio``
    limit in /etc/security/limits.conf), or no SCHED_FIFO on this system."""
    if priority <= 0:
        return None
    if not hasattr(os, "sched_setscheduler") or not hasattr(os, "SCHED_FIFO"):
        return "this system has no SCHED_FIFO"
    param = os.sched_param(int(priority))
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = []
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, param)  # this thread first: a refusal changes nothing
        for tid in tids:
            try:
                os.sched_setscheduler(tid, os.SCHED_FIFO, param)
            except ProcessLookupError:  # ended since the listing
                pass
    except OSError as e:
        return e.strerror or type(e).__name__
    return None


def thread_priority(logger, priority: int, busy: bool = False, rmw: Optional[str] = None) -> bool:
    """A node's ``thread_priority`` parameter: :func:`realtime_scheduling`, logged on ``logger`` (an info line when
    set, else a warning with the system's reason: the node keeps the default scheduler). ``busy``: the node will
    step back to back (free-running, real_time_factor 0), warned when set. A warning too when the middleware
    (``rmw``, default this process's) publishes in the callbacks (:func:`mbs_ros.dds.synchronous_publication`:
    the launchers start such a node with asynchronous publication). True when set."""
    if priority <= 0:
        return False
    from mbs_ros.dds import REALTIME_ENVIRONMENT, synchronous_publication

    if rmw is None:
        from rclpy.utilities import get_rmw_implementation_identifier

        rmw = get_rmw_implementation_identifier()
    why = synchronous_publication(rmw)
    if why is not None:
        logger.warning(f"thread_priority {priority}: {why}: each publication is sent in the node's callback, where it "
                       "may wait milliseconds for the transport; start the node with "
                       f"{' '.join(f'{k}={v}' for k, v in REALTIME_ENVIRONMENT)} (the bringup runner and the launch "
                       "files do)")
    problem = realtime_scheduling(priority)
    if problem is not None:
        logger.warning(f"thread_priority {priority}: SCHED_FIFO refused ({problem}; it needs root, CAP_SYS_NICE or "
                       "an rtprio limit): running with the default scheduler")
        return False
    logger.info(f"thread_priority {priority}: the node's threads run with SCHED_FIFO")
    if busy:
        logger.warning("thread_priority with real_time_factor 0: the node steps back to back and takes its core "
                       "whole (the kernel's real-time throttling leaves the other processes 5 % of it)")
    return True


def run_delay_ns(path: str) -> Optional[int]:
    """The time [ns] a thread spent ready to run but waiting for a core, from its ``/proc/.../schedstat`` (the
    second of its three fields: time on a CPU, time waiting on a run queue, time slices; Linux's
    Documentation/scheduler/sched-stats.rst); None where there is no such file (another OS, a kernel without
    CONFIG_SCHED_INFO)."""
    try:
        with open(path, "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


class CallbackGuard:
    """What keeps a node's callbacks from stopping it, built with the ``node`` (its context), its ``counts``
    (``callback_errors``, ``rejected_<topic>``) and its ``logs`` (a :class:`~mbs_ros.cores.ratelimit.RateLimitedLog`):
    throttled warnings, counted rejections, and callbacks that never raise (the dynamics node's)."""

    def __init__(self, node, counts: Dict[str, int], logs):
        self.node, self.counts, self.logs = node, counts, logs
        # the wall-clock duration of every guarded callback (the rule: none longer than one control period):
        # the longest since the start and since the last report (:meth:`timing`), and which callback it was
        self.longest_ns, self.longest_what = 0, ""
        self.recent_ns, self.recent_what = 0, ""
        # and the most CPU time (this thread's) one callback took: what the node's own work costs, apart from the
        # waits of a busy machine's scheduler that the wall clock includes
        self.longest_cpu_ns = self.recent_cpu_ns = 0
        self.started_ns = 0  # when the guarded callback running now (or the last one) started (monotonic clock)
        # how long this thread waited, ready to run, for a core (Linux: /proc's schedstat), between two reports and
        # since the first: what a busy machine adds to the callbacks' wall clock; None where the kernel has none
        self._schedstat = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        wait = run_delay_ns(self._schedstat)
        self._wait_first = self._wait_last = None if wait is None else (time.monotonic_ns(), wait)

    def _timed(self, what: str, t0: int, c0: int) -> None:
        d = time.monotonic_ns() - t0
        if d > self.recent_ns:
            self.recent_ns, self.recent_what = d, what
            if d > self.longest_ns:
                self.longest_ns, self.longest_what = d, what
        # a callback's CPU time is at most its wall time: the thread's CPU clock (a system call: 0.7 µs on this
        # VM when quiet, up to 8 µs under the test suite's load) is read again only when the callback may have
        # taken more than the most since the last report
        if d > self.recent_cpu_ns:
            c = time.thread_time_ns() - c0
            if c > self.recent_cpu_ns:
                self.recent_cpu_ns = c
                self.longest_cpu_ns = max(self.longest_cpu_ns, c)

    def timing(self) -> Dict[str, object]:
        """The longest callback [ms] since the start and since the last call (then restarted), with its name:
        the dynamics node's /diagnostics values ``longest_callback_ms``, ``longest_callback``,
        ``longest_callback_recent_ms``, ``longest_callback_recent``; and the most thread CPU time a callback took
        [ms], ``longest_callback_cpu_ms``, ``longest_callback_recent_cpu_ms``; on Linux the share of the wall clock
        the node's thread waited for a core since the start and since the last call, ``scheduler_wait_share`` and
        ``scheduler_wait_share_recent`` (from the thread that made the guard: the executor's)."""
        out = {"longest_callback_ms": self.longest_ns * 1e-6, "longest_callback": self.longest_what,
               "longest_callback_recent_ms": self.recent_ns * 1e-6, "longest_callback_recent": self.recent_what,
               "longest_callback_cpu_ms": self.longest_cpu_ns * 1e-6,
               "longest_callback_recent_cpu_ms": self.recent_cpu_ns * 1e-6}
        self.recent_ns, self.recent_what, self.recent_cpu_ns = 0, "", 0
        if self._wait_last is not None:
            wait = run_delay_ns(self._schedstat)
            if wait is not None:
                now = time.monotonic_ns()
                t_first, w_first = self._wait_first
                t_last, w_last = self._wait_last
                out["scheduler_wait_share"] = (wait - w_first) / max(now - t_first, 1)
                out["scheduler_wait_share_recent"] = (wait - w_last) / max(now - t_last, 1)
                self._wait_last = (now, wait)
        return out

    def warn(self, key: str, text: str, error: bool = False) -> None:
        """A warning throttled per ``key`` (one per WARN_THROTTLE_S of wall clock), with how many were held back;
        free while held back (:mod:`mbs_ros.cores.ratelimit`: rclpy's own throttle costs ms per call)."""
        if not self.node.context.ok():
            return
        try:
            (self.logs.error if error else self.logs.warning)(key, text)
        except Exception:  # noqa: BLE001 - a log line is never worth the node
            pass

    def reject(self, topic: str, kind: str, reason: str) -> None:
        """An input rejected: counted, and a warning throttled per topic and kind of reason."""
        self.counts[f"rejected_{topic}"] += 1
        self.warn(f"{topic}:{kind}", f"{topic} rejected: {reason}")

    def callback(self, fn, what: str):
        """``fn`` that never raises: an exception is logged (throttled) and counted."""

        def guarded(*args):
            t0, c0 = time.monotonic_ns(), time.thread_time_ns()
            self.started_ns = t0
            try:
                return fn(*args)
            except Exception as e:  # noqa: BLE001 - no input may stop the node
                if not self.node.context.ok():
                    return None
                self.counts["callback_errors"] += 1
                self.warn(f"error_{what}", f"{what} callback failed: {type(e).__name__}: {e}", error=True)
            finally:
                self._timed(what, t0, c0)
            return None

        if what.endswith("timer"):  # rclpy passes a TimerInfo to a timer callback that takes an argument
            return lambda: guarded()
        return lambda msg: guarded(msg)

    def service(self, fn, what: str):
        """A service callback that never raises: an exception is the response's reason."""

        def guarded(request, response):
            t0, c0 = time.monotonic_ns(), time.thread_time_ns()
            self.started_ns = t0
            try:
                return fn(request, response)
            except Exception as e:  # noqa: BLE001
                self.counts["callback_errors"] += 1
                self.warn(f"error_{what}", f"{what} failed: {type(e).__name__}: {e}", error=True)
                response.success = False
                response.message = f"{what} failed: {type(e).__name__}: {e}"
                return response
            finally:
                self._timed(what, t0, c0)

        return guarded
