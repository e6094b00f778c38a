"""The summary's last line says how to look at the runs, wherever tabmem is installed."""

from tabmem.report.summary import browse_hint


def test_a_local_store_is_browsed_with_mlflows_own_command():
    hint = browse_hint("sqlite:////tmp/x/mlflow.db")
    assert hint == "browse them with: mlflow ui --backend-store-uri sqlite:////tmp/x/mlflow.db"
    assert "make" not in hint  # a wheel installed elsewhere has no Makefile


def test_a_tracking_server_is_opened_at_its_address():
    assert browse_hint("http://127.0.0.1:5000") == "open http://127.0.0.1:5000"
