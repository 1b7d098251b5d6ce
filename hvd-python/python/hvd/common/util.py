"""Helpers Horovod's users import from ``horovod.common.util``."""

import re


def _release(ver):
    """The release numbers of a version string: "2.21.0-rc1" and "2.21.0+cpu" are
    (2, 21, 0)."""
    found = re.match(r"\d+(\.\d+)*", str(ver).strip())
    if found is None:
        raise ValueError(f"not a version: {ver!r}")
    numbers = [int(n) for n in found.group(0).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def is_version_greater_equal_than(ver, min_ver):
    """Whether version ``ver`` is ``min_ver`` or later, by release numbers."""
    return _release(ver) >= _release(min_ver)
