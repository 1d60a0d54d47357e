/* Dreamweb: small progressive enhancements. Every page works without this file; it adds the review keyboard
   (j/k move, a approve, r reject, e edit, x select), auto-submitting filters, bulk selection, fading messages and a
   visible error when an htmx request fails.
   It never reads or inserts page text as HTML. */
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  var current = null; // the card the keyboard acts on
  var currentIndex = 0;

  function cards() { return Array.prototype.slice.call(document.querySelectorAll("[data-card]")); }

  function select(card, scroll) {
    if (current) current.classList.remove("is-current");
    current = card || null;
    if (!current) return;
    current.classList.add("is-current");
    currentIndex = cards().indexOf(current);
    if (scroll !== false) {
      current.focus({ preventScroll: true });
      current.scrollIntoView({ block: "start" });
    }
  }

  function move(step) {
    var all = cards();
    if (!all.length) return;
    var i = current && document.body.contains(current) ? all.indexOf(current) + step : (step > 0 ? 0 : all.length - 1);
    select(all[Math.max(0, Math.min(all.length - 1, i))]);
  }

  function visibleHeight(card) {
    var r = card.getBoundingClientRect();
    var top = Math.max(r.top, 56), bottom = Math.min(r.bottom, window.innerHeight);
    return Math.max(0, bottom - top);
  }

  // The card a key acts on is always one the reviewer can see: the current card while it is in view, else the card
  // that fills most of the window (scrolling with the mouse or the wheel moves the keyboard along).
  function inView() {
    if (current && document.body.contains(current) && visibleHeight(current) >= Math.min(120, current.offsetHeight / 2)) {
      return current;
    }
    var best = null, most = 0;
    cards().forEach(function (card) {
      var h = visibleHeight(card);
      if (h > most) { most = h; best = card; }
    });
    return best;
  }

  function ensureCurrent() {
    if (!current || !document.body.contains(current)) {
      var all = cards();
      select(all[Math.min(currentIndex, all.length - 1)] || null, true);
    }
    var card = inView();
    if (card && card !== current) select(card, false);
    return current;
  }

  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  document.addEventListener("keydown", function (ev) {
    var target = ev.target;
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && target.tagName === "TEXTAREA" && target.form) {
      ev.preventDefault();
      target.form.requestSubmit();
      return;
    }
    if (ev.key === "Enter" && target.matches && target.matches("details.reject [data-reason]")) {
      // The box belongs to the page's shared form (reviews/_decide_form.html): Enter rejects this card.
      ev.preventDefault();
      var button = target.closest("details.reject").querySelector("[data-reject]");
      if (button) button.click();
      return;
    }
    if (ev.key === "Escape" && target.closest && target.closest("details.reject")) {
      var details = target.closest("details.reject");
      details.open = false;
      var card = details.closest("[data-card]");
      if (card) select(card);
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(target)) return;
    var key = ev.key;
    if (key === "j" || key === "k") { ev.preventDefault(); move(key === "j" ? 1 : -1); return; }
    if ("arex".indexOf(key) < 0 || key.length !== 1) return;
    var card = ensureCurrent();
    if (!card) return;
    if (key === "a") {
      var approve = card.querySelector("[data-action=approve]");
      if (approve) { ev.preventDefault(); approve.click(); }
    } else if (key === "e") {
      var edit = card.querySelector("[data-action=edit]");
      if (edit) { ev.preventDefault(); edit.click(); }
    } else if (key === "r") {
      var reject = card.querySelector("details.reject");
      if (reject) {
        ev.preventDefault();
        reject.open = true;
        var input = reject.querySelector("[data-reason]");
        if (input) input.focus();
      }
    } else if (key === "x") {
      var box = card.querySelector("[data-select]");
      if (box) { ev.preventDefault(); box.checked = !box.checked; updateSelected(); }
    }
  });

  document.addEventListener("click", function (ev) {
    var card = ev.target.closest && ev.target.closest("[data-card]");
    if (card && card !== current) select(card, false);
    var copy = ev.target.closest && ev.target.closest("[data-copy]");
    if (copy) {
      var field = document.querySelector(copy.getAttribute("data-copy"));
      if (field && navigator.clipboard) {
        navigator.clipboard.writeText(field.value).then(function () { copy.textContent = "Copied"; });
      } else if (field) { field.select(); }
    }
  });

  function updateSelected() {
    var boxes = document.querySelectorAll("[data-select]");
    var n = 0;
    boxes.forEach(function (b) { if (b.checked) n += 1; });
    document.querySelectorAll("[data-selected-count]").forEach(function (el) {
      el.textContent = n ? n + " selected" : "";
    });
    document.querySelectorAll("[data-select-all]").forEach(function (all) {
      all.checked = boxes.length > 0 && n === boxes.length;
      all.indeterminate = n > 0 && n < boxes.length;
    });
  }

  document.addEventListener("change", function (ev) {
    var el = ev.target;
    if (el.matches("[data-select-all]")) {
      document.querySelectorAll("[data-select]").forEach(function (b) { b.checked = el.checked; });
      updateSelected();
    } else if (el.matches("[data-select]")) {
      updateSelected();
    } else if (el.matches("select[data-autosubmit]") && el.form && !el.form.hasAttribute("hx-get")) {
      el.form.requestSubmit();
    }
  });

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) ev.preventDefault();
  }, true);

  function fadeMessages(root, only) {
    (only ? [only] : (root || document).querySelectorAll(".msg")).forEach(function (msg) {
      // A message that offers an action (the Undo after a decision), or says something failed, stays long enough to
      // be read and used.
      var stay = msg.querySelector("form") || msg.hasAttribute("data-request-failed") ? 15000 : 6000;
      window.setTimeout(function () { msg.classList.add("fading"); }, stay);
      window.setTimeout(function () { if (msg.parentNode) msg.parentNode.removeChild(msg); }, stay + 500);
    });
  }

  document.addEventListener("htmx:afterSettle", function (ev) {
    var focusable = ev.target.querySelector && ev.target.querySelector("[data-autofocus]");
    if (focusable) {
      focusable.focus();
      var card = focusable.closest("[data-card]");
      if (card) select(card, false);
    } else if (ev.target.matches && ev.target.matches("[data-card]") && document.body.contains(ev.target)) {
      select(ev.target, false);
    } else if (current && !document.body.contains(current)) {
      // The current card left the queue: its successor takes its place, so "a a a" walks down the queue.
      ensureCurrent();
    }
    updateSelected();
    refillQueue();
  });

  // When the last card of the page has been decided, ask the server for the list again: the next page's cards,
  // or the empty state. (Without JavaScript every decision reloads the page anyway.)
  function refillQueue() {
    var list = document.getElementById("queue-list");
    if (!list || !window.htmx || cards().length || list.querySelector(".empty, [data-bulk-confirm]")) return;
    window.htmx.ajax("GET", window.location.pathname + window.location.search, { target: "#queue-list", swap: "outerHTML" });
  }
  document.addEventListener("htmx:oobAfterSwap", function (ev) {
    if (ev.target && ev.target.id === "flash") fadeMessages(ev.target);
  });

  // A request htmx sent that failed: a 4xx or 5xx answer (htmx swaps none by default), no answer at all, or a timeout.
  // htmx itself shows nothing, so the reviewer would think the click did nothing, or worse that it worked. One
  // handler for every htmx action on every page: a toast that says so, in words, announced (role=alert); the card,
  // the form and what was typed stay as they were, ready for the retry. A box that would go on showing a stale answer
  // (the policy's impact preview, the edit card's live diff) says data-when-failed's text instead. Text only:
  // nothing from the failed answer is shown.
  function failureText(ev) {
    var xhr = ev.detail && ev.detail.xhr;
    var status = ev.type === "htmx:responseError" && xhr ? xhr.status : 0;
    if (status >= 500) return "That did not go through (server error " + status + "): nothing was changed. Try again.";
    if (status >= 400) return "That was refused (error " + status + "): nothing was changed. Reload the page and try again.";
    if (ev.type === "htmx:timeout") return "That did not go through (the server took too long to answer). Try again.";
    return "That did not go through (no answer from the server: check your connection). Try again.";
  }

  function showFailure(ev) {
    var text = failureText(ev);
    var flash = document.getElementById("flash");
    if (flash) {
      var list = flash.querySelector(".messages");
      if (!list) {
        list = document.createElement("ul");
        list.className = "messages";
        flash.appendChild(list);
      }
      var same = Array.prototype.some.call(list.querySelectorAll(".msg-error[data-request-failed]"), function (m) {
        return m.textContent === text; // a poll that keeps failing says it once
      });
      if (!same) {
        var msg = document.createElement("li");
        msg.className = "msg msg-error";
        msg.setAttribute("role", "alert");
        msg.setAttribute("data-request-failed", "");
        msg.textContent = text;
        list.appendChild(msg);
        fadeMessages(list, msg);
      }
    }
    var target = ev.detail && ev.detail.target;
    var failed = target && target.getAttribute && target.getAttribute("data-when-failed");
    if (failed) {
      var note = document.createElement("p");
      note.className = "callout callout-warn request-failed";
      note.textContent = failed;
      target.replaceChildren(note);
    }
  }
  ["htmx:responseError", "htmx:sendError", "htmx:timeout"].forEach(function (name) {
    document.addEventListener(name, showFailure);
  });

  document.addEventListener("DOMContentLoaded", function () {
    fadeMessages(document);
    var hash = window.location.hash;
    if (hash && hash.indexOf("#card-") === 0) select(document.querySelector(hash));
  });
})();
