"""The animation itself: frames at a fixed rate between two stamps, the robots' faces lit and drawn with matplotlib
over the base path, the base reference and the end-effector path, written as GIF (Pillow) or MP4 (ffmpeg)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from mbs_ros.analysis.reader import Recording
from mbs_ros.animate.geometry import AnimationError, RobotGeometry, _namespaces, robots
from mbs_ros.animate.poses import LinkPoses, _pose_stamps, _tf_parents, end_effector, link_poses

DEFAULT_FPS = 15.0
DEFAULT_MAX_FRAMES = 150
DEFAULT_SIZE = (6.4, 4.8)  # inches; at the default 100 dpi: 640 x 480 pixels
FORMATS = {".gif": "Pillow", ".mp4": "ffmpeg"}
_LIGHT = np.array([0.35, -0.5, 0.8]) / np.linalg.norm([0.35, -0.5, 0.8])


@dataclass
class _Drawn:
    """One robot's part of the scene: its visuals (or points), base path, reference and end effector path."""

    ns: str
    poses: LinkPoses
    robot: Optional[RobotGeometry]
    shapes: list  # (link index, T_link_shape, points (k, 3), faces, color)
    base_path: Optional[np.ndarray] = None  # (N, 3) odom positions
    base_t: Optional[np.ndarray] = None
    reference: Optional[np.ndarray] = None  # (N, 3) at base_t
    ee: Optional[int] = None  # index of the end effector frame

    def faces(self, k: int):
        """World faces and their colours at frame k."""
        out, colors = [], []
        T_links = self.poses.T[k]
        for li, T_ls, pts, faces, color in self.shapes:
            T = T_links[li] @ T_ls
            world = pts @ T[:3, :3].T + T[:3, 3]
            if isinstance(faces, np.ndarray):  # a mesh's triangles, all at once
                tri = world[faces]
                normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
                n = np.linalg.norm(normal, axis=1)
                shade = np.where(n > 1e-15, 0.45 + 0.55 * np.abs(normal @ _LIGHT) / np.maximum(n, 1e-300), 0.7)
                out.extend(tri)
                colors.extend((color[0] * x, color[1] * x, color[2] * x, color[3]) for x in shade.tolist())
                continue
            for f in faces:
                poly = world[f]
                out.append(poly)
                normal = np.cross(poly[1] - poly[0], poly[2] - poly[0])
                n = np.linalg.norm(normal)
                shade = 0.45 + 0.55 * abs(float(normal @ _LIGHT)) / n if n > 1e-15 else 0.7
                colors.append((color[0] * shade, color[1] * shade, color[2] * shade, color[3]))
        return out, colors

    def points(self) -> np.ndarray:
        """Every point the scene holds over the run (for the view's limits)."""
        chunks = [self.poses.T[:, :, :3, 3].reshape(-1, 3)]
        for li, T_ls, pts, _faces, _color in self.shapes:
            T = self.poses.T[:, li] @ T_ls  # (F, 4, 4)
            chunks.append((pts @ T[:, :3, :3].transpose(0, 2, 1) + T[:, None, :3, 3]).reshape(-1, 3))
        for extra in (self.base_path, self.reference):
            if extra is not None:
                chunks.append(extra[np.all(np.isfinite(extra), axis=1)])
        return np.vstack(chunks)


def frame_times(start_ns: int, end_ns: int, fps: float = DEFAULT_FPS, max_frames: int = DEFAULT_MAX_FRAMES):
    """``(stamps (F,) int64, speed)``: every 1/fps s of the run when that is at most ``max_frames`` frames
    (speed 1: real time), else ``max_frames`` frames evenly from start to end, played ``speed`` times faster."""
    if fps <= 0 or max_frames < 1:
        raise AnimationError(f"fps must be > 0 and max_frames >= 1, got {fps} and {max_frames}")
    duration = max(0, int(end_ns) - int(start_ns)) * 1e-9
    n = int(math.floor(duration * fps + 1e-9)) + 1
    if n <= max_frames:
        return start_ns + np.round(np.arange(n) / fps * 1e9).astype(np.int64), 1.0
    stamps = np.round(np.linspace(start_ns, end_ns, max_frames)).astype(np.int64)
    return stamps, (duration / (max_frames - 1)) * fps if max_frames > 1 else 1.0


