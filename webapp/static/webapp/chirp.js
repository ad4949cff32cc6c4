// Chirp's one script. Everything here is a convenience: without it every page still works.
// - A live character counter on the tweet box that counts as the server does (characters, a line
//   break as one); Ctrl+Enter (Cmd+Enter) posts it. A textarea's maxlength counts UTF-16 units instead, which capped a tweet of
//   emoji at 140; the server refuses an overlong tweet with a clear message anyway.
// - The travel page's hand-off form is submitted at once (its button does it otherwise).
// - A tweet's like and repost buttons are disabled once clicked (a double click sends one
//   request; the server counts each user once anyway); Delete asks first.
// - Live lines: a line drawn with data-live polls /live/ every few seconds while the tab is
//   visible and shows "N new tweets" (or replies, notifications) above it, a link that draws the
//   line again; the header's unread count follows too.
(function () {
  "use strict";

  var handoff = document.querySelector("form[data-submit-at-once]");
  if (handoff) {
    handoff.submit();
  }

  document.addEventListener("submit", function (event) {
    var asks = event.target.querySelector("button[data-confirm]");
    if (asks && !window.confirm(asks.dataset.confirm)) {
      event.preventDefault();
      return;
    }
    var button = event.target.closest(".tweet") && event.target.querySelector("button[type=submit]");
    if (button) {
      setTimeout(function () { button.disabled = true; }, 0);  // after the form has been sent
    }
  });

  function characters(text) {
    return Array.from(text.replace(/\r\n/g, "\n")).length;
  }

  document.querySelectorAll("textarea[data-max-chars]").forEach(function (box) {
    var most = parseInt(box.dataset.maxChars, 10);
    var counter = box.form.querySelector(".char-count");
    var button = box.form.querySelector("button[type=submit]");
    function update() {
      var left = most - characters(box.value);
      var n = Math.abs(left), unit = n === 1 ? " character" : " characters";
      counter.textContent = left >= 0 ? n + unit + " left" : n + unit + " too many";
      counter.classList.toggle("over", left < 0);
      button.disabled = left < 0;
    }
    box.addEventListener("input", update);
    box.addEventListener("keydown", function (event) {  // Ctrl+Enter (Cmd+Enter) posts
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !button.disabled) {
        event.preventDefault();
        box.form.requestSubmit(button);
      }
    });
    update();
  });

  // Relative times ("now", "42s", "5m", "3h", "6d") move on while the page is open, as
  // webapp/formatting.py's relative() writes them; older ones are dates and stay.
  function relative(elapsed) {
    if (elapsed < 5) return "now";
    var units = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]];
    for (var i = 0; i < units.length; i++) {
      if (elapsed >= units[i][1]) return Math.floor(elapsed / units[i][1]) + units[i][0];
    }
    return "now";
  }
  function tick() {
    document.querySelectorAll(".tweet time[datetime], .notice time[datetime]").forEach(function (time) {
      var elapsed = (Date.now() - Date.parse(time.getAttribute("datetime"))) / 1000;
      if (elapsed >= 0 && elapsed < 7 * 86400) time.textContent = relative(elapsed);
    });
  }
  setInterval(tick, 15000);

  var LIVE_EVERY_MS = 5000;
  var line = document.querySelector("[data-live]");
  var badge = document.querySelector(".unread-count");
  function showUnread(unread) {
    if (!badge || unread === null || unread === undefined) return;
    badge.dataset.unread = unread;
    badge.textContent = unread > 20 ? "20+" : String(unread);
    badge.hidden = unread === 0;
  }
  function showNew(n) {
    var bar = line.querySelector(".new-bar");
    if (n === 0) {
      if (bar) bar.remove();
      return;
    }
    if (!bar) {
      bar = document.createElement("a");
      bar.className = "new-bar";
      bar.setAttribute("role", "status");
      bar.href = window.location.pathname + window.location.search + (line.id ? "#" + line.id : "");
      bar.addEventListener("click", function (event) {
        event.preventDefault();
        window.location.reload();
      });
      var heading = line.querySelector("h2");
      line.insertBefore(bar, heading ? heading.nextSibling : line.firstChild);
    }
    var what = line.dataset.what || "tweet";
    var plural = line.dataset.plural || what + "s";
    bar.textContent = (n > 20 ? "20+" : n) + " new " + (n === 1 ? what : plural) + " · show";
  }
  function poll() {
    if (document.hidden) return;
    var url = "/live/?line=" + encodeURIComponent(line ? line.dataset.live : "notices") +
      "&since=" + encodeURIComponent(line ? line.dataset.since : "");
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (reply) { return reply.ok ? reply.json() : null; })
      .then(function (data) {
        if (!data) return;
        if (line) showNew(data["new"]);
        showUnread(data.unread);
      })
      .catch(function () {});  // offline for a moment: the next poll tries again
  }
  if (line || badge) setInterval(poll, LIVE_EVERY_MS);
})();
