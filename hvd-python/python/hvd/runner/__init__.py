"""``horovodrun``: Horovod's launcher name for hvdrun, the launcher binary this wheel
installs next to the Python interpreter's scripts."""

import os
import shutil
import sys
import sysconfig


def hvdrun_path():
    """The hvdrun binary installed with this package, else the first on PATH."""
    here = os.path.join(sysconfig.get_path("scripts"), "hvdrun")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("hvdrun")


def main():
    path = hvdrun_path()
    if path is None:
        sys.exit("horovodrun: the hvdrun launcher is not installed next to this Python "
                 "(reinstall the hvd wheel)")
    os.execv(path, [path] + sys.argv[1:])
