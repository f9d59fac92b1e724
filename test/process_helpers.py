"""Running a command to its exit in a test, ROS-free (a node that refuses its start, a command-line tool).

:func:`run_to_exit`: (exit code, output); a command that hangs fails the test with its threads' stacks instead of a
bare ``TimeoutExpired`` that says nothing of where it hung (a CI run once saw a node that should refuse its start
run into a 120 s timeout, with nothing to go on).
"""

from __future__ import annotations

import signal
import subprocess


def run_to_exit(command, timeout=120.0, cwd=None):
    """Run ``command`` (an argv list) to its exit: (exit code, stdout and stderr together). A command that has not
    exited after ``timeout`` s (a deadline: a refused start takes about a second) is asked for its threads' stacks
    (SIGUSR1: every node and the recorder register faulthandler on it) and killed, and the test fails with its
    output, stacks included."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, cwd=cwd)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        try:
            out, _ = proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        raise AssertionError(f"{' '.join(map(str, command))} did not exit within {timeout:g} s; its output, with "
                             f"its threads' stacks:\n{out[-8000:]}") from None
