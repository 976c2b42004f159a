// Listening pages' players, beside listen.js (which reports their events to the server): one
// sound at a time, the reason a sound did not count named as it happened (another sound started,
// a speed other than normal, a skip ahead), the P key where no Play button is, and the scales a
// trial still needs named next to its Next button.
(function () {
  "use strict";
  var players = Array.prototype.slice.call(document.querySelectorAll("audio:not([hidden])"));

  function name(audio) {
    return audio.getAttribute("aria-label") || "another sound";
  }

  function seconds(t) {
    return (Math.round(t * 10) / 10).toFixed(1) + " s";
  }

  players.forEach(function (audio) {
    var last = 0;
    audio.addEventListener("play", function () {
      // listen.js shows `data-why` instead of the server's general reason when a sound's
      // verdict is "not heard": what happened during this play, cleared when it starts.
      delete audio.dataset.why;
      if (audio.playbackRate !== 1) {
        audio.dataset.why = "It plays at " + audio.playbackRate + "\u00d7 speed, which does not count as listening: set the speed back to normal and play it to the end.";
      }
      players.forEach(function (other) {
        if (other !== audio && !other.paused) {
          other.dataset.why = "Stopped when " + name(audio) + " started: one sound plays at a time. Play it again to the end.";
          other.pause();
        }
      });
    });
    audio.addEventListener("ratechange", function () {
      if (audio.playbackRate !== 1) {
        audio.dataset.why = "It played at " + audio.playbackRate + "\u00d7 speed, which does not count as listening: set the speed back to normal and play it to the end.";
      }
    });
    audio.addEventListener("timeupdate", function () {
      if (!audio.seeking) { last = audio.currentTime; }
    });
    audio.addEventListener("seeking", function () {
      if (audio.currentTime > last + 0.25) {
        audio.dataset.why = "You skipped ahead from " + seconds(last) + " to " + seconds(audio.currentTime) + ": the part skipped was not heard. Play it again from " + seconds(last) + " or from the start.";
      }
    });
  });

  // Players of one Tab stop (raters/_clip_player.html): the button plays or pauses its sound
  // (Space and Enter, as any button), the arrows go back or ahead 2 s and Home to the start;
  // the time played shows beside it. Going ahead skips a part, which the server counts as not
  // heard, as with any player.
  document.querySelectorAll("[data-clip-play]").forEach(function (button) {
    var audio = document.getElementById(button.dataset.clipPlay);
    var time = document.querySelector("[data-clip-time='" + audio.id + "']");
    var show = function () {
      var total = isFinite(audio.duration) ? " of " + seconds(audio.duration) : "";
      time.textContent = seconds(audio.currentTime) + total;
    };
    button.addEventListener("click", function () {
      if (audio.paused) { audio.play(); } else { audio.pause(); }
    });
    audio.addEventListener("play", function () { button.textContent = "Pause"; });
    audio.addEventListener("pause", function () { button.textContent = audio.ended ? "Play again" : "Play"; });
    audio.addEventListener("ended", function () { button.textContent = "Play again"; });
    ["loadedmetadata", "timeupdate", "seeked", "emptied"].forEach(function (type) {
      audio.addEventListener(type, show);
    });
    button.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey || event.shiftKey) { return; }
      var to = null;
      if (event.key === "ArrowLeft") { to = audio.currentTime - 2; }
      if (event.key === "ArrowRight") { to = audio.currentTime + 2; }
      if (event.key === "Home") { to = 0; }
      if (to === null) { return; }
      event.preventDefault();
      var end = isFinite(audio.duration) ? audio.duration : to;
      audio.currentTime = Math.max(0, Math.min(end, to));
    });
    show();
  });

  // P plays or pauses where the page has no Play button of its own (the examples): the sound
  // playing, else the first not yet heard, else the last one played.
  var lastPlayed = null;
  players.forEach(function (audio) {
    audio.addEventListener("play", function () { lastPlayed = audio; });
  });
  document.addEventListener("keydown", function (event) {
    if ((event.key !== "p" && event.key !== "P") || event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (document.querySelector("[data-play]") || players.length === 0) { return; }
    var target = event.target;
    if (/^(TEXTAREA|SELECT)$/.test(target.tagName) || (target.tagName === "INPUT" && target.type !== "range")) { return; }
    event.preventDefault();
    var playing = players.filter(function (p) { return !p.paused; })[0];
    if (playing) { playing.pause(); return; }
    var next = players.filter(function (p) { return !p.hasAttribute("data-heard"); })[0] || lastPlayed || players[0];
    next.play();
  });

  // A trial: which scales still need an answer before Next opens.
  var form = document.querySelector("form[data-listening]");
  var hint = document.getElementById("next-hint");
  if (form && hint) {
    var scales = form.querySelectorAll("input[type=range][data-scale]");
    var show = function () {
      var missing = Array.prototype.filter.call(scales, function (s) {
        return s.classList.contains("untouched");
      }).map(function (s) {
        return document.getElementById(s.dataset.scale + "-legend").textContent;
      });
      hint.textContent = missing.length ? "Still to answer: " + missing.join(", ") + "." : "";
    };
    scales.forEach(function (s) { s.addEventListener("input", show); });
    show();
  }
})();
