"""Contamination lab: fine-tune a small model on chosen datasets, then measure each test's
true-positive rate (planted datasets, by repetitions) and false-positive rate (held out).

    python scripts/contamination_lab.py                       # the minimal setting (CPU, minutes)
    python scripts/contamination_lab.py full                  # conf/lab/full.yaml (GPU)
    python scripts/contamination_lab.py minimal training.method=lora checkpoints=[0,8]

Settings are conf/lab/<name>.yaml; ``key=value`` arguments override them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tabmem.errors import TabmemError
from tabmem.lab.run import run_lab


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setting", nargs="?", default="minimal", help="conf/lab/<setting>.yaml")
    parser.add_argument("overrides", nargs="*", help="key=value changes to the setting")
    parser.add_argument("--outputs-dir", default="outputs", type=Path)
    args = parser.parse_args(argv)
    overrides = list(args.overrides)
    setting = args.setting
    if "=" in setting:
        overrides.insert(0, setting)
        setting = "minimal"
    try:
        outcome = run_lab(setting, overrides, args.outputs_dir)
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    timings = ", ".join(f"{k} {v:.0f} s" for k, v in outcome.seconds.items())
    print(f"Report: {outcome.files['table_md']} and {outcome.files['figure']} ({timings}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