@dataclass
class AnimationResult:
    path: Path
    frames: int
    fps: float
    speed: float  # simulation seconds per second of the animation
    size: Tuple[int, int]  # pixels
    sources: Dict[str, str]  # ns -> where the poses came from
    drawn_as: Dict[str, str]  # ns -> "shapes from …" or "frames as points"


def _writer(path: Path, fps: float):
    from matplotlib import animation

    suffix = path.suffix.lower()
    if suffix == ".gif":
        return animation.PillowWriter(fps=fps)
    if suffix == ".mp4":
        if not animation.FFMpegWriter.isAvailable():
            import matplotlib
            raise AnimationError(
                f"{path}: writing .mp4 needs ffmpeg, which is not on PATH (matplotlib's FFMpegWriter looks for "
                f"{matplotlib.rcParams['animation.ffmpeg_path']!r}). Install it (e.g. apt-get install ffmpeg) or "
                "write a .gif instead (Pillow, no ffmpeg needed)")
        return animation.FFMpegWriter(fps=fps, codec="h264", extra_args=["-pix_fmt", "yuv420p"])
    raise AnimationError(f"{path}: unknown animation format {suffix or '(no suffix)'!r}: write .gif (Pillow) or "
                         ".mp4 (ffmpeg)")


def _set(line, xyz: np.ndarray) -> None:
    """A 3D line's points (n, 3); NaN rows break it (mplot3d wants arrays for that)."""
    xyz = np.asarray(xyz, dtype=float).reshape(-1, 3)
    line.set_data_3d(xyz[:, 0].copy(), xyz[:, 1].copy(), xyz[:, 2].copy())


