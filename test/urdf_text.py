"""URDF text for tests, written out so that each test's expectations can be read from the text it loads."""

BOX = 'ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"'


def link(name, mass=None, inertia=BOX, xyz="0 0 0"):
    """A link; without ``mass`` it has no <inertial> (a massless frame)."""
    if mass is None:
        return f'<link name="{name}"/>'
    return (f'<link name="{name}"><inertial><origin xyz="{xyz}"/><mass value="{mass!r}"/><inertia {inertia}/>'
            f'</inertial></link>')


def joint(name, parent, child, jtype="revolute", axis="0 0 1", xyz="0 0 0", limit='lower="-2" upper="2" '
          'effort="10" velocity="3"'):
    lim = f"<limit {limit}/>" if limit else ""
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}"/><axis xyz="{axis}"/>{lim}</joint>')


def robot(*parts, name="r"):
    return f'<robot name="{name}">' + "".join(parts) + "</robot>"
