"""The ``tabmem`` command dispatches to the entry points it names, with their exit status."""

from __future__ import annotations

from tabmem.cli import main


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    shown = capsys.readouterr().out
    for command in ("run", "rescore", "tables", "calibration"):
        assert f"  {command} " in shown


def test_no_command_or_an_unknown_one_is_a_usage_error(capsys):
    assert main([]) == 2
    assert main(["bogus"]) == 2
    assert "unknown command 'bogus'" in capsys.readouterr().err


def test_a_subcommand_gets_its_own_arguments_and_exit_status(capsys):
    assert main(["rescore", "--help"]) == 0
    assert "--folder" in capsys.readouterr().out
    assert main(["rescore"]) == 1  # neither a file nor a folder: rescore's own error status
    assert "Give one transcript FILE or one --folder DIR." in capsys.readouterr().err
    assert main(["calibration", "--help"]) == 0
    assert "MLFLOW_TRACKING_URI" in capsys.readouterr().out
