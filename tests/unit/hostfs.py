"""Host file trees kept as fixtures, and turned back into real trees for a test.

A capture's ``root/`` mirrors a host's files at their paths. Git and ``ansible-test sanity``
(no-illegal-filenames, symlinks) cannot hold such a tree as it is: sysfs paths carry ':',
sysfs is made of symbolic links, some of them dangling outside the capture, and empty
directories mean something (``/sys/firmware/efi``). So a capture is *frozen*:

- regular files stay files, with '%' and ':' in their names written as '%25' and '%3A';
- symbolic links and empty directories are listed in ``root.links``, one per line:
  ``L <host path> <link target>`` or ``D <host path>``.

:func:`materialize` rebuilds the real tree (decoded names, links, directories) in a temporary
directory, once per test session; :func:`freeze` writes a real tree in the frozen form
(``capture-host.sh`` and ``derive.py`` use it).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_ENCODE = (("%", "%25"), (":", "%3A"))
_CACHE: dict = {}


def encode(name: str) -> str:
    for raw, enc in _ENCODE:
        name = name.replace(raw, enc)
    return name


def decode(name: str) -> str:
    for raw, enc in reversed(_ENCODE):
        name = name.replace(enc, raw)
    return name


def freeze(tree: str, dest: str) -> None:
    """Write the real tree ``tree`` as the frozen tree ``dest`` (``dest`` and ``dest.links``)."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    entries = []
    for top, dirs, files in os.walk(tree):
        rel_top = os.path.relpath(top, tree)
        host_top = "/" if rel_top == "." else "/" + rel_top
        for name in sorted(dirs + files):
            path = os.path.join(top, name)
            host_path = os.path.join(host_top, name)
            if os.path.islink(path):
                entries.append("L %s %s" % (host_path, os.readlink(path)))
            elif os.path.isdir(path):
                if not os.listdir(path):
                    entries.append("D %s" % host_path)
            else:
                out = os.path.join(dest, *[encode(p) for p in host_path.strip("/").split("/")])
                os.makedirs(os.path.dirname(out), exist_ok=True)
                shutil.copyfile(path, out)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    with open(dest + ".links", "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in sorted(entries)))


def materialize(frozen: str) -> str:
    """The real tree of the frozen tree ``frozen`` (a ``root/`` folder), built once per session."""
    frozen = os.path.abspath(frozen)
    if frozen in _CACHE:
        return _CACHE[frozen]
    out = tempfile.mkdtemp(prefix="gpufleet-host-")
    atexit.register(shutil.rmtree, out, True)
    for top, _dirs, files in os.walk(frozen):
        rel = os.path.relpath(top, frozen)
        parts = [] if rel == "." else [decode(p) for p in rel.split(os.sep)]
        os.makedirs(os.path.join(out, *parts), exist_ok=True)
        for name in files:
            shutil.copyfile(os.path.join(top, name), os.path.join(out, *(parts + [decode(name)])))
    links = frozen + ".links"
    if os.path.exists(links):
        with open(links, encoding="utf-8") as handle:
            for line in handle:
                kind, _sep, rest = line.rstrip("\n").partition(" ")
                if kind == "D":
                    os.makedirs(os.path.join(out, rest.lstrip("/")), exist_ok=True)
                elif kind == "L":
                    path, _sep, target = rest.partition(" ")
                    local = os.path.join(out, path.lstrip("/"))
                    os.makedirs(os.path.dirname(local), exist_ok=True)
                    os.symlink(target, local)
    _CACHE[frozen] = out
    return out


if __name__ == "__main__":
    # python3 tests/unit/hostfs.py freeze TREE DEST   (used by capture-host.sh)
    if len(sys.argv) == 4 and sys.argv[1] == "freeze":
        freeze(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: hostfs.py freeze TREE DEST")