def animate(rec: Recording, out, *, model: Optional[str] = None, fps: float = DEFAULT_FPS,
            max_frames: int = DEFAULT_MAX_FRAMES, dpi: float = 100.0, size: Tuple[float, float] = DEFAULT_SIZE,
            view: Tuple[float, float] = (25.0, -60.0), source: str = "auto",
            notes: Optional[List[str]] = None) -> AnimationResult:
    """Write the animation of every robot in ``rec`` to ``out`` (``.gif`` or ``.mp4``); see the module
    docstring. ``model``: ``--model`` (a scenario or a model file) for robots without robot_description in the
    file; ``source``: see :func:`link_poses`. Notes (what was drawn how) go to ``notes`` (default
    ``rec.notes``). :class:`AnimationError` when nothing can be drawn or the format cannot be written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    from mbs_ros.analysis.series import base_tracking
    from mbs_ros.animate.world import world_poses, world_shapes

    out = Path(out)
    notes = rec.notes if notes is None else notes
    writer = _writer(out, fps)  # fails before any work for a format that cannot be written
    geometry = robots(rec, model, notes)
    namespaces = sorted(set(_namespaces(rec)) | set(geometry))
    if not namespaces and (rec.tf or rec.tf_static):  # /tf alone: a robot per frame prefix
        namespaces = sorted({"/" + f.rsplit("/", 1)[0] for f in _tf_parents(rec) if "/" in f}) or [""]
    # the time span: every stamp a pose can change at
    spans = [s for ns in namespaces if (s := _pose_stamps(rec, ns, geometry.get(ns))) is not None and len(s)]
    world = world_shapes(rec)  # the contact world's ground, static shapes and free objects (world/markers)
    spans += [w.stamps for w in world if w.moves]
    if not spans:
        raise AnimationError(f"{rec.path}: nothing to animate: no /tf, no <ns>/odom and no <ns>/joint_states "
                             f"(topics: {', '.join(sorted(rec.topics)) or 'none'})")
    start, end = min(int(s[0]) for s in spans), max(int(s[-1]) for s in spans)
    stamps, speed = frame_times(start, end, fps, max_frames)
    scene: List[_Drawn] = []
    sources, drawn_as = {}, {}
    for ns in namespaces:
        robot = geometry.get(ns)
        poses = link_poses(rec, ns, stamps, robot, source)
        if poses is None:
            if robot is not None or ns in rec.odom or ns in rec.joint_states:
                notes.append(f"{ns or '/'}: no /tf frames and no {ns}/odom or joint_states to pose "
                             f"{'its links' if robot else 'it'}: not drawn")
            continue
        label = ns or "/"
        shapes = []
        if robot is not None:
            index = {f: i for i, f in enumerate(poses.frames)}
            lost = sorted({v.link for v in robot.visuals if v.link not in index})
            for v in robot.visuals:
                if v.link in index:
                    pts, faces = v.geometry()
                    shapes.append((index[v.link], v.T, pts, faces, v.color))
            if lost:
                notes.append(f"{label}: links {', '.join(lost)} are not in {poses.source}: not drawn")
            drawn_as[ns] = f"shapes from {robot.source}"
        else:
            drawn_as[ns] = "frames as points"
            what = "link frames of /tf as points" if poses.source.startswith("/tf") else "its base (odom) as a point"
            notes.append(f"{label}: no {ns}/robot_description in the file and no --model: {what} (record "
                         f"robot_description, or pass --model SCENARIO|MODEL_FILE, for the link shapes)")
        sources[ns] = poses.source
        d = _Drawn(ns, poses, robot, shapes)
        odom = rec.odom.get(ns)
        if odom is not None and len(odom) and np.ptp(odom[:, :3], axis=0).max() > 1e-6:
            d.base_path, d.base_t = odom[:, :3], (rec.odom_stamps[ns] - rec.t0()) * 1e-9
            if ns in rec.base_reference:
                bt = base_tracking(rec, ns)
                if bt is not None:
                    d.reference = bt.p_ref
        if len(poses.frames) > 1 and poses.parent:
            d.ee = poses.index(end_effector(poses))
        scene.append(d)
    if world:
        limit = None  # a plane is cut to the extent of the robots and the free objects' paths
        parts = [d.points() for d in scene] + [w.T[:, :3, 3] for w in world if w.moves]
        if parts:
            pts = np.vstack(parts)
            limit = ((pts.min(axis=0) + pts.max(axis=0)) / 2.0, max(float(np.ptp(pts, axis=0).max()), 0.5))
        posed = world_poses(world, stamps, rec.t0(), limit)
        scene.append(_Drawn("world", posed[0], None, posed[1]))
        sources["world"], drawn_as["world"] = posed[0].source, f"{len(world)} shape{'s' * (len(world) != 1)}"
        moving = sum(w.moves for w in world)
        notes.append(f"world: {len(world)} shape{'s' * (len(world) != 1)} from world/markers, {moving} moving "
                     "(the free objects)")
    if not scene:
        raise AnimationError(f"{rec.path}: nothing to animate (see the notes)")

    # the view: every point of every frame, equal scale on the three axes
    pts = np.vstack([d.points() for d in scene])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    span = hi - lo
    extent = max(float(span.max()), 0.2)
    half = np.maximum(span, 0.25 * extent) / 2.0 + 0.06 * extent
    centre = (lo + hi) / 2.0
    fig = Figure(figsize=size, dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((-0.03, 0.0, 1.06, 0.94), projection="3d")
    ax.set_xlim(centre[0] - half[0], centre[0] + half[0])
    ax.set_ylim(centre[1] - half[1], centre[1] + half[1])
    ax.set_zlim(centre[2] - half[2], centre[2] + half[2])
    ax.set_box_aspect(tuple(half), zoom=0.96)
    ax.set(xlabel="x [m]", ylabel="y [m]", zlabel="z [m]")
    for axis in (ax.xaxis, ax.yaxis, ax.zaxis):
        axis.label.set_fontsize(8)
    ax.tick_params(labelsize=7)
    ax.view_init(elev=view[0], azim=view[1])
    # the links first, the paths over them: a base path runs inside the base's box, where it would never show
    ax.computed_zorder = False
    polys = Poly3DCollection([], edgecolors=(0.1, 0.1, 0.1, 0.25), linewidths=0.3, zorder=1)
    ax.add_collection3d(polys)
    artists = []
    tick = 0.08 * extent
    for i, d in enumerate(scene):
        color = f"C{i % 10}"
        a = {}
        if d.base_path is not None:
            ax.plot(*d.base_path.T, color="0.5", lw=0.8, ls=":", zorder=4)
            a["trail"], = ax.plot([], [], [], color=color, lw=1.5, zorder=5, label=f"{d.ns or '/'} base path")
            if d.reference is not None:
                ok = np.all(np.isfinite(d.reference), axis=1)
                ax.plot(*d.reference[ok].T, color="k", lw=0.8, ls="--", zorder=4,
                        label=f"{d.ns or '/'} base reference")
                a["ref"], = ax.plot([], [], [], "kx", ms=7, mew=1.5, zorder=6)
        if d.ee is not None:
            name = d.poses.frames[d.ee]
            a["ee"], = ax.plot([], [], [], color="tab:red", lw=1.0, alpha=0.8, zorder=5,
                               label=f"end effector ({name})")
        if not d.shapes:
            a["links"], = ax.plot([], [], [], "-", color=color, lw=1.5, marker="o", ms=3, zorder=3)
            a["triad"] = [ax.plot([], [], [], color=c, lw=1.5, zorder=3)[0]
                          for c in ("tab:red", "tab:green", "tab:blue")]
        artists.append(a)
    if any(ax.get_legend_handles_labels()[1]):
        ax.legend(loc="upper right", fontsize=7, frameon=False)
    what = ", ".join(f"{d.ns or '/'}: {drawn_as[d.ns]}; poses from {sources[d.ns]}" for d in scene)
    fig.text(0.99, 0.985, f"{rec.path.name}", ha="right", va="top", fontsize=7, color="0.3")
    fig.text(0.99, 0.955, what if len(what) < 110 else what[:107] + "…", ha="right", va="top", fontsize=6,
             color="0.4")
    clock = fig.text(0.01, 0.985, "", ha="left", va="top", fontsize=11, family="monospace")
    suffix = "" if abs(speed - 1.0) < 1e-6 else f"  (×{speed:.2g} speed)"

    def draw(k: int) -> None:
        faces, colors = [], []
        for d, a in zip(scene, artists):
            t = d.poses.t[k]
            f, c = d.faces(k)
            faces += f
            colors += c
            if "trail" in a:
                n = int(np.searchsorted(d.base_t, t, side="right"))
                _set(a["trail"], d.base_path[:max(n, 1)])
                if "ref" in a:
                    p = d.reference[max(n - 1, 0)]
                    _set(a["ref"], p[None])
            if "ee" in a:
                p = d.poses.T[:k + 1, d.ee, :3, 3]
                _set(a["ee"], p)
            if "links" in a:
                T = d.poses.T[k]
                xyz = []
                for j, frame in enumerate(d.poses.frames):
                    xyz.append(T[j, :3, 3])
                    if frame in d.poses.parent:
                        xyz += [T[d.poses.index(d.poses.parent[frame]), :3, 3], np.full(3, np.nan)]
                    else:
                        xyz.append(np.full(3, np.nan))
                _set(a["links"], np.array(xyz))
                for axis, line in enumerate(a["triad"]):
                    o = T[0, :3, 3]
                    e = o + tick * T[0, :3, axis]
                    _set(line, np.array([o, e]))
        if faces:
            # one array, every face padded to the longest by repeating its last corner (the same polygon):
            # mplot3d pads a ragged list with uninitialised memory, and projects it (overflow warnings)
            width = max(len(f) for f in faces)
            padded = np.array([f if len(f) == width else np.vstack([f, np.repeat(f[-1:], width - len(f), 0)])
                               for f in faces])
            polys.set_verts(padded)
            polys.set_facecolor(colors)
        polys.set_visible(bool(faces))
        clock.set_text(f"t = {scene[0].poses.t[k]:6.2f} s{suffix}")

    with writer.saving(fig, str(out), dpi):
        for k in range(len(stamps)):
            draw(k)
            writer.grab_frame()
    w, h = fig.canvas.get_width_height()
    return AnimationResult(out, len(stamps), fps, speed, (int(w), int(h)), sources, drawn_as)
