"""labkit.search.__main__ (`python -m labkit search`): one model resolved for every bucket, the device and precision
options, and a usage error's exit status 2."""
import json

import optuna
import pytest

import labkit.artifacts.models as models
from labkit.search import open_storage
from labkit.search.__main__ import main
from labkit.search.storage import recorded_precision

from tiny_search import CM, db, tiny  # noqa: F401 (fixtures)


def test_the_command_line_resolves_once_for_every_bucket(tiny, tmp_path, monkeypatch):
    calls = []
    real = models._weights_hash
    monkeypatch.setattr(models, "_weights_hash", lambda *args: calls.append(args) or real(*args))
    cost = tmp_path / "cm.json"
    cost.write_text(json.dumps(CM.to_dict()))
    storage = f"sqlite:///{tmp_path / 'search.db'}"
    assert main(["--model", tiny, "--per-bucket", "--trials", "1", "--sampler", "random", "--storage", storage,
                 "--prompts", "1", "--tokens", "4", "--cost-model", str(cost), "--no-progress", "--threads", "0"]) == 0
    assert len(calls) == 1


def test_the_command_line_takes_device_and_dtype(tiny, tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["--model", tiny, "--objective", "measured", "--trials", "2", "--sampler", "random", "--storage",
                 storage, "--prompts", "1", "--max-new-tokens", "6", "--no-progress", "--threads", "0",
                 "--device", "cpu", "--dtype", "bf16"]) == 0
    assert "study tiny4-measured-bf16: 2 new trials" in capsys.readouterr().out
    study = optuna.load_study(study_name="tiny4-measured-bf16", storage=open_storage(storage))
    assert recorded_precision(study.user_attrs) == {"dtype": "bf16", "device": "cpu"}
    with pytest.raises(SystemExit) as exit_:
        main(["--model", tiny, "--trials", "1", "--storage", storage, "--dtype", "int4", "--no-progress"])
    assert exit_.value.code == 2 and "argument --dtype: dtype must be one of" in capsys.readouterr().err


def test_a_usage_error_exits_with_status_2(tiny, tmp_path):
    with pytest.raises(SystemExit) as exit_:                       # a usage error: argparse's status 2
        main(["--model", tiny, "--trials", "0", "--storage", db(tmp_path), "--no-progress"])
    assert exit_.value.code == 2
