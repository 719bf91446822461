"""The HTML copies (`make html`) render offline: every script they load is a local file beside them."""
import nbformat

from labkit.lessons.notebook import export_html, remote_scripts


def _tiny_notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("## Formula\n\n$$\\alpha = \\sum_x \\min(p(x), q(x))$$"),
                nbformat.v4.new_code_cell("1 + 1", outputs=[nbformat.v4.new_output(
                    "execute_result", {"text/plain": "2"}, execution_count=1)])]
    nbformat.write(nb, str(path))
    return path


def test_exported_html_loads_no_remote_script(tmp_path):
    html = export_html(_tiny_notebook(tmp_path / "nb.ipynb"), tmp_path / "html")
    text = html.read_text()
    assert remote_scripts(text) == []
    assert 'src="assets/mathjax/MathJax.js' in text
    assert (tmp_path / "html" / "assets" / "mathjax" / "MathJax.js").exists()
    assert (tmp_path / "html" / "assets" / "require.min.js").exists()


def test_remote_scripts_finds_cdn_urls():
    page = ('<script src="https://cdnjs.cloudflare.com/a.js"></script><link rel="stylesheet" href="//x.org/s.css">'
            '<script type="module">await import("https://cdn.example/m.esm.min.mjs")</script>'
            '<a href="https://arxiv.org/abs/2309.08168">paper</a><script src="assets/local.js"></script>')
    found = remote_scripts(page)
    assert "https://cdnjs.cloudflare.com/a.js" in found and "//x.org/s.css" in found
    assert "https://cdn.example/m.esm.min.mjs" in found
    assert not any("arxiv" in u or "assets/" in u for u in found)
