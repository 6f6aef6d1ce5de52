"""Results files (`iobench.results.store`): a record is appended only to a results file of iobench's, never through a
link (a planted link took root's records into /etc/passwd), never into another file (a `--results` typo appended to
the user's model), and a file swapped for a link between the check and the write is refused as well."""

from __future__ import annotations

import json
import os

import pytest

from iobench.errors import IobenchError
from iobench.results.store import append_line, append_record, check_results_file, check_writable
from tests.conftest import assert_one_line_error

RECORD = json.dumps({"kind": "checkpoint", "library": "torch"})
PASSWD = "root:x:0:0:root:/root:/bin/bash\n"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "passwd"
    path.write_text(PASSWD)
    return path


def test_a_link_is_never_followed(tmp_path, victim):
    os.symlink(victim, tmp_path / "link.jsonl")
    for step in (check_writable, check_results_file, lambda p: append_line(p, RECORD)):
        with pytest.raises(IobenchError, match="is a link"):
            step(tmp_path / "link.jsonl")
    assert victim.read_text() == PASSWD


@pytest.mark.parametrize("content", [PASSWD.encode(), b"\x08\x00\x00\x00\x00\x00\x00\x00{}", b'{"a": 1}\n', b"[]\n"])
def test_a_file_that_holds_no_records_is_refused(tmp_path, content):
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    for step in (check_results_file, lambda p: append_line(p, RECORD)):
        with pytest.raises(IobenchError, match="other than iobench records"):
            step(path)
    assert path.read_bytes() == content


def test_a_fifo_a_folder_and_a_second_name_are_refused(tmp_path, victim):
    os.mkfifo(tmp_path / "fifo")
    os.link(victim, tmp_path / "hard.jsonl")
    for path, why in (
        (tmp_path / "fifo", "not a regular file"),
        (tmp_path, "is a directory"),
        (tmp_path / "hard.jsonl", "2 names"),
    ):
        with pytest.raises(IobenchError, match=why):
            append_line(path, RECORD)


def test_records_are_appended_to_a_new_file_an_empty_one_and_one_of_records_with_a_torn_line(tmp_path):
    path = tmp_path / "r.jsonl"
    append_line(path, RECORD)
    (tmp_path / "empty.jsonl").write_text("")
    append_line(tmp_path / "empty.jsonl", RECORD)
    with open(path, "a") as f:
        f.write('{"kind": "checkp')  # a crash mid-write
    append_line(path, RECORD)
    assert path.read_text().splitlines()[-1] == RECORD and len(path.read_text().splitlines()) == 3


def test_a_file_swapped_for_a_link_after_the_check_is_not_written_through(tmp_path, victim):
    path = tmp_path / "r.jsonl"
    append_line(path, RECORD)
    check_writable(path, kinds=("checkpoint",))
    path.unlink()
    os.symlink(victim, path)  # between the check before the runs and the append after them
    with pytest.raises(IobenchError, match="is a link"):
        append_line(path, RECORD)
    assert victim.read_text() == PASSWD


def test_run_refuses_a_results_link_before_measuring(cli, tmp_path, victim):
    os.symlink(victim, tmp_path / "link.jsonl")
    r = cli("run", "--data-dir", tmp_path / "none", "--format", "npy", "--results", tmp_path / "link.jsonl")
    assert_one_line_error(r, "is a link")
    assert victim.read_text() == PASSWD and not (tmp_path / "none").exists()


def test_tune_and_sweep_print_commands_a_shell_reads_as_they_are(capsys, tmp_path):
    """tune printed "`python /.../r $(touch ...)/res-best.py` runs it" unquoted; run's suggestion was quoted."""
    from iobench.cli.render import _records_line

    _records_line(tmp_path / "r $(touch x)" / "res.jsonl")
    said = capsys.readouterr().out
    assert "`iobench report '" in said and "$(touch x)/res.jsonl'`" in said, said


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "missing"])
def test_compare_and_report_say_what_a_path_is_when_it_is_not_a_results_file(cli, tmp_path, kind):
    """C3: `compare` called a FIFO, /dev/zero and `.` "no such results file" (and a FIFO would block the read)."""
    path = {"fifo": tmp_path / "fifo", "device": "/dev/zero", "folder": tmp_path, "missing": tmp_path / "nope"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    said = {
        "fifo": "a FIFO, not a results file",
        "device": "a device, not a results file",
        "folder": "a folder, not a results file",
        "missing": "no such results file",
    }[kind]
    for command in (("compare", path, path), ("report", path, "--out", tmp_path / "out")):
        assert_one_line_error(cli(*command), said)


def test_records_are_never_appended_to_a_file_of_another_kind(tmp_path):
    """`report` and `compare` read a file by its first record's kind: run, feed and checkpoint records each go to
    files of their own, refused in one line before anything is measured."""
    from iobench.results.checkpoint_record import KINDS
    from iobench.results.feed_record import FEED
    from tests.conftest import record_of
    from tests.results.test_feed_record import planted

    runs, answers = tmp_path / "runs.jsonl", tmp_path / "answers.jsonl"
    append_record(runs, record_of())
    answers.write_text(json.dumps(planted({1: (0.9, 0.9)}).to_json()) + "\n")
    check_writable(runs)
    check_writable(answers, kinds=(FEED,))
    check_writable(tmp_path / "new.jsonl", kinds=KINDS)
    with pytest.raises(IobenchError, match="holds feed records; give a file of its own for run records"):
        check_writable(answers)
    with pytest.raises(IobenchError, match="holds run records; give a file of its own for checkpoint records$"):
        check_writable(runs, kinds=KINDS)


def test_the_pasted_codes_path_is_checked_before_anything_is_measured(tmp_path):
    """The eighth probe's T2 and S1: `<stem>-tuned.py` a folder ended a whole tune in a traceback; a results folder
    another user can write let them replace the code before the user ran it."""
    import os

    from iobench.results.store import pasted_code_path

    results = tmp_path / "ck.jsonl"
    assert pasted_code_path(results, "tuned") == tmp_path / "ck-tuned.py"
    (tmp_path / "ck-tuned.py").mkdir()
    with pytest.raises(IobenchError, match="it is not a file"):
        pasted_code_path(results, "tuned")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(IobenchError, match="writable by other users"):
        pasted_code_path(shared / "ck.jsonl", "tuned")
    os.chmod(shared, 0o1777)  # sticky, as /tmp: no one replaces another's file
    assert pasted_code_path(shared / "new" / "ck.jsonl", "tuned") == shared / "new" / "ck-tuned.py"
    if os.geteuid() == 0:
        os.chmod(shared, 0o755)
        os.chown(shared, 65534, 65534)
        with pytest.raises(IobenchError, match="belongs to uid 65534"):
            pasted_code_path(shared / "ck.jsonl", "tuned")


def test_a_refused_run_leaves_no_results_folder(tmp_path):
    """check_writable no longer makes the folder: a run refused after it left an empty one behind."""
    from iobench.results.store import check_writable

    check_writable(tmp_path / "new" / "deeper" / "r.jsonl")
    assert not (tmp_path / "new").exists()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(IobenchError, match="is not a folder"):
        check_writable(tmp_path / "afile" / "r.jsonl")
