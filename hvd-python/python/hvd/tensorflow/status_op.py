"""The one compiled TensorFlow op of ``hvd.tensorflow``: it raises the error class it
is given, for TensorFlow 1 graphs.

A graph's collective is a ``tf.py_function``, and in a TensorFlow 1 graph (a session's
run) TensorFlow classes a Python function's error by Python's built-in exceptions only:
ranks that disagree would raise ``UnknownError`` where Horovod's users catch
``FailedPreconditionError``. So there the collective hands such an error back as data
(its code and message), and this op raises it with TensorFlow's class and hvd's message.
(Inside ``tf.function`` and eagerly, TensorFlow keeps the Python error's class itself.)

The op is built from ``status_op.cc`` with the compiler and TensorFlow's own flags
(``tf.sysconfig``) the first time a graph needs it, and kept in hvd's cache, once per
TensorFlow version. Without a compiler (``CXX``, else ``c++``) the graph still works and
such errors stay ``UnknownError``, with a warning that says why.
"""

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import warnings

import tensorflow as tf

# A build on a loaded machine takes tens of seconds; one that takes this long is stuck.
_BUILD_TIMEOUT = 600
_SOURCE = os.path.join(os.path.dirname(__file__), "status_op.cc")
_lock = threading.Lock()
_loaded = []


def _cache_dir():
    base = os.environ.get("HVD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hvd")
    return os.path.join(base, "tensorflow-ops")


def _build(compiler, flags, target):
    """Compiles the op into ``target``, atomically (ranks on one host may build at
    once); returns why it could not, or None."""
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd, partial = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(target))
        os.close(fd)
    except OSError as e:
        return f"cannot write the op to {os.path.dirname(target)} (set HVD_CACHE_DIR): {e}"
    command = [compiler, "-shared", "-fPIC", "-O2", "-w", *tf.sysconfig.get_compile_flags(),
               _SOURCE, "-o", partial, *tf.sysconfig.get_link_flags()]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=_BUILD_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        os.unlink(partial)
        return f"{' '.join(command[:1])}: {e}"
    if done.returncode != 0:
        os.unlink(partial)
        return f"{compiler} failed: {done.stderr.strip()[-2000:]}"
    os.replace(partial, target)
    return None


def module():
    """The loaded op library, built first if this TensorFlow has none cached; None
    (after one warning) when it cannot be built."""
    with _lock:
        if _loaded:
            return _loaded[0]
        compiler = os.environ.get("CXX", "c++")
        flags = tf.sysconfig.get_compile_flags() + tf.sysconfig.get_link_flags()
        with open(_SOURCE, "rb") as f:
            key = hashlib.sha256(f.read() + "\0".join(
                [tf.__version__, sys.version, *flags]).encode()).hexdigest()[:16]
        target = os.path.join(_cache_dir(), f"status_op-{tf.__version__}-{key}.so")
        why = None if os.path.exists(target) else _build(compiler, flags, target)
        lib = None
        if why is None:
            try:
                lib = tf.load_op_library(target)
            except (tf.errors.OpError, OSError) as e:
                why = f"loading {target}: {e}"
        if why is not None:
            warnings.warn(
                "hvd.tensorflow could not build its status op, so in TensorFlow 1 graphs "
                "ranks that disagree raise UnknownError instead of FailedPreconditionError "
                f"(install a C++ compiler, or set CXX): {why}", RuntimeWarning, stacklevel=3)
        _loaded.append(lib)
        return lib
