// Listening pages. Trials: the scales open once the sound has played to its end; Next needs an
// answer on every scale. Familiarization: Start opens once every example has played to its end.
(function () {
  "use strict";
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
    audio.addEventListener("ended", function () {
      heard = true;
      scales.forEach(function (s) { s.disabled = false; });
      form.querySelector(".status").textContent = "You can now answer. Listen again as often as you like.";
      update();
    });
    scales.forEach(function (s) {
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

  var examples = document.querySelector("[data-familiarization]");
  if (examples) {
    var players = examples.querySelectorAll("audio");
    var start = examples.querySelector("#start");
    var played = 0;
    players.forEach(function (player) {
      player.addEventListener("ended", function () {
        if (player.dataset.heard) { return; }
        player.dataset.heard = "1";
        player.parentElement.querySelector(".heard").textContent = "played";
        played += 1;
        if (played === players.length) {
          start.disabled = false;
          document.getElementById("start-hint").textContent = "";
        }
      });
    });
  }
})();
