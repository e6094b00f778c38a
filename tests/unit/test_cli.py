"""The ``tabmem`` command dispatches to its subcommands in-process, each with its own ``--help``
and exit status; the lab's sweep is a function call whose output goes to the lab's log."""

from __future__ import annotations

import sys

import pytest

from tabmem.cli import COMMANDS, main
from tabmem.errors import TabmemError
from tabmem.lab.evaluate import run_sweep
from tabmem.main import run


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    shown = capsys.readouterr().out
    for command in ("run", "rescore", "tables", "calibration", "lab"):
        assert f"  {command} " in shown
    assert set(COMMANDS) == {"run", "rescore", "tables", "calibration", "lab", "report"}


def test_no_command_or_an_unknown_one_is_a_usage_error(capsys):
    assert main([]) == 2
    assert main(["bogus"]) == 2
    assert "unknown command 'bogus'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["rescore", "tables", "calibration", "lab", "report"])
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
