"""Robot descriptions that ship with grid-rbd (package data), so an installed package
(`pip install .`, a wheel) has a robot to run without the source tree.

    from grid_rbd.data import bundled_urdf
    path = bundled_urdf("iiwa14")             # Path to the packaged iiwa14.urdf

In the source tree `iiwa14.urdf` here is a link to `robots/iiwa14/iiwa14.urdf` (one copy);
a wheel holds the file itself.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUNDLED", "bundled_urdf"]

# The robots whose URDF is package data: name -> file in this folder.
BUNDLED: dict[str, str] = {"iiwa14": "iiwa14.urdf"}


def bundled_urdf(name: str) -> Path:
    """The packaged URDF of robot `name` (one of `BUNDLED`).

    Raises KeyError naming the bundled robots when `name` is not one of them, and
    FileNotFoundError when the package was installed without its data."""
    try:
        filename = BUNDLED[name]
    except KeyError:
        raise KeyError(f"no bundled robot {name!r}; grid-rbd ships "
                       f"{', '.join(sorted(BUNDLED))}") from None
    path = Path(__file__).resolve().parent / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: this grid-rbd was installed without its "
                                "package data; reinstall it (pip install grid-rbd)")
    return path
