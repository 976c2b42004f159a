// Listening pages. The player's events go to the server, which decides what was heard (seeking
// ahead does not count) and answers its verdict. Trials: the scales open once the server says the
// sound was heard; Next needs an answer on every scale. A/B trials: the questions open once both
// sounds were heard. Familiarization: Start opens once every example was heard.
(function () {
  "use strict";
  var csrf = document.querySelector("input[name=csrfmiddlewaretoken]");
  // Longer than a DCASE clip (4 s): its play and its end are all a clip sends.
  var CHECKPOINT_MS = 5000;

  // Every sound of the page reports through one queue: the server measures the time since each
  // play and a play of one sound ends the stretch of another, so one sound's "ended" must reach
  // it before the next sound's "play", even on a slow network.
  var queue = Promise.resolve();

  // Reports play, pause, seeks, ended and a checkpoint every five seconds while playing, one at
  // a time and in order (the server measures the time since each play). A page that goes away
  // mid-sound reports a pause on its way out; a checkpoint keeps what was played should even
  // that be lost. `verdict` gets each answer.
  function report(url, token, audio, verdict) {
    var last = 0;
    var lastSent = 0;
    var post = function (body) {
      return fetch(url, {
        method: "POST",
        credentials: "same-origin",
        keepalive: true,
        headers: { "Content-Type": "application/json", "Accept": "application/json",
                   "X-CSRFToken": csrf ? csrf.value : "" },
        body: JSON.stringify(body)
      });
    };
    var send = function (event, t, from) {
      var body = { token: token, event: event, t: t };
      if (from !== undefined) { body.from = from; }
      queue = queue.then(function () {
        return post(body).then(function (r) { return r.json(); })
          .then(function (v) { verdict(v, event); }).catch(function () {});
      });
    };
    // Leaving the page: no turn in the queue (the page will not be there to wait for it).
    window.addEventListener("pagehide", function () {
      if (!audio.paused && !audio.ended) {
        post({ token: token, event: "pause", t: audio.currentTime }).catch(function () {});
      }
    });
    audio.addEventListener("play", function () {
      lastSent = Date.now();
      send("play", audio.currentTime);
    });
    audio.addEventListener("pause", function () {
      if (!audio.ended) { send("pause", audio.currentTime); }
    });
    audio.addEventListener("seeking", function () { send("seeking", audio.currentTime, last); });
    audio.addEventListener("timeupdate", function () {
      if (audio.seeking) { return; }
      last = audio.currentTime;
      // None in the last half second: "ended" follows.
      if (!audio.paused && Date.now() - lastSent > CHECKPOINT_MS && audio.duration - last > 0.5) {
        lastSent = Date.now();
        send("timeupdate", last);
      }
    });
    audio.addEventListener("ended", function () { send("ended", audio.duration); });
  }
  document.querySelectorAll("[data-play]").forEach(function (button) {
    var audio = document.getElementById(button.dataset.play);
    button.addEventListener("click", function () {
      if (audio.paused) { audio.play(); } else { audio.pause(); }
    });
    audio.addEventListener("play", function () { button.textContent = "Pause"; });
    audio.addEventListener("pause", function () { button.textContent = "Play again"; });
  });

  // "P" plays or pauses the sound from anywhere on the page (not while typing in a field).
  document.addEventListener("keydown", function (event) {
    if ((event.key !== "p" && event.key !== "P") || event.ctrlKey || event.metaKey || event.altKey) { return; }
    var button = document.querySelector("[data-play]");
    var target = event.target;
    var typing = /^(TEXTAREA|SELECT)$/.test(target.tagName) ||
      (target.tagName === "INPUT" && target.type !== "range");
    if (button && !typing) {
      event.preventDefault();
      button.click();
    }
  });

  var form = document.querySelector("form[data-listening]");
  if (form) {
    var audio = document.getElementById("stimulus");
    var scales = form.querySelectorAll("input[type=range][data-scale]");
    var next = form.querySelector("#next");
    var heard = false;
    var update = function () {
      next.disabled = !heard || Array.prototype.some.call(scales, function (s) {
        return s.classList.contains("untouched");
      });
    };
    var open = function () {
      heard = true;
      scales.forEach(function (s) { s.disabled = false; });
      form.querySelector(".status").textContent = "You can now answer. Listen again as often as you like.";
      update();
    };
    if (form.hasAttribute("data-heard")) { open(); }
    report(form.dataset.player, form.dataset.token, audio, function (v, event) {
      if (v.heard) {
        if (!heard) { open(); }
      } else if (event === "ended" || event === "pause") {
        // What players.js saw happen (a skip, a speed change), else the server's reason.
        form.querySelector(".status").textContent = audio.dataset.why || v.reason || v.detail || "";
      }
    });
    scales.forEach(function (s) {
      // An untouched slider has no value yet (its thumb rests in the middle unseen): the first
      // arrow or page key gives it the middle, 5, shown; the next ones move from there. Home
      // and End go to their ends as always.
      s.addEventListener("keydown", function (event) {
        var moves = /^(Arrow(Up|Down|Left|Right)|Page(Up|Down))$/.test(event.key);
        if (moves && s.classList.contains("untouched")) {
          event.preventDefault();
          s.value = 5;
          s.dispatchEvent(new Event("input", { bubbles: true }));
        }
      });
      s.addEventListener("input", function () {
        s.classList.remove("untouched");
        form.elements[s.dataset.scale].value = s.value;
        document.getElementById(s.dataset.scale + "-value").textContent = s.value;
        s.setAttribute("aria-valuetext", s.value);
        update();
      });
    });
    form.addEventListener("submit", function (event) {
      if (next.disabled) { event.preventDefault(); return; }
      // One submission per page; the request key makes a repeated one harmless anyway.
      setTimeout(function () { next.disabled = true; }, 0);
    });
  }

  // An A/B trial: its questions open once the server says both sounds were heard; Next needs
  // an answer to each, and the hint names those still to answer.
  var pair = document.querySelector("form[data-pair]");
  if (pair) {
    var sounds = pair.querySelectorAll("audio");
    var questions = pair.querySelectorAll("fieldset[data-question]");
    var done = pair.querySelector("#next");
    var ready = function () {
      var both = Array.prototype.every.call(sounds, function (a) { return a.hasAttribute("data-heard"); });
      var missing = Array.prototype.filter.call(questions, function (q) {
        q.disabled = !both;
        return !q.querySelector("input:checked");
      });
      done.disabled = !both || missing.length > 0;
      pair.querySelector(".status").textContent = both ?
        "You can now answer. Listen again as often as you like." : "Play A and B to their ends; then the questions open.";
      document.getElementById("next-hint").textContent = both && missing.length ? "Still to answer: " +
        missing.map(function (q) { return q.querySelector("legend").textContent; }).join(", ") + "." : "";
    };
    sounds.forEach(function (audio) {
      report(pair.dataset.player, audio.dataset.token, audio, function (v, event) {
        var label = audio.parentElement.querySelector(".heard");
        if (v.heard) {
          audio.setAttribute("data-heard", "");
          label.textContent = "heard";
          ready();
        } else if (event === "ended" || event === "pause") {
          label.textContent = audio.dataset.why || v.reason || v.detail || "";
        }
      });
    });
    pair.addEventListener("change", ready);
    pair.addEventListener("submit", function (event) {
      if (done.disabled) { event.preventDefault(); return; }
      setTimeout(function () { done.disabled = true; }, 0);
    });
    ready();
  }

  var examples = document.querySelector("[data-familiarization]");
  if (examples) {
    var players = examples.querySelectorAll("audio");
    var start = examples.querySelector("#start");
    var check = function () {
      var all = Array.prototype.every.call(players, function (p) { return p.hasAttribute("data-heard"); });
      if (all) {
        start.disabled = false;
        document.getElementById("start-hint").textContent = "";
      }
    };
    // Where the examples' form is the answer itself (the text-prompt study), one submission
    // per page, as for trials.
    if (examples.tagName === "FORM") {
      examples.addEventListener("submit", function () {
        setTimeout(function () { start.disabled = true; }, 0);
      });
    }
    players.forEach(function (player) {
      report(examples.dataset.player, player.dataset.token, player, function (v, event) {
        var label = player.parentElement.querySelector(".heard");
        if (v.heard) {
          player.setAttribute("data-heard", "");
          label.textContent = "heard";
          check();
        } else if (event === "ended" || event === "pause") {
          // What players.js saw happen (another example started, a speed change, a skip),
          // else the server's reason.
          label.textContent = player.dataset.why || v.reason || v.detail || "";
        }
      });
    });
  }
})();
