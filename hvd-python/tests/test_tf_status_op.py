"""hvd.tensorflow's status op, which raises TensorFlow's error classes in TensorFlow 1
graphs: built with TensorFlow's flags on first use, and a warning, not an error, when it
cannot be built."""

import importlib.util
import os
import subprocess
import sys

import pytest


@pytest.fixture(autouse=True)
def tensorflow_installed():
    # Looked up, not imported: TensorFlow loaded into pytest's own process aborts a later
    # import of torch's triton (each brings its own LLVM), so TensorFlow runs only in the
    # processes the tests start.
    if importlib.util.find_spec("tensorflow") is None:
        why = f"tensorflow not installed in {sys.prefix}: pip install tensorflow-cpu"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)

RAISE = """
import tensorflow as tf
from hvd.tensorflow import status_op
lib = status_op.module()
if lib is None:
    print("no op")
else:
    with tf.Graph().as_default():
        raised = lib.hvd_raise_status(tf.constant(9), tf.constant("ranks disagree"))
        quiet = lib.hvd_raise_status(tf.constant(0), tf.constant(""))
        with tf.compat.v1.Session() as session:
            session.run(quiet)
            try:
                session.run(raised)
            except tf.errors.FailedPreconditionError as e:
                print("raised with the message:", "ranks disagree" in e.message)
"""


def run(env):
    done = subprocess.run([sys.executable, "-c", RAISE], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **env})
    return done.stdout + done.stderr


def test_the_op_is_built_once_and_raises_the_class_it_is_given(tmp_path):
    out = run({"HVD_CACHE_DIR": str(tmp_path)})
    assert "raised with the message: True" in out, out
    built = list((tmp_path / "tensorflow-ops").glob("status_op-*.so"))
    assert len(built) == 1, out
    # The second process loads what the first built.
    before = built[0].stat().st_mtime_ns
    assert "raised with the message: True" in run({"HVD_CACHE_DIR": str(tmp_path)})
    assert built[0].stat().st_mtime_ns == before


def test_without_a_compiler_graphs_go_on_with_a_warning(tmp_path):
    out = run({"HVD_CACHE_DIR": str(tmp_path), "CXX": str(tmp_path / "no-compiler")})
    assert "no op" in out, out
    assert "could not build its status op" in out and "no-compiler" in out, out
