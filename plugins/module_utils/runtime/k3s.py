# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA runtime in the containerd template of k3s / RKE2 (``config.toml.tmpl``).

k3s and RKE2 write containerd's ``config.toml`` themselves at every start, from their template
when there is one: :func:`plan_k3s` edits (or creates) that template, in place, with the Go
template actions masked from the TOML parser (``runtime.managed.GoTemplateMask``).
"""

from __future__ import annotations

import collections
import os

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.containerd_config import (
    check_shape, check_unrelated, ContainerdOptions, detect_version, facts, plugin_path,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.containerd_inplace import (
    absent_inplace, check_main, inplace_record, present_inplace,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import defined_tables, parse_toml, TomlStyle
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.files import FileChange, message, Plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import GoTemplateMask, OWNER_MARK, unwrap
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.toml_edit import lookup, refusing_tomlkit_errors

#: Where k3s / RKE2 look for an NVIDIA runtime to add on their own at start.
K3S_AUTODETECT_DIRS = ("/usr/local/nvidia/toolkit", "/usr/bin", "/usr/local/bin")


def k3s_paths(flavor: str, generated_version=None, existing=()):
    """``(template, generated)`` paths of k3s / RKE2 (``existing``: paths that exist)."""
    base = "/var/lib/rancher/%s/agent/etc/containerd" % flavor
    generated = base + "/config.toml"
    v3 = base + "/config-v3.toml.tmpl"
    v2 = base + "/config.toml.tmpl"
    if v3 in existing:
        return v3, generated
    if v2 in existing:
        return v2, generated
    return (v3 if generated_version and generated_version >= 3 else v2), generated


def plan_k3s(
    flavor: str,
    template_path: str,
    template_text,
    generated_path: str,
    generated_text,
    opts: ContainerdOptions,
    autodetected=None,
) -> Plan:
    """Plan the edits of the containerd template of k3s / RKE2.

    k3s and RKE2 rewrite ``config.toml`` at every start, from ``config.toml.tmpl`` (or
    ``config-v3.toml.tmpl`` for containerd 2.x) when it exists. Without a template, one is
    created from the generated ``config.toml`` (marked as the module's, so that
    ``state=absent`` deletes it). A template that extends ``{{ template "base" . }}`` keeps
    doing so: only the tables that the base does not define are added after it.
    ``autodetected``: the NVIDIA runtime binary k3s will add by itself (base template only).
    """
    label = "k3s" if flavor == "k3s" else "RKE2"
    if opts.mode != "inplace":
        raise GpuFleetError(
            "%s: config_mode=dropin is not supported; the module edits %s (config_mode=inplace)"
            % (label, template_path)
        )
    generated_doc = parse_toml(generated_text, generated_path) if generated_text else None
    gen_version = _generated_version(generated_doc, generated_path)
    if template_text is None and opts.state == "absent":
        return Plan(
            [FileChange(template_path, None, None)],
            msg="the %s runtime is not configured (no %s)" % (opts.runtime_name, template_path),
            config_version=gen_version,
        )
    source_text, created_by_module = _template_source(label, template_path, template_text, generated_path, generated_text)
    if opts.state == "absent" and created_by_module:
        return Plan(
            [FileChange(template_path, template_text, None)],
            msg="removed %s (created by this module)" % template_path,
            config_version=gen_version,
        )
    mask = GoTemplateMask(source_text)
    doc = parse_toml(mask.masked, template_path)
    version = _template_version(doc, gen_version, template_path)
    template = _Template(label, template_path, template_text, mask, doc, version, plugin_path(version))
    check_main(doc, template_path, template.cri_path, opts)
    if opts.state == "absent":
        return _k3s_removed(template, opts)
    return _k3s_configured(template, generated_text, generated_doc, opts, autodetected)


#: The k3s / RKE2 template being planned: k3s or RKE2, its path and text, the Go template mask,
#: the masked text's document, its config version and CRI plugin table.
_Template = collections.namedtuple("_Template", "label path text mask doc version cri_path")


def _generated_version(doc, path):
    """The version of k3s's generated config.toml (None: no file, or no version), its types checked."""
    if doc is None or "version" not in doc:
        return None
    version = _template_version(doc, None, path)
    check_shape(unwrap(doc), path, plugin_path(version))
    return version


def _template_source(label, template_path, template_text, generated_path, generated_text) -> tuple:
    """``(text to edit, whether the module made the template)``: the template, else one made from config.toml."""
    if template_text is not None:
        return template_text, template_text.startswith(OWNER_MARK)
    if generated_text is None:
        raise GpuFleetError(
            "%s has not written %s yet: start %s once so that the template can be made from "
            "it, or create %s" % (label, generated_path, label, template_path)
        )
    made = "%s: created from %s; delete it to go back to %s's own.\n%s" % (
        OWNER_MARK,
        os.path.basename(generated_path),
        label,
        generated_text,
    )
    return made, True


def _template_version(doc, generated_version, template_path) -> int:
    """The config version of a template (or of the generated file): its own, else ``generated_version``, else 2."""
    if "version" in doc:
        try:
            return detect_version(doc)[0]
        except GpuFleetError as exc:
            raise GpuFleetError("%s: %s" % (template_path, exc.msg), path=template_path)
    return 2 if generated_version is None else generated_version


