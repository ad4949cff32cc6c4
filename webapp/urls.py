"""URL routes of the web app (filled in by the web-app issue)."""

urlpatterns: list = []
