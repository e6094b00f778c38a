"""The summary's last lines say how to look at the runs, wherever tabmem is installed, and the
address they give opens the experiment's runs list (not MLflow's GenAI overview): one function
builds that address for every place that prints or links it."""

import io

from rich.console import Console

from tabmem.report.summary import browse_hint, print_summary
from tabmem.results import CellResult
from tabmem.tracking.store import TrackingStore
from tabmem.tracking.ui_links import RUNS_VIEW, experiment_url


def test_a_local_store_is_browsed_with_mlflows_own_command():
    hint = browse_hint("sqlite:////tmp/x/mlflow.db")
    assert hint.startswith("start the UI with `mlflow ui --backend-store-uri sqlite:////tmp/x/")
    assert hint.endswith("then open http://127.0.0.1:5000")  # no store there: no experiment
    assert "make" not in hint  # a wheel installed elsewhere has no Makefile


def test_a_tracking_server_is_opened_at_its_address():
    assert browse_hint("http://127.0.0.1:5000") == "open http://127.0.0.1:5000"


def test_the_printed_address_opens_the_experiments_runs_list(tmp_path):
    store = TrackingStore.at(tmp_path, "runs-list")
    run_id = store.log_cell("evidence · m · iris · header", {}, {}, {}, {}, {}, failed=False)
    address = experiment_url("http://127.0.0.1:5000", store.experiment_id)
    assert address.endswith(f"/#/experiments/{store.experiment_id}?{RUNS_VIEW}")
    assert browse_hint(store.uri, "runs-list").endswith(f"then open {address}")

    CellResult("m", "iris", "header", "original", "finished", "evidence", "4/4", run_id).write(
        tmp_path / "0"
    )
    console = Console(width=100, record=True, file=io.StringIO())
    print_summary(tmp_path, store.uri, "runs-list", console)
    printed = " ".join(console.export_text().split())
    assert address in printed and "workflowType=machine_learning" in printed
