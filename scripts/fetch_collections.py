"""Extract the Ansible collections the deploy uses from the pinned ``ansible`` wheel.

Galaxy is not reachable, but PyPI's ``ansible`` package ships the community collections
inside its wheel. The deploy needs one of them, ``community.crypto`` (the site CA, keys
and certificates, idempotent), for ``ansible-core`` 2.19. Installing the whole package
would put ~40,000 files into the virtualenv for that one collection, so the wheel is
downloaded with pip's hash checking and only the named collections are extracted, under
``ansible/collections/`` (git-ignored; ``ansible/ansible.cfg`` puts it on
``collections_path``). Each collection's version is checked against its MANIFEST.json.

    python scripts/fetch_collections.py [DEST]     # default: ansible/collections
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from pinned_wheel import download

#: ansible 12.x is the community package built for ansible-core 2.19 (pyproject's pin).
WHEEL_REQUIREMENT = "ansible==12.3.0"
WHEEL_SHA256 = "cd156f82fa87f7a899212b0efa9f7ca3a24d609212de9f78428a572eb01e5414"
#: namespace.name -> the version that wheel carries.
COLLECTIONS = {"community.crypto": "3.0.5"}
PREFIX = "ansible_collections/"


def _installed_version(dest: Path, name: str) -> str | None:
    manifest = dest.joinpath(PREFIX, *name.split("."), "MANIFEST.json")
    try:
        return json.loads(manifest.read_text())["collection_info"]["version"]
    except (OSError, ValueError, KeyError):
        return None


def fetch(dest: Path) -> list[str]:
    """Extract every collection of COLLECTIONS not already there at its version."""
    wanted = {n: v for n, v in COLLECTIONS.items() if _installed_version(dest, n) != v}
    if not wanted:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        wheel = download(WHEEL_REQUIREMENT, WHEEL_SHA256, Path(tmp), "fetch_collections")
        with zipfile.ZipFile(wheel) as wheel:
            for name in wanted:
                _extract(wheel, name, dest)
    for name, version in wanted.items():
        found = _installed_version(dest, name)
        if found != version:
            raise SystemExit(f"fetch_collections: {name} is {found}, expected {version}")
    return sorted(wanted)


def _extract(wheel: zipfile.ZipFile, name: str, dest: Path) -> None:
    """One collection's tree, replaced whole (a stale file of an older version goes)."""
    member_prefix = PREFIX + name.replace(".", "/") + "/"
    target = dest.joinpath(PREFIX, *name.split("."))
    partial = target.with_name(target.name + ".part")
    shutil.rmtree(partial, ignore_errors=True)
    members = [m for m in wheel.namelist() if m.startswith(member_prefix)]
    if not members:
        raise SystemExit(f"fetch_collections: {name} is not in {WHEEL_REQUIREMENT}")
    for member in members:
        relative = member[len(member_prefix):]
        if not relative or relative.endswith("/"):
            continue
        out = partial / relative
        out.parent.mkdir(parents=True, exist_ok=True)
        with wheel.open(member) as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "ansible/collections")
    done = fetch(out)
    print(f"ansible collections in {out}: "
          f"{', '.join(done) + ' extracted' if done else 'up to date'}")
