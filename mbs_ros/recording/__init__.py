"""Record ROS 2 topics into a rosbag2-compatible MCAP file without ``ros2 bag``, and read such files back.

``python -m mbs_ros.recording OUT.mcap --topics T... | --all``, ``... check FILE``, ``... recover DAMAGED OUT``;
in a program :class:`Recorder` (on a node the program spins) or :class:`BackgroundRecorder`. Every write goes
through one writer thread (:class:`BagWriter`), so a signal cannot cut a record in half and a SIGKILL loses at
most the last chunk. File layout, QoS and damage: docs/recording.md.

The parts: :mod:`mbs_ros.recording.definitions` (message types and their definition text), :mod:`mbs_ros.recording.writer` (the file),
:mod:`mbs_ros.recording.recorder` (the ROS side), :mod:`mbs_ros.recording.cli`; reading a file back and recovering it, ROS-free, is
:mod:`mbs_ros.analysis.mcapfile` (re-exported here).
"""

from mbs_ros.recording.definitions import (DefinitionNotFound, UnknownMessageType, message_class,
                                           message_definition, qos_profiles_yaml, resolve_message_type)
from mbs_ros.analysis.mcapfile import FileReport, NotMcapError, check_file, read_messages, recover
from mbs_ros.recording.writer import BagWriter
from mbs_ros.recording.recorder import BackgroundRecorder, Recorder
from mbs_ros.recording.cli import main

__all__ = ["BagWriter", "Recorder", "BackgroundRecorder", "DefinitionNotFound", "message_definition", "message_class",
           "UnknownMessageType", "resolve_message_type", "qos_profiles_yaml", "FileReport", "NotMcapError",
           "check_file", "read_messages", "recover", "main"]
