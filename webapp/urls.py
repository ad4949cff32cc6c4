"""URL routes of the web app."""

from django.templatetags.static import static
from django.urls import path
from django.views.generic.base import RedirectView

from webapp.views import (
    account,
    blocking,
    causality,
    finding,
    health,
    live,
    notifications,
    pages,
    reactions,
    settings,
    travel,
)

urlpatterns = [
    path("", pages.home, name="home"),
    # browsers ask for it whatever the page says
    path("favicon.ico", RedirectView.as_view(url=static("webapp/favicon.svg"), permanent=True)),
    path("public/", pages.public, name="public"),
    path("people/", pages.people, name="people"),
    path("search/", finding.search_page, name="search"),
    path("tag/<str:tag>/", finding.tag_page, name="tag"),
    path("notifications/", notifications.page, name="notifications"),
    path("live/", live.live, name="live"),
    path("post/", pages.post, name="post"),
    path("u/<str:username>/", pages.user_page, name="user"),
    path("u/<str:username>/followers/", pages.relations, {"which": "followers"}, name="followers"),
    path("u/<str:username>/following/", pages.relations, {"which": "following"}, name="following"),
    path("u/<str:username>/follow/", pages.follow, name="follow"),
    path("u/<str:username>/unfollow/", pages.follow, {"undo": True}, name="unfollow"),
    path("u/<str:username>/block/", blocking.block, name="block"),
    path("u/<str:username>/unblock/", blocking.block, {"undo": True}, name="unblock"),
    path("u/<str:username>/mute/", blocking.mute, name="mute"),
    path("u/<str:username>/unmute/", blocking.mute, {"undo": True}, name="unmute"),
    path("t/<str:group>/<str:tweet_id>/", pages.tweet_page, name="tweet"),
    path("t/<str:group>/<str:tweet_id>/like/", reactions.like, name="like"),
    path("t/<str:group>/<str:tweet_id>/unlike/", reactions.like, {"undo": True}, name="unlike"),
    path("t/<str:group>/<str:tweet_id>/repost/", reactions.repost, name="repost"),
    path("t/<str:group>/<str:tweet_id>/unrepost/", reactions.unrepost, name="unrepost"),
    path("t/<str:group>/<str:tweet_id>/delete/", reactions.delete, name="delete"),
    path("t/<str:group>/<str:tweet_id>/pin/", reactions.pin, name="pin"),
    path("t/<str:group>/<str:tweet_id>/unpin/", reactions.pin, {"undo": True}, name="unpin"),
    path("avatar/<str:username>.svg", reactions.avatar, name="avatar"),
    path("avatar/<str:username>/<str:version>.webp", settings.picture, name="avatar-picture"),
    path("signup/", account.signup, name="signup"),
    path("settings/", settings.settings_page, name="settings"),
    path("settings/profile/", settings.profile, name="settings-profile"),
    path("settings/password/", settings.password, name="settings-password"),
    path("settings/delete/", settings.delete, name="settings-delete"),
    path("login/", account.login, name="login"),
    path("logout/", account.logout, name="logout"),
    path("travel/", travel.travel, name="travel"),
    path("arrive/", travel.arrive, name="arrive"),
    path("causality/", causality.page, name="causality"),
    path("causality/events", causality.events, name="causality-events"),
    path("healthz", health.healthz, name="healthz"),
]

handler400 = "webapp.views.errors.bad_request"
handler403 = "webapp.views.errors.permission_denied"
handler404 = "webapp.views.errors.not_found"
handler500 = "webapp.views.errors.server_error"
