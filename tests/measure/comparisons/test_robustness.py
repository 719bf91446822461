"""labkit.measure.comparisons.robustness: the robustness report of a model folder on prompts from outside the
training data (installed packages)."""


def test_robustness_report_on_outside_prompts(tmp_path):
    from labkit.measure.comparisons.robustness import robustness_report

    from tiny_models import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "tiny", n_layers=2)
    report = robustness_report(str(folder), n_prompts=1, n_tokens=4, n_random=2, ratios=(0.25,),
                               prompt_source="packages")
    assert report["prompt_source"]["source"] == "packages" and report["prompt_source"]["packages"]
    assert report["by_ratio"][0]["skipped"] == 1 and 0 <= report["by_ratio"][0]["agreement"] <= 1
