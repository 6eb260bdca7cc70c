"""Make the collection importable as ``ansible_collections.gpufleet.nvidia``.

The repository root is the collection root. Ansible's loader and the imports of the
modules expect it under ``<path>/ansible_collections/gpufleet/nvidia``; this links it
there in a cache folder outside the source tree and puts that on ``sys.path``.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "gpufleet", "nvidia")

if not os.path.islink(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

import ansible_collections  # noqa: E402  pylint: disable=wrong-import-position

# ``ansible_collections`` is a namespace package that the ``ansible`` distribution also
# fills; make sure our path takes part in it.
_ns = os.path.join(COLLECTIONS, "ansible_collections")
if _ns not in list(ansible_collections.__path__):
    ansible_collections.__path__.append(_ns)


import pytest  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(autouse=True, scope="session")
def _docker_state_file_of_the_session(tmp_path_factory):
    """The container_runtime module's Docker state file (``/var/lib/gpufleet.nvidia/...``) in a folder of the
    test session: a test that runs the module on this machine's root never writes this machine's /var/lib.
    A test that looks at the file points it under its own ``tmp_path`` (``docker_state_file``)."""
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import docker  # pylint: disable=import-outside-toplevel

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(docker, "STATE_FILE", str(tmp_path_factory.mktemp("var-lib") / "gpufleet.nvidia" / "docker.json"), raising=False)
        yield
