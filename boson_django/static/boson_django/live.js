/* The dashboard, live: every few seconds, while the tab is shown, fetch the panels'
 * HTML from the server (rendered and escaped there, under the page's own permission
 * checks) and put it in place of the panels shown. No framework, no other asset.
 *
 * #boson-live carries the fragment's URL (data-url) and the period in ms (data-every);
 * after each refresh its data-refreshes counts them, and data-paused is set while no
 * refresh is scheduled. A hidden tab fetches nothing; shown
 * again, it refreshes at once. A refresh that fails (the server down, a deploy) is
 * tried again at the next tick; one answered by a redirect (the session ended: the
 * login page) or a refusal stops the refreshing, and says so. */
(function () {
  "use strict";
  var live = document.getElementById("boson-live");
  if (!live || !window.fetch) {
    return;
  }
  var url = live.getAttribute("data-url");
  var every = Math.max(Number(live.getAttribute("data-every")) || 5000, 1000);
  var status = document.getElementById("boson-live-state");
  var timer = null;
  var busy = false;
  var stopped = false;

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function stop(why) {
    stopped = true;
    pause();
    say(why);
  }

  function refresh() {
    if (busy || stopped || document.visibilityState !== "visible") {
      return;
    }
    busy = true;
    fetch(url, {credentials: "same-origin", cache: "no-store", headers: {"Accept": "text/html"}})
      .then(function (response) {
        if (response.redirected || response.status === 403 || response.status === 404) {
          stop("Live refresh stopped (HTTP " + response.status + "): reload the page.");
          return null;
        }
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html !== null && !stopped) {
          live.innerHTML = html;
          live.setAttribute("data-refreshes", String(Number(live.getAttribute("data-refreshes") || 0) + 1));
        }
      })
      .catch(function () { /* offline for a moment: the next tick tries again */ })
      .then(function () { busy = false; });
  }

  function resume() {
    if (!timer && !stopped) {
      timer = window.setInterval(refresh, every);
      live.removeAttribute("data-paused");
    }
  }

  function pause() {
    if (timer) {
      window.clearInterval(timer);
      timer = null;
    }
    live.setAttribute("data-paused", "true");
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") {
      refresh();
      resume();
    } else {
      pause();
    }
  });
  if (document.visibilityState === "visible") {
    resume();
  }
})();
