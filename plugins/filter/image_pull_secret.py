# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: image_pull_secret
short_description: A registry pull secret (kubernetes.io/dockerconfigjson) for a private or mirror registry
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Builds the Secret that the GPU Operator's or the device plugin's pods pull their images with.
  - The result holds the password; use it only in a task with C(no_log), and keep the
    credentials in a vault. An error names the missing keys, never a value.
positional: name, namespace
options:
  _input:
    description: The registry credentials.
    type: dict
    required: true
    suboptions:
      server:
        description: The registry host, C(host[:port]).
        type: str
        required: true
      username:
        description: The user name.
        type: str
        required: true
      password:
        description: The password or token.
        type: str
        required: true
  name:
    description: The Secret's name.
    type: str
    required: true
  namespace:
    description: The Secret's namespace.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Create the pull secret
  kubernetes.core.k8s:
    definition: "{{ {'server': server, 'username': user, 'password': token} | gpufleet.nvidia.image_pull_secret('gpufleet-registry', 'gpu-operator') }}"
  no_log: true
"""

RETURN = r"""
_value:
  description: The Secret object.
  type: dict
  sample:
    apiVersion: v1
    kind: Secret
    metadata:
      name: gpufleet-registry
      namespace: gpu-operator
      labels:
        app.kubernetes.io/managed-by: gpufleet.nvidia
    type: kubernetes.io/dockerconfigjson
    data:
      .dockerconfigjson: eyJhdXRocyI6e319
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.release import image_pull_secret as _image_pull_secret


def image_pull_secret(credentials, name, namespace):
    try:
        return _image_pull_secret(credentials, name, namespace)
    except ValueError as exc:
        raise AnsibleFilterError("image_pull_secret: %s (expected server, username and password)" % exc)


class FilterModule(object):
    def filters(self):
        return {"image_pull_secret": image_pull_secret}
