"""The lab's own JupyterLab defaults (jupyter/labconfig, put on JUPYTER_CONFIG_PATH by `make lab` and by the browser
tests' server): no "get notified about official Jupyter news?" prompt over the first figures."""
import json
import re
from pathlib import Path

import jupyterlab

ROOT = Path(__file__).resolve().parent.parent
OVERRIDES = ROOT / "jupyter" / "labconfig" / "default_setting_overrides.json"
PLUGIN = "@jupyterlab/apputils-extension:notification"


def test_the_news_prompt_is_off_by_the_labs_own_settings():
    overrides = json.loads(OVERRIDES.read_text())
    assert overrides[PLUGIN]["fetchNews"] == "false"
    package, name = PLUGIN.split(":")                 # the installed JupyterLab has this plugin, key and value
    schema = json.loads((Path(jupyterlab.__file__).parent / "schemas" / package / f"{name}.json").read_text())
    fetch_news = schema["properties"]["fetchNews"]
    assert "false" in fetch_news.get("enum", [c.get("const") for c in fetch_news.get("oneOf", [])])


def test_make_lab_puts_the_folder_on_the_config_path():
    target = re.search(r"^lab:.*\n\t(.*)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert target.startswith('JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter') and "jupyter lab" in target
