# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    # The attributes of the collection's read-only modules (preflight, host_validate).
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return the same result; it never changes anything.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no diff.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
"""

    # The attributes of the collection's read-only actions answered by the controller process
    # (kube_client_info, role_arguments).
    CONTROLLER_READ_ONLY = r"""
options: {}
attributes:
  action:
    description: Runs on the control host, as an action plugin.
    support: full
  check_mode:
    description: Read only; the same in check mode.
    support: full
  diff_mode:
    description: Nothing is changed.
    support: none
  platform:
    description: The control host.
    support: full
    platforms: posix
"""
