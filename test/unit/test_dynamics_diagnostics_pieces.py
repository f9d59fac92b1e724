"""The dynamics node's /diagnostics status goes out as a job of several pieces (the node's work queue runs one piece
per turn and may leave the rest to a later callback): the report at the first piece, the message at the second, the
publication at the last, so that no piece holds a callback for the whole (~1 ms of CPU for Solo12 at the landing,
a control period). What it publishes is what the same job run at once publishes. No
process: the publishing part with a stand-in node and publisher around a real simulator."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("diagnostic_msgs.msg")

from mbs_ros.cores import work  # noqa: E402
from mbs_ros.cores.dynamics import diagnostics_report  # noqa: E402
from mbs_ros.dynamics import Model  # noqa: E402
from mbs_ros.dynamics.simulation.simulator import Simulator  # noqa: E402
from mbs_ros.nodes.conversions import values_from_status  # noqa: E402
from mbs_ros.nodes.dynamics_publishing import StatePublishing  # noqa: E402


class _Publisher:
    def __init__(self):
        self.sent = []

    def get_subscription_count(self):
        return 1

    def publish(self, msg):
        self.sent.append(msg)


def _publishing():
    model = Model.rigid_body("se3", mass=2.0, inertia=np.diag([0.1, 0.2, 0.3]))
    sim = Simulator(model, model.neutral(), np.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.2]), 0.002)
    sim.advance(7)
    p = StatePublishing.__new__(StatePublishing)  # the parts diagnostics use, without a node
    p.sim, p.multibody, p.base_frame, p._counts, p._reported = sim, False, "base_link", {"callback_errors": 0}, {}
    p.node = SimpleNamespace(get_fully_qualified_name=lambda: "/t/dynamics_node")
    p.pub_diag = _Publisher()
    return p


RATE = SimpleNamespace(omega_gravity=0.0, omega_effort=0.0)


def test_the_status_goes_out_in_pieces_and_says_what_one_call_says():
    whole, pieces = _publishing(), _publishing()
    work.whole(whole.diagnostics_pieces(False, RATE))  # all at once
    job = pieces.diagnostics_pieces(False, RATE)
    for _ in range(2):  # the report, then the message: nothing out yet
        next(job)
        assert pieces.pub_diag.sent == []
    with pytest.raises(StopIteration):  # the third piece publishes and ends the job
        next(job)
    assert len(pieces.pub_diag.sent) == len(whole.pub_diag.sent) == 1
    a, b = whole.pub_diag.sent[0], pieces.pub_diag.sent[0]
    assert a.header.stamp == b.header.stamp and a.status[0].name == b.status[0].name
    assert values_from_status(a.status[0]) == values_from_status(b.status[0])
    # the values are the report of the simulator's state (the stamp of step 7, its momentum and energies)
    level, _, values, _ = diagnostics_report(whole.sim, {"callback_errors": 0}, {}, False, RATE)
    got = values_from_status(b.status[0])
    assert level == "OK" and got["steps"] == 7 and got["momentum_linear_x"] == values["momentum_linear_x"]


def test_no_subscriber_no_work():
    p = _publishing()
    p.pub_diag.get_subscription_count = lambda: 0
    assert list(p.diagnostics_pieces(False, RATE)) == [] and p.pub_diag.sent == []
