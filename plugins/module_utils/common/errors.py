# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors raised by the collection's module_utils.

module_utils never call ``fail_json`` themselves: they raise :class:`GpuFleetError`
(or a subclass) and the module's ``main()`` turns it into one clean failure.
"""

from __future__ import annotations


class GpuFleetError(Exception):
    """An error that a module reports to the user as its failure message.

    ``details`` carries structured data (the offending value, what would be
    accepted, a list of problems) that the module returns beside ``msg``.
    """

    def __init__(self, msg: str, **details: object) -> None:
        super().__init__(msg)
        self.msg = msg
        self.details = details
