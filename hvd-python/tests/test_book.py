"""The book's Python blocks (docs/src): every one compiles, and every block tagged plain
`python` runs as a job of one rank, so that the book cannot drift from the API.

Blocks that cannot run here say why in their tag (`python,cluster`, `python,gpu`,
`python,fragment`); they are compiled and counted. `cargo xtask book` checks the tags of
every other block.
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "src"
REASONS = ("cluster", "gpu", "fragment")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\S*)\s*$")
# A block runs alone: no launcher's variables may make it wait for other ranks.
LAUNCHER_PREFIXES = ("HVD_", "HOROVOD_", "OMPI_", "PMI_", "PMIX_", "SLURM_")
LAUNCHER_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
# Generous: TensorFlow's import alone takes seconds on a loaded machine.
RUN_TIMEOUT_S = 600


def blocks():
    """(page:line, tag, source) of every Python block of the book."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        fence, tag, start, lines = None, None, 0, []
        for number, line in enumerate(page.read_text().splitlines(), 1):
            match = FENCE.match(line.strip())
            if fence is None:
                if match and match.group(2):
                    fence, tag, start, lines = match.group(1), match.group(2), number, []
                continue
            if match and match.group(1) == fence and not match.group(2):
                if tag.split(",")[0] == "python":
                    where = f"{page.relative_to(DOCS)}:{start}"
                    found.append((where, tag, "\n".join(lines) + "\n"))
                fence = None
                continue
            lines.append(line)
    return found


BLOCKS = blocks()


def reason(tag):
    """None for a block that runs; else why it does not. A tag outside the vocabulary is
    an error, so that no block goes untested by a typo."""
    parts = tag.split(",")
    if parts == ["python"]:
        return None
    if len(parts) == 2 and parts[1] in REASONS:
        return parts[1]
    raise ValueError(f"python blocks are `python` or `python,<reason>` with a reason "
                     f"among {', '.join(REASONS)}, not `{tag}`")


def test_the_book_has_python_blocks_and_every_tag_is_known():
    assert BLOCKS, f"no Python blocks found under {DOCS}"
    counts = {}
    for where, tag, _ in BLOCKS:
        try:
            kind = reason(tag) or "run"
        except ValueError as e:
            pytest.fail(f"{where}: {e}")
        counts[kind] = counts.get(kind, 0) + 1
    print(f"book: {len(BLOCKS)} Python blocks: "
          + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())))
    assert counts.get("run", 0) > 0, "no block of the book runs"


@pytest.mark.parametrize("where,tag,source", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_every_block_compiles(where, tag, source):
    compile(source, where, "exec")


RUNNABLE = [b for b in BLOCKS if b[1] == "python"]


def missing_module(source):
    """The first framework a block imports that this environment lacks."""
    for module in ("torch", "tensorflow", "keras"):
        if re.search(rf"^\s*(import|from) {module}\b", source, re.M) \
                and importlib.util.find_spec(module) is None:
            return module
    return None


@pytest.mark.parametrize("where,tag,source", RUNNABLE, ids=[b[0] for b in RUNNABLE])
def test_runnable_blocks_run_as_one_rank(where, tag, source, tmp_path):
    module = missing_module(source)
    if module is not None:
        message = f"{where} imports {module}, which is not installed (pip install {module})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(LAUNCHER_PREFIXES) and name not in LAUNCHER_NAMES}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    try:
        done = subprocess.run([sys.executable, "-c", source], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{where} did not finish within {RUN_TIMEOUT_S} s as one rank; "
                    f"its stderr ended: {(e.stderr or b'')[-2000:]!r}")
    assert done.returncode == 0, (
        f"{where} exited {done.returncode} as one rank; stderr:\n{done.stderr[-4000:]}")
