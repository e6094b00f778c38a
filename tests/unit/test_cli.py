"""The ``tabmem`` command dispatches to its subcommands in-process, each with its own ``--help``
and exit status; the lab's sweep is a function call whose output goes to the lab's log."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tabmem.battery.base import CLAIMS, claiming, needs_of, registry
from tabmem.cli import COMMANDS, main
from tabmem.errors import TabmemError
from tabmem.lab.evaluate import run_sweep
from tabmem.llm.base import LOGPROBS
from tabmem.main import run
from tabmem.report.catalog import CLAIM_TEXT

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    shown = capsys.readouterr().out
    for command in ("run", "rescore", "tables", "calibration", "lab"):
        assert f"  {command} " in shown
    expected = {"run", "rescore", "tables", "calibration", "lab", "report", "bundle", "tests"}
    assert set(COMMANDS) == expected


def test_no_command_or_an_unknown_one_is_a_usage_error(capsys):
    assert main([]) == 2
    assert main(["bogus"]) == 2
    assert "unknown command 'bogus'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command", ["rescore", "tables", "calibration", "lab", "report", "bundle", "tests"]
)
def test_every_subcommand_names_itself_in_its_help(command, capsys):
    assert main([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: tabmem {command} ")


def test_a_subcommand_gets_its_own_arguments_and_exit_status(capsys):
    assert main(["rescore"]) == 1  # neither a file nor a folder: rescore's own error status
    assert "Give one transcript FILE or one --folder DIR." in capsys.readouterr().err
    assert main(["calibration", "--help"]) == 0
    assert "MLFLOW_TRACKING_URI" in capsys.readouterr().out
    assert main(["lab", "no-such-setting"]) == 1
    assert "minimal" in capsys.readouterr().err  # the settings it knows


def test_the_lab_takes_its_options_between_setting_and_overrides(capsys):
    # an option between the setting and its overrides is not an "unrecognized argument"
    assert main(["lab", "minimal", "--outputs-dir", "unused", "n_planted=99"]) == 1
    assert "plants 99 of 2 plantable datasets" in capsys.readouterr().err


def test_run_is_hydra_in_this_process_with_its_exit_status(capsys):
    argv = list(sys.argv)
    assert run(["model=no-such-model"]) == 1
    assert "no-such-model" in capsys.readouterr().err
    assert sys.argv == argv


def test_the_lab_sweep_is_a_call_whose_output_goes_to_the_log(tmp_path):
    calls = []

    def sweep(arguments):
        calls.append(arguments)
        print("cell output")
        return 0 if len(calls) == 1 else 3

    log = tmp_path / "lab" / "sweep.log"
    run_sweep(sweep, ["-m", "model=m"], log)
    assert calls == [["-m", "model=m"]]
    assert "cell output" in log.read_text()
    with pytest.raises(TabmemError, match=r"failed \(exit 3\)"):
        run_sweep(sweep, ["-m"], log)


def test_tabmem_tests_says_what_each_registered_test_claims_needs_and_asks(capsys):
    assert main(["tests"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = {
        line.split()[0]: line
        for line in lines
        if line[:1].strip() and line.split()[0] in registry()
    }
    assert set(table) == set(registry())  # one line per registered test
    for name, line in table.items():
        claim = CLAIM_TEXT[next(c for c in CLAIM_TEXT if name in claiming(c))][0]
        assert f"  {claim}  " in line, line
        assert ("  yes  " in line) == (name in claiming("rows_seen")), line
        assert ("log-probs" in line) == (LOGPROBS in needs_of(name)), line
    # query counts from the composed configs, the papers' where they differ
    assert "n_queries=25 (papers 250)" in table["row_completion"]
    assert "split_rows=[2,4,6,8]" in table["header"]
    assert "(papers" not in table["header"]
    assert "n_samples=200 (papers 1000)" in table["sample"]
    assert any(line.startswith("  memorization: header, row_completion") for line in lines)


def test_the_claims_are_worded_where_docs_tests_md_words_them():
    text = (ROOT / "docs" / "tests.md").read_text()
    table = text.split("## What each test claims", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| **")]
    documented = {row[0].removeprefix("| ") for row in rows}
    assert documented == {f"**{label}**{rest}" for label, rest in CLAIM_TEXT.values()}
    assert set(CLAIM_TEXT) == set(CLAIMS)
    for claim, (label, _) in CLAIM_TEXT.items():  # and the tests each row names are the claim's
        (row,) = [r for r in rows if r[0].startswith(f"| **{label}**")]
        named = set(re.findall(r"`([a-z_+]+)`", row[1]))
        assert named == set(claiming(claim)), (claim, named ^ set(claiming(claim)))


def test_run_help_points_to_tabmem_tests_not_thirty_names_nor_make(capsys):
    assert run(["--help"]) == 0
    shown = capsys.readouterr().out
    assert "== Config groups" in shown and "oracle-memorizer" in shown
    (test_line,) = [line for line in shown.splitlines() if line.startswith("test: ")]
    assert "tabmem tests" in test_line and "calibration_rows" not in test_line
    assert "make ui" not in shown and "mlflow ui --backend-store-uri" in shown
