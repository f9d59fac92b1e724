"""Reading a recording back without ROS: what an MCAP file holds and what of it is damaged (:func:`check_file`),
every complete message in file order (:func:`read_messages`), and a damaged file rewritten complete
(:func:`recover`)."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from mcap.writer import LIBRARY_IDENTIFIER, CompressionType
from mcap.writer import Writer as McapWriter

COMPRESSION = {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4, "none": CompressionType.NONE}

# ------------------------------------------------------------------------------ reading back, recovery
#
# The mcap library's StreamReader reads the file record by record (emit_chunks: chunks whole) up to where it
# breaks; what it cannot do is tolerate damage, so three things are done here on top of it, with the library's
# record classes: a chunk's records are split one by one (a broken one ends the chunk, the ones before it are
# kept, where mcap's breakup_chunk would drop the chunk or accept a record whose length field was never
# written); a chunk cut off by the end of the file is decompressed as far as its bytes go (zstd and lz4 decode
# a prefix); and damage is described, not raised.

MCAP_MAGIC = b"\x89MCAP0\r\n"
_RECORD_HEAD = struct.Struct("<BQ")  # opcode, length
_MESSAGE_FIELDS = 22  # channel id (2), sequence (4), log time (8), publish time (8)


class NotMcapError(ValueError):
    """The file is not MCAP at all (missing, empty, or no MCAP magic and header)."""


@dataclass
class FileReport:
    """What a pass over an MCAP file found. ``problems`` is empty for an intact file."""

    path: Path
    size: int = 0
    profile: str = ""
    library: str = ""
    topics: Dict[str, str] = field(default_factory=dict)  # topic -> type (schema name), in file order
    counts: Dict[str, int] = field(default_factory=dict)  # topic -> complete messages found
    #: topic -> the latest header stamp [ns] of its messages, for a type that starts with a std_msgs/Header
    last_stamps: Dict[str, int] = field(default_factory=dict)
    schemas: int = 0
    channels: int = 0
    chunks: int = 0
    closed: bool = False  # the footer and the closing magic were reached
    problems: List[str] = field(default_factory=list)  # the damage (a missing summary first, then in file order)

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    def describe(self) -> str:
        """One line: ``intact`` or what is damaged and lost."""
        return "intact" if not self.problems else "; ".join(self.problems)

    def counts_text(self, indent: str = "  ") -> str:
        return "".join(f"\n{indent}{t}: {n}" for t, n in sorted(self.counts.items()))


def _starts_with_header(schema) -> bool:
    """Whether an MCAP schema of encoding ros2msg describes a type whose first field is a std_msgs/Header."""
    if schema.encoding != "ros2msg":
        return False
    for line in schema.data.decode("utf-8", "replace").splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            return words[0] in ("std_msgs/Header", "std_msgs/msg/Header", "Header")
    return False


def _opcode_name(opcode: int) -> str:
    from mcap.opcode import Opcode
    try:
        return Opcode(opcode).name.title().replace("_", "")
    except ValueError:
        return f"unknown (opcode {opcode:#x})"


class _Scan:
    """One tolerant pass: yields ``(kind, record)`` for the header, the first definition of every schema and
    channel, every complete message, metadata and attachments, in file order; fills ``report``."""

    def __init__(self, f, report: FileReport):
        self.f, self.report = f, report
        self.schemas: Dict[int, object] = {}
        self.channels: Dict[int, object] = {}
        self.orphans: Dict[int, int] = {}  # channel id -> messages on a channel never defined
        self.headers: Dict[int, bool] = {}  # channel id -> its type starts with a std_msgs/Header

    def problem(self, text: str) -> None:
        self.report.problems.append(text)

    def records(self):
        from mcap.records import (Attachment, Channel, Chunk, DataEnd, Footer, Header, Message, Metadata,
                                  Schema)
        from mcap.stream_reader import StreamReader

        f, report = self.f, self.report
        f.seek(0, os.SEEK_END)
        report.size = size = f.tell()
        f.seek(0)
        if f.read(len(MCAP_MAGIC)) != MCAP_MAGIC:
            raise NotMcapError(f"{report.path} is not an MCAP file (no MCAP magic at its start)"
                               if size else f"{report.path} is empty")
        reader = StreamReader(f, skip_magic=True, emit_chunks=True, record_size_limit=max(size, 1))
        pos, summary, footer, header, error = len(MCAP_MAGIC), False, False, False, None
        try:
            for record in reader.records:
                start, pos = pos, f.tell()
                if isinstance(record, Header):
                    header = True
                    report.profile, report.library = record.profile, record.library
                    yield "header", record
                elif not header:
                    raise NotMcapError(f"{report.path} is not an MCAP file (no header record)")
                elif isinstance(record, Footer):
                    summary = footer = True
                elif isinstance(record, DataEnd):
                    summary = True  # what follows repeats the definitions and indexes the data
                elif summary:
                    continue
                elif isinstance(record, Chunk):
                    report.chunks += 1
                    yield from self._chunk(record, start)
                elif isinstance(record, (Schema, Channel, Message)):
                    yield from self._record(record)
                elif isinstance(record, Metadata):
                    yield "metadata", record
                elif isinstance(record, Attachment):
                    yield "attachment", record
            report.closed = True
        except NotMcapError:
            raise
        except Exception as e:  # noqa: BLE001 - the first record the library cannot read
            error = e
        if not header:
            raise NotMcapError(f"{report.path} is not an MCAP file (no readable header record)")
        known = len(report.problems)
        if error is not None and footer:
            self.problem(f"the MCAP magic after its footer is cut off or wrong ({size - pos} bytes instead of 8)")
        elif error is not None:
            yield from self._tail(pos, size, error, summary)
        if not summary:
            report.problems.insert(0, "no summary: the file was not closed (its writer was killed?)")
        elif not report.closed and len(report.problems) == known:
            self.problem("the file ends before its footer")
        if self.orphans:
            self.problem(f"{sum(self.orphans.values())} messages on channel(s) "
                         f"{', '.join(map(str, sorted(self.orphans)))} whose definition is lost")

    def _record(self, record):
        kind = type(record).__name__
        if kind == "Schema":
            known = self.schemas.get(record.id)
            if known is None:
                self.schemas[record.id] = record
                self.report.schemas += 1
                yield "schema", record
            elif (known.name, known.encoding, known.data) != (record.name, record.encoding, record.data):
                self.problem(f"schema {record.id} is defined twice, differently: the first kept")
        elif kind == "Channel":
            known = self.channels.get(record.id)
            if known is None:
                self.channels[record.id] = record
                self.report.channels += 1
                schema = self.schemas.get(record.schema_id)
                self.report.topics.setdefault(record.topic, schema.name if schema is not None else "")
                self.report.counts.setdefault(record.topic, 0)
                yield "channel", record
            elif (known.topic, known.schema_id, known.message_encoding) != (
                    record.topic, record.schema_id, record.message_encoding):
                self.problem(f"channel {record.id} is defined twice, differently: the first kept")
        else:
            channel = self.channels.get(record.channel_id)
            if channel is None:
                self.orphans[record.channel_id] = self.orphans.get(record.channel_id, 0) + 1
                return
            self.report.counts[channel.topic] += 1
            stamp = self._stamp(channel, record.data)
            if stamp is not None and stamp > self.report.last_stamps.get(channel.topic, -1):
                self.report.last_stamps[channel.topic] = stamp
            yield "message", record

    def _stamp(self, channel, data: bytes) -> Optional[int]:
        """The header stamp [ns] of a CDR message whose type (by its ros2msg schema) starts with a std_msgs/Header."""
        header = self.headers.get(channel.id)
        if header is None:
            schema = self.schemas.get(channel.schema_id)
            header = self.headers[channel.id] = schema is not None and _starts_with_header(schema)
        if not header or len(data) < 12:
            return None
        sec, nsec = struct.unpack_from("<iI" if data[1] & 1 else ">iI", data, 4)
        return sec * 1_000_000_000 + nsec

    def _split(self, data: bytes, where: str, cut: bool = False) -> Tuple[list, Optional[str]]:
        """The records of a chunk's data, up to the first broken one; (records, what was wrong or None).
        ``cut``: the data is a prefix (of a chunk cut off by the end of the file)."""
        from io import BytesIO

        from mcap.data_stream import ReadDataStream
        from mcap.opcode import Opcode
        from mcap.records import Channel, Message, Schema

        out, pos, n = [], 0, len(data)
        while pos < n:
            if n - pos < _RECORD_HEAD.size:
                return out, None if cut else f"{where} ends in the middle of a record header"
            opcode, length = _RECORD_HEAD.unpack_from(data, pos)
            end = pos + _RECORD_HEAD.size + length
            name = _opcode_name(opcode)
            if end > n:
                return out, None if cut else (f"{where}: its last record, a {name}, is cut off "
                                              f"({n - pos - _RECORD_HEAD.size} of {length} bytes)")
            stream = ReadDataStream(BytesIO(data[pos + _RECORD_HEAD.size:end]))
            try:
                if opcode == Opcode.MESSAGE:
                    if length < _MESSAGE_FIELDS:  # e.g. 0: the length of a record that was never finished
                        raise ValueError(f"length {length}, less than the {_MESSAGE_FIELDS} bytes of its fields")
                    out.append(Message.read(stream, length))
                elif opcode == Opcode.SCHEMA:
                    out.append(Schema.read(stream))
                elif opcode == Opcode.CHANNEL:
                    out.append(Channel.read(stream))
            except Exception as e:  # noqa: BLE001 - a broken record: nothing after it can be trusted
                return out, (f"{where}: a broken {name} record at offset {pos} of its data "
                             f"({type(e).__name__}: {e or 'runs past its end'}); the {n - pos} bytes from there on "
                             "are dropped")
            pos = end
        return out, None

    def _chunk(self, chunk, offset: int):
        from mcap.stream_reader import get_chunk_data_stream

        where = f"the chunk at byte {offset}"
        try:
            stream, length = get_chunk_data_stream(chunk, validate_crc=True)
            data = stream.read(length) if length else b""
        except Exception as e:  # noqa: BLE001 - cannot decompress, or the CRC does not match: all of it lost
            self.problem(f"{where} is unreadable ({type(e).__name__}: {e}): its messages are lost")
            return
        records, broken = self._split(data, where)
        if broken:
            self.problem(broken)
        for record in records:
            yield from self._record(record)

    def _tail(self, pos: int, size: int, error: Exception, in_summary: bool):
        """The record at ``pos`` that the library could not read: cut off by the end of the file (a chunk:
        what its bytes hold is recovered), or broken (then it and the rest of the file are dropped)."""
        from io import BytesIO

        from mcap.data_stream import ReadDataStream
        from mcap.opcode import Opcode

        self.f.seek(pos)
        rest = self.f.read()
        if not rest:
            return  # ended at a record boundary
        if len(rest) < _RECORD_HEAD.size:
            self.problem(f"the file ends in the middle of a record header (byte {pos}, {len(rest)} bytes)")
            return
        opcode, length = _RECORD_HEAD.unpack_from(rest)
        body = rest[_RECORD_HEAD.size:]
        name = _opcode_name(opcode)
        if length <= len(body):
            self.problem(f"the {name} record at byte {pos} is broken ({type(error).__name__}: {error}); it and the "
                         f"{size - pos} bytes after it are dropped")
            return
        if opcode != Opcode.CHUNK or in_summary:
            holds_data = opcode in (Opcode.MESSAGE, Opcode.SCHEMA, Opcode.CHANNEL, Opcode.METADATA,
                                    Opcode.ATTACHMENT) and not in_summary
            self.problem(f"the file ends in the middle of a {name} record (byte {pos}: {len(body)} of its "
                         f"{length} bytes)" + (": it is lost" if holds_data else ", which holds no messages"))
            return
        where = f"the last chunk, at byte {pos}, is cut off ({len(body)} of its {length} bytes)"
        stream = ReadDataStream(BytesIO(body))
        try:
            stream.read(8 + 8 + 8 + 4)  # message start and end time, uncompressed size and CRC
            compression = stream.read_prefixed_string()
            records_length = stream.read8()
        except Exception:  # noqa: BLE001 - cut inside the chunk's own header
            self.problem(f"{where}: its messages are lost")
            return
        present = body[stream.count:stream.count + records_length]
        from mcap import stream_reader as codecs  # the modules mcap decompresses with (None if missing)
        try:
            if compression == "zstd" and codecs.zstandard is not None:
                data = codecs.zstandard.ZstdDecompressor().decompressobj().decompress(present)
            elif compression == "lz4" and codecs.lz4 is not None:  # lz4.frame
                data = codecs.lz4.LZ4FrameDecompressor().decompress(present)
            elif compression == "":
                data = present
            else:
                raise ValueError(f"compression {compression!r} not supported here")
        except Exception as e:  # noqa: BLE001
            self.problem(f"{where}: it cannot be decompressed ({type(e).__name__}: {e}): its messages are lost")
            return
        self.report.chunks += 1
        records, broken = self._split(data, where, cut=True)
        before = self.report.message_count
        for record in records:
            yield from self._record(record)
        self.problem(f"{where}: {self.report.message_count - before} messages recovered from it, the rest of it "
                     "is lost" + (f" ({broken})" if broken else ""))


def _scan(path, report: FileReport):
    path = Path(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise NotMcapError(f"cannot open {path}: {e.strerror or e}") from e
    with f:
        yield from _Scan(f, report).records()


def read_messages(path, report: Optional[FileReport] = None):
    """``(schema, channel, message)`` of every complete message of an MCAP file, damaged or not, in file order
    (the mcap library's record classes; schema None when the channel has none). Damage is described in
    ``report.problems`` as it is met, never raised; :class:`NotMcapError` if the file is not MCAP at all."""
    report = report if report is not None else FileReport(Path(path))
    schemas, channels = {}, {}
    for kind, record in _scan(path, report):
        if kind == "schema":
            schemas[record.id] = record
        elif kind == "channel":
            channels[record.id] = record
        elif kind == "message":
            channel = channels[record.channel_id]
            yield schemas.get(channel.schema_id), channel, record


def check_file(path) -> FileReport:
    """Read an MCAP file back completely: with the tolerant stream pass above (every record, every chunk's CRC),
    then, if that found no damage, through its summary and index as ``mcap``'s ``make_reader`` does, whose
    statistics and message count must agree. ``report.problems`` is empty for an intact file;
    :class:`NotMcapError` if it is not MCAP at all."""
    report = FileReport(Path(path))
    for _ in _scan(path, report):
        pass
    if report.damaged:
        return report
    from mcap.reader import make_reader
    try:
        with open(path, "rb") as f:
            reader = make_reader(f)
            summary = reader.get_summary()
            if summary is None:
                report.problems.append("no summary (an unindexed file)")
                return report
            stated = summary.statistics.message_count if summary.statistics is not None else None
            indexed = sum(1 for _ in reader.iter_messages())
    except Exception as e:  # noqa: BLE001
        report.problems.append(f"its summary or index is unreadable ({type(e).__name__}: {e})")
        return report
    found = report.message_count
    if stated is not None and stated != found:
        report.problems.append(f"its statistics count {stated} messages, {found} are in the file")
    if indexed != found:
        report.problems.append(f"its index gives {indexed} messages, {found} are in the file")
    return report


def recover(source, target, *, compression: str = "zstd", chunk_size: int = 1 << 20) -> FileReport:
    """Write every complete message of ``source`` (damaged, unterminated or intact), with its schemas, channels
    (metadata included), metadata and attachment records, into a new, complete MCAP file ``target`` (same
    header profile; ids renumbered; file order kept), which ``make_reader`` and ``rosbags`` read. Returns the
    report of ``source`` (``problems``: what was dropped; ``counts``: what ``target`` holds). Raises
    :class:`NotMcapError` if ``source`` is not MCAP, ``ValueError`` if both are the same file."""
    from mbs_ros import __version__

    source, target = Path(source), Path(target)
    if compression not in COMPRESSION:
        raise ValueError(f"compression must be one of {', '.join(COMPRESSION)}, got {compression!r}")
    if target.exists() and source.exists() and os.path.samefile(source, target):
        raise ValueError(f"{target} is the damaged file itself: write the recovered file elsewhere")
    report = FileReport(source)
    schema_ids, channel_ids = {0: 0}, {}
    tmp = target.with_name(f".{target.name}.recovering-{os.getpid()}")
    try:
        with open(tmp, "wb") as out:
            w = McapWriter(out, chunk_size=chunk_size, compression=COMPRESSION[compression])
            for kind, r in _scan(source, report):
                if kind == "header":
                    w.start(profile=r.profile, library=f"mbs_ros.recording recover/{__version__} of [{r.library}]; "
                                                       f"{LIBRARY_IDENTIFIER}")
                elif kind == "schema":
                    schema_ids[r.id] = w.register_schema(name=r.name, encoding=r.encoding, data=r.data)
                elif kind == "channel":
                    channel_ids[r.id] = w.register_channel(topic=r.topic, message_encoding=r.message_encoding,
                                                           schema_id=schema_ids.get(r.schema_id, 0),
                                                           metadata=dict(r.metadata))
                elif kind == "message":
                    w.add_message(channel_id=channel_ids[r.channel_id], log_time=r.log_time, data=r.data,
                                  publish_time=r.publish_time, sequence=r.sequence)
                elif kind == "metadata":
                    w.add_metadata(name=r.name, data=dict(r.metadata))
                elif kind == "attachment":
                    w.add_attachment(create_time=r.create_time, log_time=r.log_time, name=r.name,
                                     media_type=r.media_type, data=r.data)
            w.finish()
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return report
