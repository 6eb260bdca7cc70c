"""Offline stand-in for the ``get-pip.py`` bootstrap script that ansible-test downloads.

ansible-test puts pip into each virtual environment it creates by running a ``get-pip.py``
fetched from a host this machine cannot reach; it first looks for a cached copy under
``~/.ansible/test/cache/get_pip_<version>.py``. scripts/run-sanity.sh places this file there.
It does the same job with the standard library: ``ensurepip`` installs the pip bundled with
Python, which then installs the exact packages ansible-test asked for (``pip==<version>``)
from the package index.
"""

import ensurepip
import os
import subprocess
import sys

# ensurepip clears the PIP_* variables and points PIP_CONFIG_FILE at /dev/null in this process;
# the install of the requested packages must see the machine's pip settings again.
ENV = dict(os.environ)
ensurepip.bootstrap(upgrade=True)
ARGS = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check"] + ARGS, env=ENV))
