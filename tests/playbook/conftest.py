"""The playbook tests run with ansible-core's fact injection off (INJECT_FACTS_AS_VARS=False, the
coming default; ansible-core 2.21 deprecates injecting facts as top-level variables): a role or
plugin that still read a fact of the collection (gpufleet_nvidia, gpufleet_nvidia_validation) as
a top-level variable fails here instead of printing a deprecation warning on users' runs."""

from __future__ import annotations

import os

os.environ["ANSIBLE_INJECT_FACT_VARS"] = "False"
