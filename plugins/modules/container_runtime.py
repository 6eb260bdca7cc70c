#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_runtime
short_description: Add the NVIDIA runtime handler to containerd, k3s, RKE2, CRI-O or Docker
version_added: "0.1.0"
description:
  - Adds (or removes) a runtime handler named C(nvidia) that runs containers through
    C(nvidia-container-runtime), in the configuration of containerd, the containerd of
    k3s / RKE2, CRI-O or Docker. This is what C(nvidia-ctk runtime configure) does, without its
    known defects (see notes).
  - The files are edited, never regenerated. TOML files keep their comments, key order,
    formatting and every key the module does not manage (tomlkit round-trip);
    C(daemon.json) keeps its other keys and its indentation.
  - B(containerd) - the CRI plugin table follows the file's top-level C(version) (none and
    no version-1 content - the version of the installed C(containerd --version));
    version 2 is C(plugins."io.containerd.grpc.v1.cri") (containerd 1.x), versions 3 and 4
    C(plugins."io.containerd.cri.v1.runtime") (containerd 2.x). The handler copies the
    default runtime (C(default_runtime_name)'s table, else C(runc), else C(crun)) so
    settings such as C(SystemdCgroup) carry over, with
    C(runtime_type = "io.containerd.runc.v2") and C(options.BinaryName).
    With I(config_mode=dropin) the drop-in holds the whole CRI plugin table (containerd
    before 2.1 replaces plugin tables from imports instead of merging them) with the main
    file's C(version), and the main file gains the C(imports) entry.
  - B(k3s / RKE2) regenerate C(config.toml) at every start, so the module edits
    C(config.toml.tmpl) (C(config-v3.toml.tmpl) where k3s runs containerd 2.x). Without a
    template, it makes one from the generated C(config.toml). A template built on
    C({{ template "base" . }}) keeps that form; only what the base does not define is
    added after it (k3s adds an C(nvidia) runtime on its own when it finds
    C(nvidia-container-runtime), and a second definition would stop containerd).
  - B(CRI-O) - C([crio.runtime.runtimes.nvidia]) with C(runtime_path) and
    C(runtime_type = "oci"), in the drop-in C(/etc/crio/crio.conf.d/99-nvidia.toml) or in
    C(crio.conf).
  - 'B(Docker) - C(runtimes.nvidia = {"path": "nvidia-container-runtime", "args": []}),
    C(default-runtime) and C(features.cdi) when asked, merged into C(daemon.json).'
  - Before anything is written, a containerd configuration is loaded by the host's
    containerd (C(containerd --config <candidate> config dump), with the candidate drop-in)
    and refused with containerd's own error if it does not load, or if the handler or the
    default runtime would be missing once containerd merged the files.
  - O(state=absent) undoes exactly what O(state=present) did. Every value the module
    replaced in a file it does not own is recorded in a comment line next to the handler
    (or in its drop-in; for Docker, whose JSON has no comments, in a state file of the
    collection's own, see notes), and put back; the drop-in, the C(imports) entry and the tables it
    created are removed.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
requirements:
  - The Python library C(tomlkit) on the managed host for every runtime but Docker
    (Debian / Ubuntu package C(python3-tomlkit); the role installs it).
options:
  runtime:
    description:
      - The container runtime whose configuration is edited.
    type: str
    required: true
    choices: [containerd, crio, docker, k3s, rke2]
  state:
    description:
      - V(present) adds or updates the handler, V(absent) removes it and undoes the module's
        other changes.
      - V(restored) puts back the files of an earlier change as they were before it - each file
        of O(restore_backups) gets its backup's content, each file of O(restore_created) is
        removed - for instance after the runtime did not come back with the change. The files are
        written where a symbolic link points (the link stays) and keep their mode and owner; a
        file that is gone comes back with its backup's mode. Nothing is planned or validated for
        the runtime; O(runtime) only names it.
    type: str
    default: present
    choices: [present, absent, restored]
  restore_backups:
    description:
      - With O(state=restored), the files to put back, each path mapped to its backup (the
        RV(backup_files) of the run to undo). Every backup must be a file on the host, else
        nothing is restored.
    type: dict
  restore_created:
    description:
      - With O(state=restored), the files to remove, those the run to undo created (the paths of
        its RV(files) whose action is V(create)). A path that is also in O(restore_backups) is put
        back instead.
    type: list
    elements: path
  config_mode:
    description:
      - V(dropin) writes a drop-in file that the main configuration imports (containerd,
        CRI-O); V(inplace) edits the main configuration file.
      - Default V(dropin) for containerd and CRI-O; k3s, RKE2 and Docker support only
        V(inplace) (their template, C(daemon.json)).
      - Switching mode moves the handler, and the other mode's changes are undone.
    type: str
    choices: [dropin, inplace]
  config_path:
    description:
      - The main configuration file.
      - Default C(/etc/containerd/config.toml), C(/etc/crio/crio.conf), C(/etc/docker/daemon.json);
        for k3s / RKE2 the template in C(/var/lib/rancher/<k3s|rke2>/agent/etc/containerd/)
        (C(config-v3.toml.tmpl) or C(config.toml.tmpl), whichever exists, else the one that
        matches the generated C(config.toml)'s version); the generated C(config.toml) is
        read from the same directory.
    type: path
  dropin_path:
    description:
      - The drop-in file with O(config_mode=dropin).
      - Default C(conf.d/99-nvidia.toml) beside O(config_path) for containerd
        (C(/etc/containerd/conf.d/99-nvidia.toml)), C(/etc/crio/crio.conf.d/99-nvidia.toml) for CRI-O.
      - For containerd, the main file imports C(<its directory>/*.toml).
      - Every path option (O(config_path), O(dropin_path), O(binary_name), O(containerd_binary))
        must be absolute and normalized; anything else is refused before a file is read.
    type: path
  runtime_name:
    description:
      - The handler's name (what a Kubernetes C(RuntimeClass) names as C(handler)).
    type: str
    default: nvidia
  binary_name:
    description:
      - The NVIDIA runtime executable.
      - Default C(/usr/bin/nvidia-container-runtime); C(nvidia-container-runtime) (looked up in
        C(PATH)) for Docker.
    type: path
  set_as_default:
    description:
      - Make the handler the default runtime (C(default_runtime_name), C(default_runtime),
        C(default-runtime)). Without it, pods select it with a C(RuntimeClass).
      - With V(false), a default the module set earlier is given back.
      - containerd uses a C(containerd.default_runtime) table (version 1 files, deprecated)
        as its default whatever C(default_runtime_name) says; with such a table, V(true) is
        refused (remove the table) rather than reported done.
    type: bool
    default: false
  enable_cdi:
    description:
      - Turn on CDI device injection (C(enable_cdi = true) on containerd's CRI plugin,
        C(features.cdi) for Docker 25 and later). CRI-O always reads CDI specs.
      - containerd 1.6 has no CDI in its CRI plugin and ignores the key; the module warns.
    type: bool
    default: false
  enable_cri:
    description:
      - containerd only. Remove the CRI plugin from C(disabled_plugins) (Docker's
        C(containerd.io) package ships C(disabled_plugins = ["cri"]), which keeps Kubernetes
        from using it). Without it, a disabled CRI plugin is reported as a warning.
    type: bool
    default: false
  config_version:
    description:
      - containerd only. The config version to write into a file that has no C(version)
        and no version-1 content, when no containerd binary tells it (2 for containerd 1.x,
        3 for 2.x).
    type: int
    choices: [2, 3]
  containerd_binary:
    description:
      - The containerd executable used to read the version and check the new configuration.
      - Default C(containerd) from C(PATH); for k3s / RKE2 their bundled one, when present.
    type: path
  validate:
    description:
      - Check a containerd configuration with C(containerd config dump) before writing it.
        Skipped (and said so in RV(validation)) when no containerd binary is found or the
        file is a Go template.
    type: bool
    default: true
  backup:
    description:
      - Keep a timestamped copy of each file before it is changed or removed.
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: One diff per file, with headers that say when a file is created or removed.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
notes:
  - Restart the runtime (or k3s / RKE2) when RV(restart_needed) is true; the module does
    not restart anything.
  - "Beyond C(nvidia-ctk) 1.20.0: C(runc) stays defined when the input has none (containerd
    1.6 and 1.7 replace their built-in runtimes by the file's, so a configuration with only
    C(nvidia) fails to start CRI with C(no corresponding runtime configured in
    `containerd.runtimes` for `containerd` `default_runtime_name = \"runc\"`)); in-place mode
    writes the runtime (1.20.0 writes nothing in place for version 2 and 3 files); the main
    file keeps its comments and order (1.20.0 re-serialises it); CRI-O in place keeps the
    rest of C(crio.conf) (1.20.0 replaces it)."
  - With the drop-in, the CRI plugin table containerd would use is copied into the drop-in,
    which overrides it - the main file's, merged with every file the main file imports, in
    containerd's order. Change those files, then run the module again.
  - Every file containerd would import (each C(imports) entry, in order; a glob matches
    dotfiles, folders and FIFOs too, as Go's C(filepath.Glob) does) must be a readable
    TOML file with the types containerd takes; otherwise the module fails naming it, before
    anything is written (containerd would not start).
  - The files of one change are written together; they are checked writable first, and
    when one still cannot be written, those written before it get their old text back.
  - O(state=absent) gives back the original file byte for byte (blank lines, the final newline,
    empty tables) when nothing but the module's own keys changed in it since O(state=present);
    the state record holds a patch for exactly that text. When the file was edited in between,
    the user's edits stay and the module's keys are taken out or given their old values (a value
    changed since is left, with a warning); the layout is then what the TOML or JSON writer
    leaves.
  - Docker's C(daemon.json) holds only keys Docker reads (and nvidia-ctk's C(args)). JSON has no
    comments, so the record of what the module replaced is kept in a state file of the
    collection's own, C(/var/lib/gpufleet.nvidia/container_runtime/docker.json) (mode 0600, in no
    folder Docker or a runtime reads), keyed by the C(daemon.json) path and O(runtime_name). It is
    written by the same atomic writer, before C(daemon.json) with O(state=present) and after it with
    O(state=absent); never in check mode; in diff mode it has a diff of its own; it is in RV(changed_files) and RV(files) (and RV(backup_files) with
    O(backup=true)) but does not set RV(restart_needed). O(state=absent) takes the record out and
    removes the file when no record is left. A C(default-runtime) or C(features.cdi) the module
    replaced is put back, and a C(daemon.json) the module created is removed when nothing else is in it.
  - No state file (or no record in it) means no record, as for an entry written by another tool, and
    O(state=absent) then removes the runtime, a C(default-runtime) naming it, and C(features.cdi)
    only when O(enable_cdi=true) is given with it. A state file that is not valid JSON or not an
    object of objects is refused, naming it and the shape expected, before anything is written
    (remove it to go on without records).
  - A C(daemon.json) written by an earlier version holds the record under the key
    C(gpufleet.nvidia.container_runtime state) of the runtime's entry. It is read as before, and
    the next run that writes (O(state=absent) included) moves it into the state file and takes it
    out of C(daemon.json).
seealso:
  - name: NVIDIA Container Toolkit - configuring runtimes
    description: What C(nvidia-ctk runtime configure) writes.
    link: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html
  - name: k3s - configuring containerd
    description: The C(config.toml.tmpl) template and its C(base) template.
    link: https://docs.k3s.io/advanced#configuring-containerd
"""

EXAMPLES = r"""
- name: Add the nvidia runtime to containerd (drop-in, RuntimeClass selects it)
  gpufleet.nvidia.container_runtime:
    runtime: containerd
  register: runtime_result
  notify: Restart containerd

- name: Make nvidia containerd's default runtime, with CDI, in the main file
  gpufleet.nvidia.container_runtime:
    runtime: containerd
    config_mode: inplace
    set_as_default: true
    enable_cdi: true
    backup: true

- name: Use Docker's containerd.io for Kubernetes too (its package disables CRI)
  gpufleet.nvidia.container_runtime:
    runtime: containerd
    enable_cri: true

- name: Configure the containerd of k3s through its template
  gpufleet.nvidia.container_runtime:
    runtime: k3s
  notify: Restart k3s

- name: Add the nvidia handler to CRI-O
  gpufleet.nvidia.container_runtime:
    runtime: crio

- name: Add the nvidia runtime to Docker and make it the default
  gpufleet.nvidia.container_runtime:
    runtime: docker
    set_as_default: true
    enable_cdi: true

- name: Remove everything the module added to containerd
  gpufleet.nvidia.container_runtime:
    runtime: containerd
    state: absent

- name: Put back what an earlier run changed (its backups), remove what it created
  gpufleet.nvidia.container_runtime:
    runtime: containerd
    state: restored
    restore_backups: "{{ runtime_result.backup_files }}"
    restore_created: "{{ runtime_result.files | selectattr('action', 'equalto', 'create') | map(attribute='path') | list }}"
"""

RETURN = r"""
msg:
  description: What was done.
  returned: always
  type: str
  sample: configured the nvidia runtime (create /etc/containerd/conf.d/99-nvidia.toml, update /etc/containerd/config.toml)
changed_files:
  description: The files written or removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/containerd/conf.d/99-nvidia.toml, /etc/containerd/config.toml]
files:
  description: Every file the module looked at and what happened to it (V(create), V(update), V(delete), V(unchanged)).
  returned: always
  type: list
  elements: dict
  sample: [{path: /etc/containerd/conf.d/99-nvidia.toml, action: create}, {path: /etc/containerd/config.toml, action: update}]
config_version:
  description: The containerd config version the handler was written for (null for CRI-O and Docker).
  returned: always
  type: int
  sample: 2
plugin_table:
  description: The containerd CRI plugin table that holds the handler (null for CRI-O and Docker).
  returned: always
  type: str
  sample: plugins."io.containerd.grpc.v1.cri"
runtime_table:
  description: Where the handler is, as a TOML table path (a JSON key path for Docker).
  returned: always
  type: str
  sample: plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia
restart_needed:
  description: Whether the runtime (or k3s / RKE2) must be restarted to use the change.
  returned: always
  type: bool
  sample: true
containerd_version:
  description: The version of the containerd binary found (null when none, or not containerd).
  returned: always
  type: str
  sample: 1.6.20
validation:
  description: Whether the candidate configuration was checked by containerd, and with what.
  returned: always
  type: dict
  sample: {ran: true, binary: /usr/bin/containerd, version: 1.6.20, command: /usr/bin/containerd --config <candidate> config dump}
backup_files:
  description: Path of each changed file -> its backup, with O(backup=true).
  returned: always
  type: dict
  sample: {/etc/containerd/config.toml: /etc/containerd/config.toml.12345.2026-01-01@00:00:00~}
diff:
  description: One before/after diff per changed file, in diff mode.
  returned: when diff mode is on and something changes
  type: list
  elements: dict
  sample:
    - before: ""
      after: "version = 2\n..."
      before_header: /etc/containerd/conf.d/99-nvidia.toml (absent)
      after_header: /etc/containerd/conf.d/99-nvidia.toml
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.config import (
    MODULE_ARGUMENT_SPEC,
    MODULE_REQUIRED_IF,
    configure,
    restore,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import HAS_TOMLKIT, TOMLKIT_IMPORT_ERROR


def main():
    module = AnsibleModule(argument_spec=MODULE_ARGUMENT_SPEC, required_if=MODULE_REQUIRED_IF, supports_check_mode=True)
    restoring = module.params["state"] == "restored"
    if not HAS_TOMLKIT and module.params["runtime"] != "docker" and not restoring:
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=TOMLKIT_IMPORT_ERROR)
    try:
        result = (restore if restoring else configure)(module.params, Host.for_module(module), module.check_mode, module._diff)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
