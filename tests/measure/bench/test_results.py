"""labkit.measure.bench.results: the committed benchmark reads in the harness's vocabulary (older files' columns
renamed, every greedy row identical to the plain loop), its tables, and drafter rows absent from older files."""
from labkit.measure.bench import results


def test_committed_results_without_drafter_rows_still_read():
    rows = (results.load_results().get("strategies") or {}).get("rows", [])
    assert isinstance(results.drafter_rows(rows), list) and isinstance(results.format_drafter_table(rows), str)


def test_committed_results_load_in_the_harness_vocabulary():
    result = results.load_results()
    rows = result["greedy"] + result["sampling"] + (result["strategies"] or {}).get("rows", [])
    assert rows and all("speedup" in r and "identical" in r and "speedup_vs_plain_loop" not in r for r in rows)
    assert all(r["identical"] is True for r in result["greedy"])
    assert all(v is not None for r in rows for v in r.values())
    assert "vs loop" in results.format_table(result["greedy"]).splitlines()[0]
