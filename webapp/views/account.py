"""Sign up, log in, log out."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from causal_client import NoQuorum, OutcomeUnknown
from webapp import throttle
from webapp.accounts import UsernameTaken, authenticate, register
from webapp.forms import LoginForm, SignupForm, password_rules


def next_url(request: HttpRequest) -> str:
    """The same-site URL to go to after logging in ("/" for anything else)."""
    target = request.POST.get("next") or request.GET.get("next") or "/"
    safe = url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})
    return target if safe and (target.startswith("/") or "://" in target) else "/"


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    form = SignupForm(request.POST or None)
    status = 400 if request.method == "POST" else 200
    if request.method == "POST" and form.is_valid():
        try:
            register(request.causal, form.cleaned_data["username"], form.cleaned_data["password"])
        except UsernameTaken:
            form.add_error("username", "That username is taken (in this or another region).")
        except NoQuorum as exc:  # the name is kept for this browser: a retry picks it up
            status = 503
            form.add_error(None, (
                f"Signing up needs most regions to answer, and {', '.join(exc.missing) or 'too many'} "
                "do not right now. Try again in a moment."
            ))  # fmt: skip
        except OutcomeUnknown:  # 202, not 5xx: the session (with the name's token) is saved only then
            status = 202
            form.add_error(None, (
                "We could not confirm your sign-up. Send the form again from this browser: the name "
                "is kept for you, and nobody else can take it meanwhile."
            ))  # fmt: skip
        else:
            messages.success(request, f"Welcome, @{form.cleaned_data['username']}!")
            return redirect("home")
    return render(request, "signup.html", {"form": form, "password_rules": password_rules()}, status=status)


@require_http_methods(["GET", "POST"])
def login(request: HttpRequest) -> HttpResponse:
    if request.method == "GET" and request.causal.account is not None:
        return HttpResponseRedirect(next_url(request))  # signed in already: no form to fill
    form = LoginForm(request.POST or None)
    status = 400 if request.method == "POST" else 200
    if request.method == "POST" and form.is_valid():
        name, address = form.cleaned_data["username"], request.META.get("REMOTE_ADDR", "")
        verdict = throttle.check(request.causal, name, address)
        if not verdict.allowed:  # the password is not even tried
            wait = verdict.retry_after_s
            when = f"{wait} s" if wait < 60 else f"{-(-wait // 60)} min"
            form.add_error(None, f"Too many failed logins from here; try again in {when}.")
            reply = render(request, "login.html", {"form": form, "next": next_url(request)}, status=429)
            reply["Retry-After"] = str(verdict.retry_after_s)
            return reply
        checked = authenticate(request.causal, name, form.cleaned_data["password"])
        if checked.account is not None:
            request.causal.sign_in(checked.account.username)
            return HttpResponseRedirect(next_url(request))  # a URL, never a view name
        throttle.failed(request.causal, name, address, known=checked.known)
        form.add_error(None, "Unknown username or wrong password.")
    return render(request, "login.html", {"form": form, "next": next_url(request)}, status=status)


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    if request.causal.sign_out(everywhere=True):
        messages.info(request, "Signed out.")
    else:
        messages.warning(
            request,
            "Signed out here; the other regions could not be told yet (the store did "
            "not answer): log out there too, or again here in a moment.",
        )
    return redirect("public")
