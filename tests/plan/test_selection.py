"""A loader whose extra is missing is refused first (before its settings are checked: `--loader ray` complained about
--num-workers first), naming an extra that exists, and before torch or the library is imported (refusals took 7-14 s
on a busy machine)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

# the loader's library made missing: find_spec answers None for it, as on a machine without the extra
MISSING = textwrap.dedent("""
    import importlib.util, json, sys
    real = importlib.util.find_spec
    gone = sys.argv[1].split(".")[0]
    importlib.util.find_spec = lambda name, *a, **k: None if name.split(".")[0] == gone else real(name, *a, **k)
    from iobench.cli import main
    try:
        main(sys.argv[2:])
    except SystemExit as exc:
        code = exc.code
    print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
""")


@pytest.mark.parametrize(
    ("module", "args", "extra"),
    [
        ("nvidia.dali", ["--loader", "dali", "--format", "files"], "dali"),
        ("ray", ["--loader", "ray", "--num-workers", "0"], "ray"),
        ("ray", ["--loader", "ray-data"], "ray"),
        ("torchdata", ["--loader", "nodes"], "torchdata"),
        ("spdl", ["--loader", "spdl"], "spdl"),
    ],
)
def test_a_missing_loader_is_refused_first_naming_its_extra_without_importing_torch(tmp_path, module, args, extra):
    done = subprocess.run(
        [sys.executable, "-c", MISSING, module, "run", *args, "--data-dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert outcome["code"] == 2 and len(lines) == 1, done.stderr
    assert lines[0].endswith(f"pip install 'iobench[{extra}]'"), lines[0]
    assert not outcome["torch"], "torch was imported before the refusal"
