"""The gate before the official tools: logged values that the v2.0 rule files turn into paths, control characters,
size caps; and `trainperf check` refusing a crafted log before the official checker reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from untrusted import MLLOG, PATH_KEYS, log_lines, plant, rules_dir, write_log

from trainperf import confine, limits, registry
from trainperf.errors import DataError
from trainperf.rules import gate
from trainperf.rules.compliance import GATE_PROBLEM, check_log

pytest.importorskip("mlperf_logging")
ESC = "\x1b"


def screen(values: dict) -> list[str]:
    return gate.screen_log("\n".join(log_lines(values)).encode("utf-8"))


# --- the gate's facts match the official rule files ------------------------------------------------
def test_the_path_keys_are_those_the_v2_rule_files_format_into_a_path():
    formatted = set()
    for path in rules_dir().glob("*.yaml"):
        for record in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            key = record.get("KEY") if isinstance(record, dict) else None
            code = " ".join(str(key.get(part, "")) for part in ("PRE", "POST", "CHECK")) if key else ""
            if "enqueue_config(" in code and ".format(v['value'])" in code:
                formatted.add(key["NAME"])
    assert formatted == set(gate.PATH_KEYS) == set(PATH_KEYS)
    for key in registry.BENCHMARKS:  # each benchmark's closed opt_name choices are the rule files that exist
        opt_files = sorted(p.name for p in rules_dir().glob(f"closed_{key}_*.yaml"))
        assert opt_files == [f"closed_{key}_{name}.yaml" for name in sorted(registry.benchmark(key).closed_opt_names)]


def test_a_clean_log_passes_the_gate():
    assert screen({}) == []
    assert screen({"submission_division": "closed", "opt_name": "lars"}) == []
    assert screen({"submission_platform": "Intel® Xeon® – 2 cores"}) == []  # non-ASCII names are fine


# --- the values that reach a path --------------------------------------------------------------------
@pytest.mark.parametrize("key", PATH_KEYS)
def test_a_path_in_a_path_key_is_refused_naming_line_key_and_value(key):
    (refusal,) = screen({**PATH_KEYS[key][1], key: "../../../../tmp/x/evil"})
    assert refusal.startswith("line ") and f"'{key}' has value '../../../../tmp/x/evil'" in refusal
    assert "training_2.0.0/" in refusal  # says which rule-file path the value would build


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("submission_division", "Open"),
        ("submission_division", ["open"]),
        ("submission_benchmark", "resnet50"),
        ("submission_benchmark", None),
        ("opt_name", "a\\b"),
        ("opt_name", ".."),
        ("opt_name", 3),
        ("submission_org", "../acme"),
        ("submission_platform", "box/1"),
    ],
)
def test_values_outside_what_the_rules_allow_are_refused(key, value):
    (refusal,) = screen({key: value})
    assert f"'{key}' has value {value!r}" in refusal


def test_opt_name_of_a_closed_resnet_log_is_lars_or_sgd():
    (refusal,) = screen({"submission_division": "closed", "opt_name": "adamw"})
    assert "'opt_name' has value 'adamw'" in refusal and "'lars', 'sgd'" in refusal
    assert screen({"submission_division": "open", "opt_name": "adamw"}) == []  # open rules never use it in a path


def test_a_line_mentioning_submission_benchmark_is_read_as_the_benchmark_by_rcp_checker():
    lines = log_lines()
    lines.insert(3, MLLOG + json.dumps({"key": "note", "value": "../x", "metadata": {"about": "submission_benchmark"}}))
    (refusal,) = gate.screen_log("\n".join(lines).encode())
    assert "line 4: 'note' has value '../x'" in refusal and "rcp_checker" in refusal


def test_the_gate_reads_lines_as_the_tools_do():
    # a carriage return ends a line for the tools (universal newlines)
    record = {"key": "submission_division", "value": "../evil", "metadata": {}}
    hidden = "junk\r" + MLLOG + json.dumps(record)
    (refusal,) = gate.screen_log(("\n".join(log_lines()) + "\n" + hidden + "\n").encode())
    assert "'submission_division' has value '../evil'" in refusal
    # the tools read after a line's last ':::MLLOG ', a reader that takes the first reads {"key": "x"}: refused
    twice = MLLOG + '{"key": "x"} ' + MLLOG + json.dumps(record)
    (refusal,) = gate.screen_log(("\n".join(log_lines()) + "\n" + twice + "\n").encode())
    assert refusal.startswith("line 39: holds the MLLOG token ':::MLLOG' 2 times: the official tools read only")
    escaped = MLLOG + json.dumps(record).replace("../", "\\u002e\\u002e\\u002f")  # JSON escapes decode the same
    assert gate.screen_log(escaped.encode()) != []


# --- control characters ------------------------------------------------------------------------------
def test_an_oversized_line_is_refused_at_once():
    """The tools' re.sub('.*' + TOKEN, ...) takes quadratic time on a long line (1 MB: about 14 minutes); the gate
    reads lines in linear time and refuses a long one before a tool sees it."""
    import time

    lines = log_lines()
    lines.insert(3, MLLOG + json.dumps({"key": "trainperf_note", "value": "A" * 2**20, "time_ms": 1, "metadata": {}}))
    t0 = time.perf_counter()
    (refusal,) = gate.screen_log("\n".join(lines).encode())
    assert time.perf_counter() - t0 < 2.0
    assert refusal.startswith(
        f"line 4: an MLLOG line of {len(lines[3]) + 1} characters, over the {gate.MAX_LINE_CHARS} allowed"
    )
    assert screen({"trainperf_note": "A" * (gate.MAX_LINE_CHARS - 200)}) == []  # long, but within the cap


def test_control_characters_are_refused_and_shown_escaped():
    (refusal,) = screen({"submission_platform": f"{ESC}[31mred{ESC}[0m"})
    assert ESC not in refusal and "\\x1b[31mred" in refusal
    (refusal,) = screen({"trainperf_note": f"a{ESC}]0;title\x07"})  # any key, any value or metadata
    assert ESC not in refusal and "U+001B" in refusal
    (refusal,) = screen({"submission_org": "acme\u202etxt.exe"})  # a bidi override reorders text on screen
    assert "\u202e" not in refusal and "\\u202e" in refusal
    raw = MLLOG + '{"key": "x", "value": 1, "metadata": {}}' + ESC + "[2J"  # raw, outside any JSON string
    (refusal,) = gate.screen_log(raw.encode())
    assert ESC not in refusal and "raw control character U+001B" in refusal


def test_shown_and_printable_escape_and_cut():
    assert gate.shown(f"{ESC}[1m") == "'\\x1b[1m'"
    long = gate.shown("x" * 1000)
    assert len(long) < 300 and long.endswith("... (1002 characters)")
    assert gate.printable(f"ok\n\tline{ESC}[0m\x00") == "ok\n\tline\\x1b[0m\\x00"


# --- size ------------------------------------------------------------------------------------------------
def test_a_sparse_huge_file_is_refused_by_its_apparent_size(tmp_path):
    huge = tmp_path / "result_0.txt"
    with huge.open("wb") as f:
        f.truncate(2**30)  # 1 GiB apparent, no blocks on disk
    with pytest.raises(ValueError, match=r"is 1024 MiB \(its apparent size\), over the 16 MiB allowed"):
        limits.read_capped(huge, limits.MAX_RESULT_BYTES)
    with pytest.raises(DataError, match=r"is 1024 MiB \(its apparent size\), over the 16 MiB allowed: refused unread"):
        check_log(huge)
    link = tmp_path / "link.txt"
    link.symlink_to(huge)
    with pytest.raises(OSError):  # read_capped never follows a link
        limits.read_capped(link, limits.MAX_RESULT_BYTES)


# --- trainperf check ---------------------------------------------------------------------------------------
def crafted_log(tmp_path: Path, key: str) -> tuple[Path, Path, str]:
    """A log whose ``key`` points at a rule file planted in tmp_path: (log, marker, value)."""
    value, marker = plant(tmp_path / "planted", key)
    log = write_log(tmp_path / f"{key}.txt", {**PATH_KEYS[key][1], key: value})
    return log, marker, value


def test_the_planted_rule_file_runs_under_the_official_checker_alone(tmp_path):
    """The exploit is real: the official checker, given the crafted log, executes the planted file."""
    log, marker, _ = crafted_log(tmp_path, "submission_division")
    cmd = [sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training", "--ruleset", "2.0.0"]
    cmd += ["--log_output", str(tmp_path / "cc.log"), str(log)]
    subprocess.run(cmd, cwd=tmp_path, capture_output=True, timeout=120, check=False)
    assert marker.read_text() == "the planted rule file ran"


@pytest.mark.parametrize("key", PATH_KEYS)
def test_check_log_refuses_a_crafted_log_without_running_the_checker(tmp_path, key, monkeypatch):
    log, marker, value = crafted_log(tmp_path, key)
    monkeypatch.setattr(
        "trainperf.rules.compliance._run_checker", lambda *a: pytest.fail("the official checker was run")
    )
    res = check_log(log)
    assert not res.passed and not marker.exists()
    (problem,) = res.problems
    assert problem.startswith(GATE_PROBLEM) and f"'{key}' has value {value!r}" in problem
    assert "the official checker was not run" in res.raw and res.confinement == ""


def test_the_check_command_refuses_every_crafted_log_and_prints_escapes(tmp_path):
    logs, markers, values = zip(*(crafted_log(tmp_path, key) for key in PATH_KEYS), strict=True)
    shady = write_log(tmp_path / "shady.txt", {"submission_platform": f"{ESC}[31mred{ESC}[0m"})
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "check", *map(str, logs), str(shady), "--verbose"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**{k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}, "COLUMNS": "2000"},
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert not any(m.exists() for m in markers)
    assert r.stdout.count("FAIL") == 4 and "PASS" not in r.stdout
    for key, value in zip(PATH_KEYS, values, strict=True):
        assert f"'{key}' has value {value!r}" in r.stdout
    assert ESC not in r.stdout + r.stderr and "\\x1b[31mred" in r.stdout
    assert "the official checker was not run" in r.stdout  # --verbose prints why instead of its output


def test_a_clean_log_still_goes_to_the_official_checker_and_says_how_it_ran(tmp_path):
    res = check_log(write_log(tmp_path / "result_0.txt"))
    assert res.passed, res.problems
    assert res.confinement.startswith(("confined: ", "not confined: "))


# --- confinement ---------------------------------------------------------------------------------------------
def test_confinement_falls_back_and_says_why(monkeypatch):
    monkeypatch.setenv(confine.CONFINE_ENV, "0")
    assert confine.confinement() == confine.Confinement((), "not confined: TRAINPERF_CONFINE=0")
    monkeypatch.delenv(confine.CONFINE_ENV)
    monkeypatch.setattr(confine.shutil, "which", lambda name: None)
    confine._probe.cache_clear()
    try:
        c = confine.confinement()
        assert c.wrap(["x"]) == ["x"]
        assert c.note == "not confined: bwrap is not installed; unshare is not installed"
        monkeypatch.setattr(confine.shutil, "which", lambda name: f"/usr/bin/{name}")
        monkeypatch.setattr(
            confine, "_try", lambda cmd: "Operation not permitted" if cmd[0].endswith("bwrap") else None
        )
        confine._probe.cache_clear()
        c = confine.confinement(writable=[Path("/tmp")])
        assert c.wrap(["x"]) == ["/usr/bin/unshare", "--user", "--map-root-user", "--net", "--", "x"]
        assert c.note.startswith("confined: unshare")
    finally:
        confine._probe.cache_clear()


def test_a_tool_runs_in_its_folder_with_no_input_and_the_settings_given_and_is_stopped_at_its_time_limit(tmp_path):
    unconfined = confine.Confinement((), "not confined: test")
    code = "import os, sys; print(os.getcwd(), os.environ['TP_X'], sys.stdin.read() == ''); sys.stdout.flush()"
    proc = confine.run_confined(unconfined, [sys.executable, "-c", code], cwd=tmp_path, timeout_s=60, env={"TP_X": "7"})
    assert (proc.returncode, proc.stdout.split()) == (0, [str(tmp_path), "7", "True"])
    slow = "import time; print('begun', flush=True); time.sleep(60)"
    with pytest.raises(subprocess.TimeoutExpired) as stopped:
        confine.run_confined(unconfined, [sys.executable, "-c", slow], cwd=tmp_path, timeout_s=1)
    out, err = confine.output_so_far(stopped.value)
    assert (out.strip(), err) == ("begun", "")


def test_a_confined_tool_has_no_network(tmp_path):
    c = confine.confinement(writable=[tmp_path])
    if not c.confined:
        pytest.skip(c.note)
    code = "import socket; print(sorted(name for _, name in socket.if_nameindex()))"
    out = subprocess.run(c.wrap([sys.executable, "-c", code]), capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "['lo']", c.note
