#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_driver
short_description: Install a pinned NVIDIA driver the way each OS packages it, or verify a pre-installed one
version_added: 0.1.0
description:
  - "With O(method=package), installs the NVIDIA driver at a declared version from the OS's own
    channel and pins it there: Debian 12 / 13 from Debian's C(non-free) archive (C(contrib) for the
    open kernel module and C(nvidia-persistenced), C(non-free-firmware) for the GSP firmware),
    Ubuntu 22.04 / 24.04 from Canonical's server driver packages in C(restricted), RHEL, Rocky
    Linux and AlmaLinux 8 / 9 from NVIDIA's CUDA repository and its C(nvidia-driver) module
    streams."
  - "Debian: the distribution entries of the apt sources (one-line C(sources.list) or deb822
    C(.sources)) get the missing components, editing only their component lists, then C(apt-get
    update). A headless package set is installed -- C(nvidia-kernel-dkms) or
    C(nvidia-open-kernel-dkms) with its C(-support) package, C(firmware-nvidia-gsp), C(nvidia-smi),
    C(libcuda1), C(libnvidia-ml1), C(libnvidia-cfg1) and the libraries they need at the same
    version, C(nvidia-persistenced) and C(nvidia-modprobe) at theirs -- not the C(nvidia-driver)
    metapackage, which pulls in Xorg."
  - "Ubuntu: C(nvidia-headless-no-dkms-<branch>-server[-open]), C(nvidia-utils-<branch>-server),
    C(libnvidia-compute-<branch>-server) and the rest of the set at one version, with Canonical's
    precompiled signed kernel modules C(linux-modules-nvidia-<branch>-server[-open]-<kernel>) when
    they exist for the running kernel and carry that version, C(nvidia-dkms-<branch>-server[-open])
    otherwise (see O(kernel_modules))."
  - "RHEL family: the stream C(nvidia-driver:<branch>-dkms) (proprietary) or
    C(nvidia-driver:<branch>-open), then C(nvidia-driver-cuda) with C(kmod-nvidia-latest-dkms) or
    C(kmod-nvidia-open-dkms), every package at the exact version."
  - "Pinning that holds: on apt hosts an apt preferences file pins every package at its version
    (priority 1001), the packages are held (C(apt-mark hold)) and listed in unattended-upgrades'
    C(Package-Blacklist), so that no automatic upgrade can leave the libraries at another version
    than the loaded kernel module ('driver/library version mismatch'); on RHEL each package is
    locked with C(dnf versionlock) and the branch's stream stays enabled."
  - "Changing O(version) or O(flavor) moves the pin, releases the holds, installs the new
    packages and removes (purges) those of the old driver that have no place in the new one, in
    one transaction; other packages of the old driver (for example C(libnvidia-encode1)) move to
    the new version when the archive has it there."
  - "nouveau is blacklisted in C(/etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf) and the
    initramfs is regenerated when the host has initramfs tooling and an initramfs for the running
    kernel; the result says when it was not, and why."
  - "A version that is malformed, or that the repositories do not carry, fails before anything
    changes, listing the versions that are available. When the apt sources still lack the
    components, the versions are read through a temporary apt configuration holding the edited
    sources, so the host's configuration is only changed once the version is known to exist."
  - "Every option is checked before anything is read, in check mode too: a value that is not what
    its option takes (a version of other than ASCII digits, a O(cuda_repo_baseurl) with a
    whitespace, control character or comma) is refused, naming the option and the value. A name
    or version the package manager answered that would break the pins, the unattended-upgrades
    blacklist or a command line (a new line, a space, a leading C(-)) is refused before any change."
  - "A run that fails after its first change (C(apt-get install) or C(dnf install) failing, a file
    that cannot be written) puts back, before failing, what it changed since the packages last
    moved: the files it wrote or removed, byte for byte and with their modes (the ones it created
    are removed), and the holds, version locks and module stream it released; the failure says
    what was put back. Once the packages moved, the pins and files that describe them stay."
  - "O(method=preinstalled) never installs or removes anything: it reports the driver it finds
    (its version, flavour and where it came from) and whether it drifted from O(version) and
    O(flavor); it always reports C(changed=false)."
  - "C(reboot_required) is true when the loaded kernel module is not the installed driver, or no
    nvidia module is loaded at all; the reason says which (in a container: 'module not loaded',
    the container having no kernel of its own to load it into)."
  - "Hosts whose GPUs are joined by NVSwitches (HGX and DGX boards; PCI class 0x0680 devices of
    vendor 0x10de in sysfs) need NVIDIA's fabric manager at exactly the driver's version, running
    before CUDA work starts (see O(fabric_manager)). With O(method=package) its packages join the
    driver's set -- installed at the driver's exact version from the same repository, pinned,
    held and kept from unattended-upgrades (apt) or version-locked (dnf) -- and the
    C(nvidia-fabricmanager) service is enabled, and started when the driver of its version is
    loaded (otherwise it starts at the next boot). Ubuntu - C(nvidia-fabricmanager-<branch>) and
    C(libnvidia-nscq-<branch>) from Canonical's C(multiverse), added to the sources like
    C(restricted). RHEL family - C(nvidia-fabric-manager) and C(libnvidia-nscq-<branch>) before
    R580, C(nvidia-fabricmanager) and C(libnvidia-nscq) from R580, from the CUDA repository.
    Debian - Debian's archive does not package the fabric manager; the module takes NVIDIA's
    packages (C(nvidia-fabricmanager-<branch>) before R580, C(nvidia-fabricmanager) from R580)
    when an apt source carries them at the driver's version, and otherwise fails before any
    change."
  - "With a branch as O(version) and the fabric manager needed, the newest release of the branch
    that the fabric manager also exists at is chosen (a note says when that is not the newest
    release); a release without a fabric manager at its version fails before any change."
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  method:
    description:
      - V(package) installs and pins the driver; V(preinstalled) only verifies a driver installed
        by other means (an image, a C(.run) file, the GPU Operator's host driver) and changes nothing.
    type: str
    choices: [package, preinstalled]
    default: package
  state:
    description:
      - V(present) installs the driver at O(version); V(absent) removes (purges) its packages, the
        holds, the pin and the unattended-upgrades entry, and the nouveau blacklist.
      - V(absent) is refused with O(method=preinstalled).
    type: str
    choices: [present, absent]
    default: present
  version:
    description:
      - The driver version, a full release (V(535.261.03)) or a branch (V(580), the newest release
        of the branch the repositories carry; V(580.95) the newest 580.95.x).
      - Required with O(method=package) and O(state=present). With O(method=preinstalled), the
        version the installed driver is compared with.
    type: str
  flavor:
    description:
      - The kernel module flavour. V(open) or V(proprietary); V(auto) chooses what the host's GPUs
        need (open for Blackwell and Grace Hopper, proprietary for GPUs older than Turing) and
        otherwise NVIDIA's default for the branch (open from R560 on).
      - With O(method=preinstalled), only V(open) and V(proprietary) are compared.
    type: str
    choices: [auto, open, proprietary]
    default: auto
  kernel_modules:
    description:
      - Where the kernel module comes from. V(dkms) builds it on the host (Debian and RHEL always
        do); V(precompiled) takes Canonical's signed modules for the running kernel (Ubuntu only);
        V(auto) takes precompiled modules on Ubuntu when they carry the chosen version, DKMS
        otherwise.
    type: str
    choices: [auto, precompiled, dkms]
    default: auto
  kernel_headers:
    description:
      - With DKMS, also install the running kernel's headers (C(linux-headers-<kernel>) and, on
        Debian, the flavour's C(linux-headers-<flavour>) metapackage; C(kernel-devel-<kernel>) on
        RHEL) when the repositories have them, so that DKMS can build the module.
    type: bool
    default: true
  manage_sources:
    description:
      - On apt hosts, add the components the driver needs (Debian C(contrib non-free
        non-free-firmware), Ubuntu C(restricted)) to the distribution entries of the apt sources
        that lack them. Off, the sources are left as they are (a local mirror, for instance).
    type: bool
    default: true
  update_cache:
    description:
      - On apt hosts, run C(apt-get update) before reading the versions when the lists are older than
        O(cache_valid_time) (never in check mode). Updating the lists does not count as a change.
    type: bool
    default: true
  cache_valid_time:
    description:
      - Seconds the apt lists stay fresh enough for O(update_cache).
    type: int
    default: 3600
  unattended_upgrades_blacklist:
    description:
      - On apt hosts, write C(/etc/apt/apt.conf.d/51gpufleet-nvidia-driver) listing the driver's
        packages in C(Unattended-Upgrade::Package-Blacklist) (it takes effect whenever
        unattended-upgrades is installed).
    type: bool
    default: true
  blacklist_nouveau:
    description:
      - Blacklist the nouveau driver (C(blacklist nouveau), C(options nouveau modeset=0)) and
        regenerate the initramfs when the file changes.
    type: bool
    default: true
  cuda_repo_baseurl:
    description:
      - RHEL family only. The CUDA repository to install from; defaults to NVIDIA's
        C(https://developer.download.nvidia.com/compute/cuda/repos/rhel<major>/<arch>). Point it at
        a mirror for air-gapped hosts.
      - An C(http), C(https) or C(file) URL of printable ASCII, without whitespace, control
        characters or commas (dnf reads a comma as the start of a second URL).
    type: str
  fabric_manager:
    description:
      - NVIDIA's fabric manager (service C(nvidia-fabricmanager)) and its NVSwitch library
        (C(libnvidia-nscq)), at exactly the driver's version.
      - V(auto) manages them where the host has NVSwitch devices (read from sysfs as
        M(gpufleet.nvidia.gpu_facts) reads them) and leaves hosts without any as they are;
        V(always) manages them on any host; V(never) never installs, removes or checks them (a note
        says so on a host with NVSwitches, where CUDA then fails until a fabric manager runs).
      - With O(method=package) and O(state=present) the packages are installed and pinned with the
        driver and the service is enabled and started (not in a container or on a host without
        systemd, where the result says why). With O(state=absent) they are purged with the
        driver. With O(method=preinstalled) nothing changes; a fabric manager that is missing, at
        another version than the driver, or whose service is not enabled and active is reported
        as drift.
    type: str
    choices: [auto, always, never]
    default: auto
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
    details:
      - The plan (C(plan)) lists every command and file change that would happen. When the apt
        sources lack the components, check mode reads the archive through a temporary apt
        configuration in the module's temporary directory; the host's apt lists are not refreshed.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details:
      - The packages before and after (name, version, held; the fabric manager's among them), and
        each file (sources, pin, unattended-upgrades, nouveau blacklist, repository) before and
        after. The service commands are in C(plan).
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
notes:
  - "Debian 12 carries one proprietary branch (535) in two releases, the point release's and
    C(bookworm-security)'s; its open kernel module only in the point release's version. Debian 13
    carries 550.163.01 for both flavours. A version or flavour Debian does not carry fails with the
    list of those it does."
  - "Ubuntu's precompiled modules follow the kernel: after a kernel upgrade, run the module again
    so that it picks the modules for the new kernel (or DKMS when they carry another driver
    version). DKMS rebuilds the module for new kernels by itself."
  - "The RHEL family needs DKMS from EPEL (and CodeReady Builder / CRB); the module fails before
    any change when C(dkms) is neither installed nor available."
  - "The temporary apt configuration and the RHEL C(--repofrompath) query contact the archive
    before anything is written; with no network to it, the module fails before any change."
  - "The fabric manager is not started while the loaded kernel module is of another version than
    the driver installed (it would exit at once): C(nvidia-fabricmanager) is enabled and starts
    with the reboot that C(reboot_required) asks for. A masked C(nvidia-fabricmanager) fails the
    module before any change. NVLink 5 systems (GB200 NVL72) need more than this (C(nvlsm),
    C(nvidia-imex), C(libnvsdm)); the module does not install those."
seealso:
  - name: Debian wiki, NvidiaGraphicsDrivers
    description: Debian's packaging of the driver.
    link: https://wiki.debian.org/NvidiaGraphicsDrivers
  - name: Ubuntu Server, NVIDIA drivers installation
    description: Canonical's server driver packages and precompiled modules.
    link: https://documentation.ubuntu.com/server/how-to/graphics/install-nvidia-drivers/
  - name: NVIDIA Driver Installation Guide
    description: The CUDA repository, the module streams and version locking on RHEL.
    link: https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/
  - name: NVIDIA Fabric Manager User Guide
    description: What the fabric manager does on NVSwitch systems, its packages and its service.
    link: https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/
  - module: gpufleet.nvidia.gpu_facts
  - module: gpufleet.nvidia.preflight
"""

EXAMPLES = r"""
- name: Install the newest 580 driver with the open kernel modules, pinned
  gpufleet.nvidia.nvidia_driver:
    version: "580"
    flavor: open

- name: Install Debian 12's 535.261.03 (proprietary), pinned, held, out of unattended-upgrades
  gpufleet.nvidia.nvidia_driver:
    version: 535.261.03
    flavor: proprietary

- name: See what a move to another version would do, without doing it
  gpufleet.nvidia.nvidia_driver:
    version: 535.309.01
    flavor: proprietary
  check_mode: true
  diff: true
  register: plan
- ansible.builtin.debug:
    var: plan.plan

- name: Verify the driver baked into the image, change nothing
  gpufleet.nvidia.nvidia_driver:
    method: preinstalled
    version: 580.95.05
    flavor: open
  register: preinstalled
- ansible.builtin.debug:
    msg: "{{ preinstalled.drift_detail }}"
  when: preinstalled.drift

- name: Install from a CUDA repository mirror on Rocky Linux 9
  gpufleet.nvidia.nvidia_driver:
    version: "570"
    flavor: open
    cuda_repo_baseurl: https://mirror.example.com/cuda/rhel9/x86_64

- name: Install 570 on an HGX node, with the fabric manager at the same version (auto finds the NVSwitches)
  gpufleet.nvidia.nvidia_driver:
    version: "570"
    flavor: open
  register: driver
- ansible.builtin.debug:
    msg: "{{ driver.fabric_manager.detail }}"
  when: driver.fabric_manager.required

- name: Install the driver alone, even on a host with NVSwitches (its fabric manager comes from elsewhere)
  gpufleet.nvidia.nvidia_driver:
    version: 535.261.03
    flavor: proprietary
    fabric_manager: never

- name: Remove the driver
  gpufleet.nvidia.nvidia_driver:
    state: absent
"""

RETURN = r"""
msg:
  description: What was found or done, in one line.
  returned: always
  type: str
  sample: "NVIDIA driver 535.309.01 (proprietary) installed and pinned; reboot required: module not loaded: ..."
method:
  description: The method used.
  returned: always
  type: str
  sample: package
state:
  description: The state asked for.
  returned: always
  type: str
  sample: present
os:
  description: The OS the backend was chosen for.
  returned: always
  type: dict
  sample: {id: debian, version_id: "12", codename: bookworm, family: debian}
backend:
  description: The backend that planned the change (V(apt-debian), V(apt-ubuntu), V(dnf)); null for O(method=preinstalled).
  returned: always
  type: str
  sample: apt-debian
version:
  description:
    - The driver version installed (O(method=package)), or found (O(method=preinstalled); null when it
      could not be read).
  returned: always
  type: str
  sample: 535.309.01
version_requested:
  description: O(version) as parsed.
  returned: when O(method=package)
  type: str
  sample: "535"
version_source:
  description:
    - Where the pre-installed driver's version was read, the driver on disk first, as gpu_facts'
      C(driver.found) reads it (V(modinfo), V(package <name>), V(nvidia-smi), V(loaded module)).
  returned: when O(method=preinstalled)
  type: str
  sample: modinfo
flavor:
  description: The kernel module flavour installed, or found.
  returned: always
  type: str
  sample: proprietary
available_versions:
  description: The versions of the flavour that the repositories carry (for the branch on Ubuntu).
  returned: when O(method=package) and O(state=present)
  type: list
  elements: str
  sample: [535.261.03, 535.309.01]
packages:
  description: The driver's packages and the exact version each is installed and pinned at.
  returned: when O(method=package)
  type: dict
  sample: {libcuda1: 535.309.01-0+deb12u1, nvidia-persistenced: 535.171.04-1~deb12u1}
package_changes:
  description:
    - What moves. apt hosts - C(install) (C(name=version)), C(remove), C(hold), C(unhold); RHEL -
      C(install), C(remove), C(lock), C(unlock).
  returned: when O(method=package)
  type: dict
  sample: {install: ["libcuda1=535.309.01-0+deb12u1"], remove: [], hold: [libcuda1], unhold: [libcuda1]}
pin_file:
  description: The apt preferences file, or dnf's versionlock list.
  returned: when O(method=package)
  type: str
  sample: /etc/apt/preferences.d/gpufleet-nvidia-driver.pref
kernel_modules:
  description: Where the kernel module comes from (V(dkms) or V(precompiled)).
  returned: when O(method=package)
  type: str
  sample: dkms
nouveau:
  description: The nouveau blacklist file, and what became of the initramfs.
  returned: when O(method=package)
  type: dict
  sample:
    blacklist_file: /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf
    blacklisted: true
    initramfs: "not regenerated: /boot/initrd.img-6.1.0-28-amd64 does not exist (no initramfs for the running kernel 6.1.0-28-amd64)"
kernel_module:
  description:
    - The nvidia kernel module - loaded (C(loaded), C(loaded_version), C(loaded_flavor)), what modinfo
      finds for the running kernel (C(installed_version), C(installed_flavor)), whether nouveau is
      loaded, and C(state) (V(current), V(outdated), V(not_loaded), V(loaded_removed), V(absent))
      with its C(detail).
  returned: always
  type: dict
  sample:
    loaded: false
    loaded_version: null
    installed_version: null
    state: not_loaded
    detail: "module not loaded: this is a podman container, which shares its host's kernel ..."
reboot_required:
  description: Whether the host needs a reboot for the installed driver to run (see C(reboot_reason)).
  returned: always
  type: bool
  sample: true
reboot_reason:
  description: Why a reboot is needed; null when none is.
  returned: always
  type: str
  sample: "module not loaded: no nvidia module is built for the running kernel yet ..."
in_container:
  description: Whether the module ran in a container (a reboot there would not load any module).
  returned: always
  type: bool
  sample: false
container:
  description: The kind of container (V(podman), V(docker), ...), or null.
  returned: always
  type: str
  sample: podman
plan:
  description: The commands run and files written, in order (what would run, in check mode); empty when nothing changes.
  returned: always
  type: list
  elements: str
  sample:
    - "apt-mark unhold libcuda1 nvidia-smi"
    - "update /etc/apt/preferences.d/gpufleet-nvidia-driver.pref (pin the driver's packages to their versions)"
    - "apt-get install -y -q --no-install-recommends --allow-downgrades ... libcuda1=535.309.01-0+deb12u1 ..."
    - "apt-mark hold libcuda1 nvidia-smi"
executed:
  description: The steps actually carried out (empty in check mode or when nothing changed).
  returned: always
  type: list
  elements: str
  sample: ["apt-mark unhold libcuda1 nvidia-smi"]
notes:
  description: What the module could not do or chose on its own, and why.
  returned: always
  type: list
  elements: str
  sample: ["linux-headers-6.18.44 is not in the repositories: DKMS cannot build the nvidia module for the running kernel 6.18.44"]
drift:
  description:
    - With O(method=preinstalled), whether the installed driver differs from O(version) or O(flavor),
      or, where the fabric manager is needed, whether it is missing, at another version than the
      driver, or its service is not enabled and active.
  returned: always
  type: bool
  sample: false
drift_detail:
  description: How it differs.
  returned: always
  type: list
  elements: str
  sample: ["version 535.261.03, declared 535.309.01", "fabric manager 535.261.03, the driver 535.309.01 (they must be the same version)"]
fabric_manager:
  description:
    - NVIDIA's fabric manager on this host. C(mode) is O(fabric_manager); C(required) whether this
      run manages it, C(reason) why (C(this host has 4 NVSwitches), C(no NVSwitch on this host),
      C(fabric_manager is always)), C(nvswitch_count) the NVSwitches found in sysfs.
    - C(packages) are its packages and the versions they are installed and pinned at (O(method=package)),
      or the package that owns it (O(method=preinstalled)); C(installed_version) the version found
      before the run (null when none, or not looked for); C(wanted_version) the driver's version it
      must have (null when not required).
    - C(service) is the C(nvidia-fabricmanager) unit (C(name), C(managed), C(enabled) and C(active)
      as systemctl says them, C(detail)), null when not read; C(managed) is false, with the reason
      in C(detail), in a container or without systemd. After a real run, the state after it.
    - C(action) lists what was (in check mode, would be) done - V(none), or some of V(install),
      V(update), V(remove), V(enable), V(start), V(restart); V(verify) with O(method=preinstalled).
      C(detail) says it in one line.
  returned: always
  type: dict
  sample:
    mode: auto
    required: true
    reason: this host has 4 NVSwitches
    nvswitch_count: 4
    packages: {libnvidia-nscq-580: 580.173.02-0ubuntu0.24.04.1, nvidia-fabricmanager-580: 580.173.02-0ubuntu0.24.04.1}
    installed_version: null
    wanted_version: 580.173.02
    service: {name: nvidia-fabricmanager, managed: true, enabled: enabled, active: active, detail: "enabled, active"}
    action: install, enable, start
    detail: "this host has 4 NVSwitches: fabric manager 580.173.02 installed and pinned, enabled, started (nvidia-fabricmanager enabled, active)"
source:
  description: Where the pre-installed driver came from (V(package), V(preinstalled)).
  returned: when O(method=preinstalled)
  type: str
  sample: preinstalled
package:
  description: The package that owns the pre-installed driver's files, if one does.
  returned: when O(method=preinstalled)
  type: dict
  sample: {manager: dpkg, name: nvidia-smi, version: 535.261.03-1}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import install as driver
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host


def main():
    module = AnsibleModule(
        argument_spec=driver.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    try:
        system = Host.for_module(module, timeout=driver.COMMAND_TIMEOUT)
        result = driver.run(system, module.params, check_mode=module.check_mode, diff_mode=module._diff)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
