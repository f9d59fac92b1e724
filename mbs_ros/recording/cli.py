"""``python -m mbs_ros.recording OUT.mcap --topics T... | --all``, ``... check FILE``, ``... recover DAMAGED OUT``."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Dict, Optional, Sequence, Tuple

from mbs_ros.analysis.mcapfile import COMPRESSION, NotMcapError, check_file, recover
from mbs_ros.recording.recorder import Recorder

def _topic_argument(text: str) -> Tuple[str, Optional[str]]:
    name, _, type_name = text.partition(":")  # ':' never occurs in ROS names
    if not name:
        raise argparse.ArgumentTypeError(f"empty topic name in {text!r}")
    return name, (type_name or None)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mbs_ros.recording",
        description="Record ROS 2 topics into a rosbag2-compatible MCAP file (ros2 profile, cdr messages, "
                    "ros2msg schemas) until Ctrl-C, SIGTERM or --duration (stop now), or SIGUSR2 (finish: up to "
                    "--end-time on the --end-topics). ROS arguments go after --ros-args.",
        epilog="Reading back: `python -m mbs_ros.recording check FILE` (messages per topic, damage) and "
               "`python -m mbs_ros.recording recover DAMAGED OUT` (every complete message into a complete file).")
    p.add_argument("output", help="the .mcap file to write (overwritten)")
    p.add_argument("--topics", nargs="+", type=_topic_argument, default=[], metavar="TOPIC[:TYPE]",
                   help="topics to record, e.g. /robot1/odom or /robot1/odom:nav_msgs/msg/Odometry; "
                        "recorded as soon as they appear")
    p.add_argument("-a", "--all", action="store_true", help="record every topic that appears")
    p.add_argument("--include-hidden", action="store_true", help="with --all: hidden topics too")
    p.add_argument("--exclude", action="append", default=[], metavar="REGEX",
                   help="with --all: skip topics matching this regular expression (repeatable)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    p.add_argument("--end-time", type=float, default=None, metavar="S",
                   help="the run ends at simulation time S [s]: asked to finish (SIGUSR2), keep recording until each "
                        "of --end-topics has delivered its message stamped S (or later), then write what the "
                        "subscriptions hold and close")
    p.add_argument("--end-topics", nargs="+", default=[], metavar="TOPIC",
                   help="with --end-time: the topics (each a type with a Header, e.g. the robots' odom and "
                        "joint_states) whose message stamped S ends the recording")
    p.add_argument("--finish-timeout", type=float, default=60.0, metavar="S",
                   help="finishing waits at most S seconds for the --end-topics (default 60), then closes with a "
                        "warning naming what is missing")
    p.add_argument("--compression", choices=sorted(COMPRESSION), default="zstd", help="chunk compression")
    p.add_argument("--chunk-size", type=int, default=1 << 20, metavar="BYTES", help="chunk size (default 1 MiB)")
    p.add_argument("--flush-period", type=float, default=1.0, metavar="S",
                   help="close a chunk (and write it to disk) at least this often (default 1 s)")
    p.add_argument("--discovery-period", type=float, default=0.5, metavar="S",
                   help="how often the graph is polled for new topics")
    return p


def _file_parser(command: str) -> argparse.ArgumentParser:
    if command == "recover":
        p = argparse.ArgumentParser(
            prog="python -m mbs_ros.recording recover",
            description="Recover every complete message (with its schemas and channels) of a damaged or unclosed "
                        "MCAP file (a recorder killed, a truncated copy) into a new, complete MCAP file that "
                        "ros2 bag, mcap and rosbags read; prints what was recovered and what was lost. Exit code "
                        "0 when a file was written, 2 when the input is not MCAP.")
        p.add_argument("input", help="the damaged .mcap file (not modified)")
        p.add_argument("output", help="the .mcap file to write (replaced)")
        p.add_argument("--compression", choices=sorted(COMPRESSION), default="zstd", help="chunk compression")
    else:
        p = argparse.ArgumentParser(
            prog="python -m mbs_ros.recording check",
            description="Read an MCAP file back completely (every record and chunk CRC, then its summary and "
                        "index) and print its messages per topic and any damage. Exit code 0 when intact, 1 when "
                        "damaged (recover it with `python -m mbs_ros.recording recover`), 2 when not MCAP.")
        p.add_argument("input", help="the .mcap file")
    return p


def _file_command(command: str, argv: Sequence[str]) -> int:
    args = _file_parser(command).parse_args(argv)
    try:
        if command == "check":
            report = check_file(args.input)
        else:
            report = recover(args.input, args.output, compression=args.compression)
    except (NotMcapError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    topics = f"{report.message_count} messages on {len(report.counts)} topics"
    if command == "check":
        print(f"{args.input}: {topics}: {report.describe()}{report.counts_text()}")
        if report.damaged:
            print(f"recover it: python -m mbs_ros.recording recover {args.input} OUT.mcap", file=sys.stderr)
        return 1 if report.damaged else 0
    print(f"recovered {topics} ({report.schemas} schemas, {report.channels} channels) from {args.input} into "
          f"{args.output}{report.counts_text()}")
    for problem in report.problems:
        print(f"lost or damaged: {problem}")
    if not report.damaged:
        print(f"{args.input} was intact: {args.output} holds the same messages")
    return 0


def _seconds(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def _newest_text(short: Dict[str, Optional[int]]) -> str:
    """``/a/odom (newest 2.310000000 s), /a/joint_states (none)``."""
    return ", ".join(f"{t} ({'none' if n is None else 'newest ' + _seconds(n) + ' s'})" for t, n in short.items())


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    from mbs_ros.process import dump_stacks_on_sigusr1

    dump_stacks_on_sigusr1()
    if len(argv) > 1 and argv[1] in ("recover", "check"):  # no ROS needed for these
        return _file_command(argv[1], argv[2:])

    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from rclpy.utilities import remove_ros_args

    args = _parser().parse_args(remove_ros_args(argv)[1:])
    if not args.topics and not args.all:
        _parser().error("give --topics or --all")
    if args.duration is not None and args.duration <= 0:
        _parser().error("--duration must be > 0")
    if (args.end_time is None) != (not args.end_topics):
        _parser().error("--end-time and --end-topics go together")
    if args.end_time is not None and not 0.0 <= args.end_time < 9.2e9:
        _parser().error("--end-time must be a simulation time in [0, 9.2e9) s")
    if not args.finish_timeout > 0:
        _parser().error("--finish-timeout must be > 0")

    # SIGINT and SIGTERM (stop now) and SIGUSR2 (finish) only set a flag that the spin loop reads. Neither rclpy's
    # handlers (SIGINT would then also raise KeyboardInterrupt wherever the main thread is, a subscription callback
    # included) nor Python's default: an exception raised in the middle of a write would leave a half-written record
    # in the chunk that closing the file then writes out. A stop signal while finishing ends the finishing; one
    # while the file is being completed is ignored alike.
    stop: list = []
    finish: list = []

    def on_signal(signum, _frame) -> None:
        stop.append(signum)  # nothing that could raise or block

    def on_finish(signum, _frame) -> None:
        finish.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGUSR2] = signal.signal(signal.SIGUSR2, on_finish)
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("mbs_recorder")
    recorder = None
    done = threading.Event()
    end_topics = [node.resolve_topic_name(t) for t in args.end_topics]
    end_ns = None if args.end_time is None else int(round(args.end_time * 1e9))
    finishing = None  # monotonic deadline once asked to finish
    try:
        requested = {node.resolve_topic_name(name) for name, _type in args.topics}
        unknown = [t for t in end_topics if not args.all and t not in requested]
        if unknown:
            _parser().error(f"--end-topics {' '.join(unknown)}: not among the --topics recorded")
        recorder = Recorder(node, args.output, dict(args.topics), all_topics=args.all, exclude=args.exclude,
                            include_hidden=args.include_hidden, compression=args.compression,
                            chunk_size=args.chunk_size, flush_period=args.flush_period,
                            discovery_period=args.discovery_period)
        what = "all topics" if args.all else " ".join(recorder.requested)
        node.get_logger().info(f"recording {what} into {recorder.path}")
        if args.duration is not None:
            node.create_timer(args.duration, done.set)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        while not stop and not done.is_set() and rclpy.ok():
            if finish and finishing is None:
                finishing = time.monotonic() + args.finish_timeout
                node.get_logger().info(
                    "finishing: " + (f"recording until {', '.join(end_topics)} each delivered its message stamped "
                                     f"{_seconds(end_ns)} s" if end_ns is not None else "no --end-time"))
            if finishing is not None:
                short = recorder.short_of(end_ns, end_topics) if end_ns is not None else {}
                if not short:
                    break
                if time.monotonic() > finishing:
                    node.get_logger().warning(
                        f"finishing gave up after {args.finish_timeout:g} s: no message stamped {_seconds(end_ns)} s "
                        f"yet on {_newest_text(short)}; the recording ends short of the run's end")
                    break
            try:
                executor.spin_once(timeout_sec=0.1)
            except ExternalShutdownException:
                break
    finally:
        try:
            if recorder is not None:
                taken = recorder.take_queued()  # what has arrived and was not taken yet, whatever ended the loop
                if finishing is not None:
                    short = recorder.short_of(end_ns, end_topics) if end_ns is not None else {}
                    if stop and short:
                        node.get_logger().warning(
                            f"stopped by {signal.Signals(stop[0]).name} while finishing: no message stamped "
                            f"{_seconds(end_ns)} s on {_newest_text(short)}")
                    elif not short:
                        node.get_logger().info(
                            "finished: " + (f"every end topic delivered its message stamped {_seconds(end_ns)} s; "
                                            if end_ns is not None else "") + f"{taken} queued messages written")
                recorder.close()
                counts = recorder.counts
                lines = "".join(f"\n  {t}: {n}" for t, n in sorted(counts.items()))
                missing = f"\n  never seen: {' '.join(recorder.missing)}" if recorder.missing else ""
                print(f"wrote {sum(counts.values())} messages on {len(counts)} topics to {recorder.path}"
                      f"{lines}{missing}", flush=True)
            from mbs_ros.process import TeardownGuard

            guard = TeardownGuard(node.get_logger().name, 0)  # a middleware hang cannot keep the process alive
            node.destroy_node()
            rclpy.try_shutdown()
            guard.done()
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
    return 0
