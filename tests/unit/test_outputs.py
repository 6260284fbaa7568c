"""Outputs never replace what is not a regular file: a FIFO, a device node, a symbolic link (issue: `report -o`,
`--markdown` and `system -o` renamed a new file over them; as root, `-o /dev/null` would replace the node)."""

from __future__ import annotations

import os
import stat

import pytest

from trainperf.cli import main
from trainperf.errors import UsageError
from trainperf.fileio import atomic_write_text


def test_a_fifo_a_link_and_a_device_node_are_refused_and_left_as_they_were(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=r"fifo is not a regular file \(a named pipe \(FIFO\)\)"):
        atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    target = tmp_path / "real.json"
    target.write_text("kept")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(UsageError, match="link.json is a symbolic link"):
        atomic_write_text(link, "x")
    assert os.path.islink(link) and target.read_text() == "kept"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(UsageError, match="symbolic link"):
        atomic_write_text(dangling, "x")
    assert not (tmp_path / "nowhere").exists()
    if os.geteuid() == 0:  # mknod of a character device needs root (CI runs as root)
        node = tmp_path / "null"
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        with pytest.raises(UsageError, match=r"null is not a regular file \(a character device\)"):
            atomic_write_text(node, "x")
        assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_a_regular_file_and_a_new_path_are_written(tmp_path):
    (tmp_path / "old.txt").write_text("old")
    atomic_write_text(tmp_path / "old.txt", "new")
    atomic_write_text(tmp_path / "sub" / "new.txt", "made")
    assert (tmp_path / "old.txt").read_text() == "new" and (tmp_path / "sub" / "new.txt").read_text() == "made"


def test_system_and_report_refuse_a_fifo_output_with_exit_2(tmp_path, capsys):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    assert main(["system", "-o", str(fifo)]) == 2
    assert "out.json is not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
