// Chirp's one script: a live character counter on the tweet box that counts as the server does
// (characters, a line break as one). A textarea's maxlength counts UTF-16 units instead, which
// capped a tweet of emoji at 140; without this script the server still refuses an overlong
// tweet with a clear message.
(function () {
  "use strict";

  function characters(text) {
    return Array.from(text.replace(/\r\n/g, "\n")).length;
  }

  document.querySelectorAll("textarea[data-max-chars]").forEach(function (box) {
    var most = parseInt(box.dataset.maxChars, 10);
    var counter = box.form.querySelector(".char-count");
    var button = box.form.querySelector("button[type=submit]");
    function update() {
      var left = most - characters(box.value);
      counter.textContent = left === 1 || left === -1 ? left + " character left" : left + " characters left";
      counter.classList.toggle("over", left < 0);
      button.disabled = left < 0;
    }
    box.addEventListener("input", update);
    update();
  });
})();
