"""docs/python.md's examples run as written: every ```python block, in order,
in one namespace, from the source tree (their paths are relative to it)."""
import os
import re

from conftest import SOURCE_DIR


def test_python_md_examples_run(monkeypatch, capsys):
    text = (SOURCE_DIR / "docs" / "python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(SOURCE_DIR)
    namespace = {"__name__": "python_md"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/python.md block {i + 1}", "exec"), namespace)  # the doc asserts its claims
    assert "fits" in capsys.readouterr().out
