"""The README's Client API example runs as written (against the partial-replication demo)."""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

README = Path(__file__).resolve().parents[1] / "README.md"


def client_api_snippet() -> str:
    text = README.read_text()
    section = text[text.index("## Client API") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_client_api_example_runs(launch, capsys):
    cluster = launch("demo-3region-partial.toml")
    code = client_api_snippet().replace("127.0.0.1:7210", cluster.topology.client_address("virginia"))
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    assert namespace["row"].text("name") == "Alice"
    assert namespace["row"].counter("tweets") == 1
    assert namespace["page"].columns == ["2026-11-22T10:02|t2", "2026-11-22T10:01|t1"]
    assert namespace["older"].columns == ["2026-11-22T10:00|t0"]
    assert namespace["alice"].region == "frankfurt"
    assert "not replicated at region 'virginia'" in capsys.readouterr().out
    assert namespace["won"].applied and namespace["won"].value == "alice's token"
    assert namespace["alice"].strong_read("stock", "tickets").value == "7"