def _k3s_removed(template, opts) -> Plan:
    """Take the handler and what the module changed out of a template the module did not make."""
    name = opts.runtime_name
    warnings = []
    with refusing_tomlkit_errors(template.path, template.doc, list(template.cri_path) + ["containerd", "runtimes", name]):
        absent_inplace(template.doc, template.cri_path, opts, warnings)
    files = [FileChange(template.path, template.text, _unmasked(template, opts))]
    return Plan(
        files,
        msg=message(files, "removed the %s runtime" % name, "the %s runtime is not configured" % name),
        warnings=warnings,
        **facts(template.version, template.cri_path, opts, template=template.path)
    )


def _k3s_configured(template, generated_text, generated_doc, opts, autodetected) -> Plan:
    """Add the handler (and the default, CDI) to the template, leaving to a base template what it defines."""
    name = opts.runtime_name
    warnings = []
    if opts.enable_cri:
        warnings.append("%s: enable_cri does not apply (the CRI plugin is always on)" % template.label)
    record = inplace_record(template.doc, template.cri_path, name) or {}
    skip, notes, allow_runc, source_cri = _left_to_the_base(template, generated_text, generated_doc, opts, autodetected)
    if skip == {"runtime"} and not opts.set_as_default and not opts.enable_cdi and not record:
        files = [FileChange(template.path, template.text, template.text)]
        return Plan(
            files,
            msg="; ".join(notes),
            warnings=warnings,
            **facts(template.version, template.cri_path, opts, template=template.path)
        )
    style = TomlStyle.detect(template.mask.masked, default_step="")
    with refusing_tomlkit_errors(template.path, template.doc, list(template.cri_path) + ["containerd", "runtimes", name]):
        source_name = present_inplace(
            template.doc, template.cri_path, opts, style, record, warnings, allow_runc=allow_runc, skip=skip,
            source_cri=source_cri,
        )
    files = [FileChange(template.path, template.text, _unmasked(template, opts))]
    msg = message(files, "configured the %s runtime" % name, "the %s runtime is already configured" % name)
    if notes:
        msg = "%s; %s" % (msg, "; ".join(notes))
    return Plan(
        files,
        msg=msg,
        warnings=warnings,
        **facts(template.version, template.cri_path, opts, template=template.path, source_runtime=source_name)
    )


def _unmasked(template, opts) -> str:
    """The edited template's text, its Go actions back, once nothing unrelated is seen to change."""
    masked_after = template.doc.as_string()
    check_unrelated(template.path, template.mask.masked, masked_after, template.cri_path, opts.runtime_name)
    return template.mask.unmask(masked_after)


def _left_to_the_base(template, generated_text, generated_doc, opts, autodetected) -> tuple:
    """What a template that extends the base template leaves to it: ``(skip, notes, allow_runc, source_cri)``.

    ``source_cri``: the base's CRI table as rendered in config.toml, whose default runtime the
    handler copies (None: the template's own).
    """
    if not template.mask.uses_base:
        return set(), [], True, None
    base_tables = defined_tables(generated_text or "") - defined_tables(template.mask.masked)
    skip, notes = _runtime_of_the_base(template, base_tables, opts, autodetected)
    _refuse_second_definitions(template, base_tables, opts)
    allow_runc = (tuple(template.cri_path) + ("containerd", "runtimes", "runc")) not in base_tables
    source_cri = None
    if generated_doc is not None:
        source_cri = unwrap(lookup(generated_doc, template.cri_path)) or {}
    return skip, notes, allow_runc, source_cri


def _runtime_of_the_base(template, base_tables, opts, autodetected) -> tuple:
    """``({"runtime"}, [why])`` when the base defines the handler or k3s adds it itself, else nothing."""
    name = opts.runtime_name
    if tuple(template.cri_path) + ("containerd", "runtimes", name) in base_tables:
        return {"runtime"}, ["%s's base template already defines the %s runtime" % (template.label, name)]
    if autodetected and name == "nvidia":
        return {"runtime"}, [
            "%s adds the nvidia runtime by itself at its next start (found %s)" % (template.label, autodetected)
        ]
    return set(), []


def _refuse_second_definitions(template, base_tables, opts) -> None:
    """Refuse what would define again a table the base template defines (containerd would not start)."""
    blocked = []
    if opts.set_as_default and (tuple(template.cri_path) + ("containerd",)) in base_tables:
        blocked.append(
            "set_as_default (use %s's own option: default-runtime: %s in its config.yaml)"
            % (template.label, opts.runtime_name)
        )
    if opts.enable_cdi and tuple(template.cri_path) in base_tables:
        blocked.append("enable_cdi")
    if blocked:
        raise GpuFleetError(
            "%s extends %s's base template, which already defines the table that %s would "
            "change; a second definition would stop containerd. Use a full template instead "
            "(delete %s and run the module again to have it made from config.toml)"
            % (template.path, template.label, " and ".join(blocked), template.path)
        )
