"""A cell's process hands its MLflow writes to a helper process (``tabmem.tracking.writer``):
the runs land in the same store, whole, while the cell's process never imports MLflow; an
error raised while writing comes back to the caller; a helper that is gone costs no run."""

from __future__ import annotations

import json
import textwrap

from harness import run_python

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import pandas as pd
    from tabmem.data import dataset_specs, load_dataset
    from tabmem.results import QueryRecord
    from tabmem.tracking.inputs import ShownData
    from tabmem.tracking.store import TrackingStore
    from tabmem.tracking.traces import QueryLog

    store = TrackingStore.at(Path(sys.argv[1]), "helper")
    store.use_writer()
    iris = ShownData.of(load_dataset(dataset_specs()["iris"]))
    records = [QueryRecord(prompt="1,2,", expected="3", completion="3", score=1.0)]

    def write(params):
        try:
            return store.log_cell(
                "evidence · m · iris · header",
                {"config_hash": "h1", "verdict": "evidence"},
                params,
                {"n_hits": 1, "n_queries": 1},
                {"queries.json": pd.DataFrame({"prompt": ["1,2,"], "score": [1.0]})},
                {"config.yaml": "seed: 0"},
                failed=False,
                description="**evidence**: one of one.",
                queries=QueryLog(records, {"model": "m", "test": "header"}, (1, 2)),
                dataset=iris,
            )
        except Exception as exc:
            return f"raised {type(exc).__name__}: {exc}"

    said = {"helper": write({"seed": 0, "test": "header"})}
    said["mlflow_imported"] = "mlflow" in sys.modules
    said["error"] = write({"bad|name": 1})
    store._writer._process.kill()  # the helper dies: the next run is written here
    store._writer._process.wait()
    said["gone"] = write({"seed": 1})
    print(json.dumps(said))
    """
)


def test_runs_go_through_the_helper_errors_come_back_and_a_dead_helper_loses_none(tmp_path):
    from mlflow.tracking import MlflowClient

    done = run_python("-c", SCRIPT, str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["mlflow_imported"] is False  # the first run was written by the helper alone
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(said["helper"])
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "evidence · m · iris · header"
    assert run.data.tags["verdict"] == "evidence"
    assert run.data.tags["mlflow.note.content"] == "**evidence**: one of one."
    assert run.data.params == {"seed": "0", "test": "header"}
    assert run.data.metrics == {"n_hits": 1.0, "n_queries": 1.0}
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"queries.json", "config.yaml"} <= artifacts
    [data] = run.inputs.dataset_inputs
    assert data.dataset.name == "iris"
    traces = client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id)
    assert len(traces) == 1
    assert said["error"].startswith("raised MlflowException") and "bad|name" in said["error"]
    assert client.get_run(said["gone"]).data.params == {"seed": "1"}


def test_no_helper_where_mlflow_is_imported_already(tmp_path):
    import mlflow  # noqa: F401  (as in this test process)

    from tabmem.tracking.store import TrackingStore

    store = TrackingStore.at(tmp_path, "here")
    store.use_writer()
    assert store._writer is None
