// The console's only script: refresh the live part of a page every two seconds
// from the same URL's fragment (rendered on the server), and send POSTs with the
// page's CSRF token.  No framework, no build step, nothing from the network.
"use strict";
(function () {
  var live = document.getElementById("live");
  var csrf = document.querySelector('meta[name="console-csrf"]').content;
  function refresh() {
    var what = live && live.dataset.live;
    if (!what) return;
    fetch(what + location.search, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) live.innerHTML = html; })
      .catch(function () {});
  }
  setInterval(refresh, 2000);
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.method.toLowerCase() !== "post") return;
    e.preventDefault();
    fetch(form.action, {
      method: "POST", credentials: "same-origin",
      headers: { "X-Console-CSRF": csrf }, body: new FormData(form)
    }).then(function () { location.reload(); });
  });
})();
