"""Django settings. No database: everything the app stores goes through causal_client to the
regions' stores; sessions are signed cookies (they carry the user and the causal label, so any
region can serve them).

Per process, the environment says where it runs (the launcher sets all of these):
SATURN_TOPOLOGY (the topology file), SATURN_REGION (this web app's region), DJANGO_SECRET_KEY
(the same in every region: sessions and travel hand-offs are signed with it).
"""

import os
import secrets
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
# Without DJANGO_SECRET_KEY, a random key of this process: nothing signed can be forged, but
# sessions and travel hand-offs then work only within this process (the launcher gives every
# region of a run one shared key; a published fallback key would let anyone forge a session).
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(50)
DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")

SATURN_TOPOLOGY = os.environ.get("SATURN_TOPOLOGY", str(BASE_DIR / "topologies" / "demo-3region.toml"))
SATURN_REGION = os.environ.get("SATURN_REGION", "")  # "" = the topology's first region

INSTALLED_APPS = [
    "django.contrib.staticfiles",
    "django.contrib.messages",
    "webapp",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "webapp.security_headers.ContentSecurityPolicy",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "webapp.causal.CausalSessionMiddleware",
    "webapp.views.errors.ErrorPages",
]
ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"
DATABASES: dict = {}
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.messages.context_processors.messages",
                "webapp.causal.region_context",
            ],
            "builtins": ["webapp.templatetags.chirp"],
        },
    }
]

# Sessions: signed cookies, one per region (cookies ignore ports, and every region of the demo
# runs on the same host): travelling hands a session over explicitly (webapp/handoff.py).
_REGION_SUFFIX = "".join(c if c.isalnum() else "_" for c in SATURN_REGION) or "default"
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
SESSION_COOKIE_NAME = f"session_{_REGION_SUFFIX}"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = 14 * 24 * 3600
CSRF_COOKIE_NAME = f"csrftoken_{_REGION_SUFFIX}"
CSRF_FAILURE_VIEW = "webapp.views.errors.csrf_failure"
# Flash messages live in the region's own session cookie: the cookie storage's single
# "messages" cookie would be shared by every region on one host.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"
# Django's validators, plus one against passwords of blanks only (which Django's accept), run on
# sign-up with the username as the user's attribute (webapp/forms.py).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",
     "OPTIONS": {"user_attributes": ["username"]}},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    {"NAME": "webapp.forms.NotOnlyBlanks"},
]  # fmt: skip
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Under the deployment's TLS (gunicorn serves https only: services/plan.py) cookies go over TLS
# only, and browsers are told to come back over it (HSTS: a year, as its checkers advise).
SERVED_OVER_TLS = bool(os.environ.get("SATURN_TLS_DIR"))  # causal_client.tls.TLS_DIR_ENV
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SERVED_OVER_TLS
SECURE_HSTS_SECONDS = 365 * 24 * 3600 if SERVED_OVER_TLS else 0

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "webapp" / "static"  # whitenoise serves from here; no collectstatic
WHITENOISE_USE_FINDERS = True  # serve straight from webapp/static: no collectstatic step
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"one_line_4xx": {"()": "webapp.views.errors.OneLineClientErrors"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["one_line_4xx"]}},
    "root": {"handlers": ["console"], "level": "INFO"},
}
