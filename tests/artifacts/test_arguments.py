"""The command line's argument types: what each accepts, the one line it answers a bad value with, and that a
config's own check becomes the same kind of usage error naming the option the user typed."""
import argparse
from dataclasses import dataclass

import pytest
import torch

from labkit.artifacts import arguments


def parse(kind, text: str):
    """``text`` read by the argument type ``kind``: its value, or the message argparse would print."""
    parser = arguments.command_parser(prog="prog")
    parser.add_argument("--x", type=kind)
    try:
        return parser.parse_args([f"--x={text}"]).x
    except SystemExit as end:
        assert end.code == 2
        raise


def error_line(capsys, kind, text: str) -> str:
    with pytest.raises(SystemExit):
        parse(kind, text)
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.removeprefix("prog: error: argument --x: ").rstrip("\n")


def test_numbers_and_their_ranges(capsys):
    assert parse(arguments.count, "3") == 3 and parse(arguments.natural, "0") == 0
    assert parse(arguments.positive, "0.5") == 0.5 and parse(arguments.fraction, "1") == 1.0
    assert parse(arguments.open_fraction, "0.05") == 0.05 and parse(arguments.at_least(2), "2") == 2
    assert error_line(capsys, arguments.count, "0") == "must be an integer >= 1, got 0"
    assert error_line(capsys, arguments.count, "1.5") == "must be an integer, got '1.5'"
    assert error_line(capsys, arguments.natural, "-1") == "must be an integer >= 0, got -1"
    assert error_line(capsys, arguments.positive, "0") == "must be a number > 0.0, got 0.0"
    assert error_line(capsys, arguments.nonnegative, "-0.1") == "must be a number >= 0.0, got -0.1"
    assert error_line(capsys, arguments.fraction, "nan") == "must be a number in [0.0, 1.0], got nan"
    assert error_line(capsys, arguments.open_fraction, "1") == "must be a number in (0, 1), got '1'"
    assert error_line(capsys, arguments.number, "x") == "must be a number, got 'x'"


def test_models_names_and_prompt_sources(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    (tmp_path / "bare").mkdir()
    (tmp_path / "p.txt").write_text("def f():\n    pass\n")
    assert parse(arguments.model, "default") == "default" and parse(arguments.model, "hf") == "hf"
    assert error_line(capsys, arguments.model, "bare").endswith("(bare exists but holds no config.json)")
    assert error_line(capsys, arguments.model, "gpt2").endswith("(gpt2 is no folder here)")   # no hub ids offline
    assert parse(arguments.new_model_name, "my-model_2") == "my-model_2"
    for bad in ("", "a/b", "..", "-x"):
        assert error_line(capsys, arguments.new_model_name, bad).startswith("must be a folder name")
    assert parse(arguments.prompt_source, "packages-long") == "packages-long"
    assert parse(arguments.prompt_source, "p.txt") == "p.txt"
    for bad in ("wikipedia", "missing.jsonl", "hf"):
        assert error_line(capsys, arguments.prompt_source, bad).startswith("must be one of stdlib, packages, ")


def test_devices_and_precisions(capsys):
    assert parse(arguments.device, "cpu") == "cpu" and parse(arguments.device, "auto") == "auto"
    assert parse(arguments.dtype, "bf16") == "bf16"
    assert error_line(capsys, arguments.dtype, "int4").startswith("dtype must be one of fp32, ")
    assert "must be 'cpu', 'cuda'" in error_line(capsys, arguments.device, "tpu")
    if not torch.cuda.is_available():
        assert "no CUDA device on this machine" in error_line(capsys, arguments.device, "cuda")


def test_files_and_folders_to_read_and_to_write(tmp_path, capsys):
    (tmp_path / "f.json").write_text("{}")
    assert parse(arguments.existing_file, str(tmp_path / "f.json")) == str(tmp_path / "f.json")
    assert parse(arguments.existing_folder, "") == ""                          # "": the config's default
    assert error_line(capsys, arguments.existing_folder, str(tmp_path / "f.json")).startswith("no folder at ")
    new = tmp_path / "a" / "b" / "out.json"
    assert parse(arguments.output_file, str(new)) == str(new) and not (tmp_path / "a").exists()   # nothing made
    assert error_line(capsys, arguments.output_file, str(tmp_path)).endswith("is there and is not a file")
    assert error_line(capsys, arguments.output_folder, str(tmp_path / "f.json")).endswith("is not a folder")
    assert "is not a folder this user can write into" in error_line(capsys, arguments.output_path,
                                                                    str(tmp_path / "f.json" / "x"))


@dataclass
class Config:
    steps: int = 1
    rate: float = 0.1
    name: str = "x"

    def __post_init__(self):
        if self.steps > 10:
            raise ValueError(f"steps must be <= 10, got {self.steps}")


def test_config_options_and_their_own_check_name_the_option(capsys):
    parser = arguments.command_parser(prog="prog")
    arguments.add_config_options(parser, {"steps": 1, "rate": 0.1, "name": "x"}, {"rate": arguments.positive})
    args = parser.parse_args(["--steps", "4", "--rate", "2"])
    assert (args.steps, args.rate, args.name) == (4, 2.0, "x")
    with pytest.raises(SystemExit):
        parser.parse_args(["--rate", "0"])
    assert capsys.readouterr().err == "prog: error: argument --rate: must be a number > 0.0, got 0.0\n"
    with pytest.raises(SystemExit) as end:
        arguments.checked(parser, Config, steps=11)
    assert end.value.code == 2
    assert capsys.readouterr().err == "prog: error: --steps must be <= 10, got 11\n"
    assert arguments.checked(parser, Config, steps=3) == Config(steps=3)


def test_usage_errors_are_one_line_without_the_usage_block(capsys):
    parser = arguments.command_parser("what it does", prog="python -m labkit x")
    parser.add_argument("--n", type=int, required=True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--bogus"])
    assert capsys.readouterr().err == "python -m labkit x: error: the following arguments are required: --n\n"
    assert isinstance(parser, argparse.ArgumentParser)
