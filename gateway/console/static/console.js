// The console's only script: refresh the live part of a page every two seconds
// from its fragment (rendered on the server); send POSTs with the page's CSRF token,
// putting the answer into the form's data-target element; poll a playground call's
// fragment while it runs.  No framework, no build step, nothing from the network.
"use strict";
(function () {
  var csrf = document.querySelector('meta[name="console-csrf"]').content;
  var live = document.getElementById("live");
  function get(url) {
    return fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; });
  }
  setInterval(function () {
    var what = live && live.dataset.live;
    if (what) get(what + location.search).then(function (html) {
      if (html !== null) live.innerHTML = html;
    }).catch(function () {});
  }, 2000);
  setInterval(function () {
    document.querySelectorAll("[data-poll]").forEach(function (el) {
      get(el.dataset.poll).then(function (html) {
        if (html !== null && el.isConnected) el.outerHTML = html;
      }).catch(function () {});
    });
  }, 700);
  document.addEventListener("submit", function (e) {
    var form = e.target;
    // getAttribute: a form's field named "method" or "action" shadows the property.
    if ((form.getAttribute("method") || "").toLowerCase() !== "post") return;
    e.preventDefault();
    var body = new URLSearchParams(new FormData(form, e.submitter));
    fetch(form.getAttribute("action"), {
      method: "POST", credentials: "same-origin",
      headers: { "X-Console-CSRF": csrf }, body: body
    }).then(function (r) { return r.text(); }).then(function (html) {
      var target = form.dataset.target && document.getElementById(form.dataset.target);
      if (target) target.innerHTML = html; else location.reload();
    });
  });
})();
