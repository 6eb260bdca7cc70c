"""The playbook tests run with ansible-core's fact injection off (INJECT_FACT_VARS=False, the
coming default; ansible-core 2.21 deprecates injecting facts as top-level variables): a role or
plugin that still read a fact of the collection (gpufleet_nvidia, gpufleet_nvidia_validation) as
a top-level variable fails here instead of printing a deprecation warning on users' runs.

Each test process (make test runs them on every CPU, pytest -n auto) gives its ansible-playbook
runs an ANSIBLE_HOME of their own: their temporary files (~/.ansible/tmp, where each task's
module is copied) are neither shared with another worker's runs nor with the user's, which an
Ansible run elsewhere on the machine can clean up under a running test."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

os.environ["ANSIBLE_INJECT_FACT_VARS"] = "False"
os.environ["ANSIBLE_HOME"] = tempfile.mkdtemp(prefix="gpufleet-playbook-ansible-home-")
atexit.register(shutil.rmtree, os.environ["ANSIBLE_HOME"], True)
