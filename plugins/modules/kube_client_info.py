#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Documentation only, as ansible.builtin.debug's: the action plugin of the same name does the work on
# the control host and accepts exactly the options documented here (it reads them from this file).

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kube_client_info
short_description: Whether the control host can talk to a Kubernetes cluster
version_added: 0.1.0
description:
  - Says whether the Python kubernetes client imports in the Python that runs Ansible, where
    the kubernetes.core collection is, whether O(kubeconfig) exists and whether Ansible runs
    inside a cluster (C(KUBERNETES_SERVICE_HOST)). Answered by the controller process itself,
    through an action plugin, with no module started.
  - The validate role uses it to say why the cluster was not checked, rather than fail.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  kubeconfig:
    description: The kubeconfig to look for.
    type: path
    default: ~/.kube/config
extends_documentation_fragment:
  - gpufleet.nvidia.attributes.controller_read_only
"""

EXAMPLES = r"""
- name: Can this control host read the cluster?
  gpufleet.nvidia.kube_client_info:
    kubeconfig: ~/.kube/prod.yaml
  register: access
"""

RETURN = r"""
client:
  description: The Python kubernetes client imports.
  type: bool
  returned: success
  sample: true
client_version:
  description: Its version (null when it does not import).
  type: str
  returned: success
  sample: 31.0.0
collection:
  description: Where kubernetes.core is installed (null when it is not).
  type: str
  returned: success
  sample: /usr/lib/python3/dist-packages/ansible_collections/kubernetes/core
kubeconfig:
  description: The kubeconfig's path (user expanded) and whether it exists.
  type: dict
  returned: success
  sample: {path: /root/.kube/config, exists: false}
in_cluster:
  description: C(KUBERNETES_SERVICE_HOST) is set (Ansible runs in a pod).
  type: bool
  returned: success
  sample: false
"""
