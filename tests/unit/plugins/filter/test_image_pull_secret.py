"""image_pull_secret: a dockerconfigjson Secret; errors never carry the password."""

from __future__ import annotations

import base64
import json

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.nvidia.plugins.filter.image_pull_secret import image_pull_secret

from . import validate


def test_secret_holds_a_docker_config_for_the_registry():
    secret = image_pull_secret(
        {"server": "registry.example.internal:5000", "username": "robot", "password": "s3cr3t"}, "gpufleet-registry", "gpu-operator"
    )
    validate.k8s_object(secret)
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
    assert config == {"auths": {"registry.example.internal:5000": {
        "username": "robot", "password": "s3cr3t", "auth": base64.b64encode(b"robot:s3cr3t").decode(),
    }}}


def test_secret_is_the_same_every_time():
    creds = {"server": "r.example", "username": "u", "password": "p"}
    assert image_pull_secret(creds, "s", "ns") == image_pull_secret(dict(reversed(list(creds.items()))), "s", "ns")


def test_missing_keys_are_named_and_the_password_is_not():
    with pytest.raises(AnsibleFilterError) as err:
        image_pull_secret({"server": "r.example", "password": "hunter2"}, "s", "ns")
    assert str(err.value) == "image_pull_secret: registry credentials lack username (expected server, username and password)"
    assert "hunter2" not in str(err.value)
