# Sphinx configuration of the collection's documentation site, built by scripts/build-docs.sh
# from the RST antsibull-docs renders of the plugins' and roles' documentation (the layout
# antsibull-docs sphinx-init writes).
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

project = "gpufleet.nvidia"
copyright = "gpufleet.nvidia maintainers"
title = "gpufleet.nvidia documentation"
html_short_title = "gpufleet.nvidia"

# myst_parser: the guides (docs/*.md) and the quick start, which scripts/build-docs.sh puts beside the reference
extensions = ["sphinx.ext.autodoc", "sphinx.ext.intersphinx", "sphinx_antsibull_ext", "myst_parser"]
myst_heading_anchors = 3
pygments_style = "ansible"
highlight_language = "YAML+Jinja"
html_theme = "sphinx_ansible_theme"
html_show_sphinx = False
display_version = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

# Links to Ansible's own documentation and to other collections' (kubernetes.core) resolve
# through intersphinx inventories, which the build fetches when it can reach them; offline
# those references are rendered as plain text, and scripts/build-docs.sh tells them apart from
# a broken reference of the collection's own.
intersphinx_mapping = {
    "python3": ("https://docs.python.org/3/", None),
    "ansible_devel": ("https://docs.ansible.com/projects/ansible/devel/", None),
}
default_role = "any"
nitpicky = True
