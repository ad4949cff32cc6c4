"""The web app in-process (pytest-django's client) against a launched region: the basic loop."""

from __future__ import annotations

import pytest
from helpers.waiting import eventually, unique
from helpers.web import django_region, web_cluster  # noqa: F401  (fixtures)

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def test_sign_up_post_and_see_it_at_once(client, django_region):  # noqa: F811
    name = unique("u").replace("-", "_")[-30:]
    form = {"username": name, "password": "pw-123456", "password_again": "pw-123456"}
    reply = client.post("/signup/", form)
    assert reply.status_code == 302, reply.content[:500]
    reply = client.post("/post/", {"body": "hello <script>alert(1)</script>"})
    assert reply.status_code == 302
    page = client.get("/").content.decode()
    assert "hello &lt;script&gt;alert(1)&lt;/script&gt;" in page  # escaped, and there at once
    assert "<script>alert(1)" not in page
    assert f"@{name}" in page
    eventually(
        lambda: "hello &lt;script&gt;" in client.get("/public/").content.decode(),
        what="the escaped tweet on the public line",
    )
