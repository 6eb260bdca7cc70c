# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The discovery's hardware summary kept as a local fact on the node (``<dir>/gpufleet_nvidia.fact``).

Ansible's fact gathering reads ``*.fact`` files of ``/etc/ansible/facts.d`` into
``ansible_local``. The summary is the hardware only (GPUs, OS, kernel), as JSON in the text
Ansible's ``to_nice_json`` filter writes (four spaces, sorted keys), so that a file written by the
discover role's earlier ``file`` + ``copy`` tasks is the same file: root's, mode 0644, in a folder
of mode 0755. gpu_facts writes it in its own pass, not in two more tasks on every node (issue 30).
"""

from __future__ import annotations

import json
import os

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import io
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

NAME = "gpufleet_nvidia.fact"


def summary(facts):
    """The text of the fact file for the node's ``gpufleet_nvidia`` facts."""
    os_facts = facts.get("os") or {}
    data = dict(
        gpu_count=facts.get("gpu_count"),
        gpus=[gpu.get("name") for gpu in facts.get("gpus") or []],
        # as the template "{{ os.id }} {{ os.version_id }}" made it: a missing one (Debian sid has no VERSION_ID) is empty
        os="%s %s" % (os_facts.get("id") or "", os_facts.get("version_id") or ""),
        kernel=(facts.get("kernel") or {}).get("release"),
    )
    return json.dumps(data, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def keep(module, directory, facts):
    """Write the summary of ``facts`` into ``directory`` unless it is there already, root's and 0644.

    Returns ``(changed, diff)``; in check mode nothing is written. Raises GpuFleetError, naming the option.
    """
    path = os.path.join(directory, NAME)
    text = summary(facts)
    try:
        before = io.read_file(path)
        changed = before != text
        if changed and not module.check_mode:
            io.write_file(module, path, text)  # makes a missing folder, 0755
    except GpuFleetError as exc:
        raise GpuFleetError("local_facts_dir: %s" % exc.msg, path=path)
    # as the file and copy tasks' owner, group and modes; each difference is a change, and check mode is kept
    for where, mode in ((directory, "0755"), (path, "0644")):
        if os.path.exists(where):
            wanted = module.load_file_common_arguments(dict(path=where, owner="root", group="root", mode=mode))
            changed = module.set_fs_attributes_if_different(wanted, changed)
    diff = dict(before_header=path, after_header=path, before=before or "", after=text)
    return changed, diff
