// raypd pages: progressive enhancement only (every form works without this file).
// Loaded from a file because the Content-Security-Policy forbids inline script.
(function () {
  "use strict";

  // New-deployment form: show the phases of the chosen mode only.
  function setupModeSections() {
    var select = document.querySelector('select[name="raypd:mode"]');
    if (!select) return;
    var sections = document.querySelectorAll("fieldset[data-mode]");
    function apply() {
      sections.forEach(function (section) {
        section.hidden = section.getAttribute("data-mode") !== select.value;
      });
    }
    select.addEventListener("change", apply);
    apply();
  }

  // Tear down: the button stays disabled until the deployment's name is typed exactly.
  function setupTeardown() {
    var input = document.querySelector("input[data-confirm-name]");
    var button = document.getElementById("teardown-button");
    if (!input || !button) return;
    var busy = button.disabled;
    function apply() {
      button.disabled = busy || input.value.trim() !== input.getAttribute("data-confirm-name");
    }
    input.addEventListener("input", apply);
    apply();
  }

  // Forms that ask first (cancel a job).
  function setupConfirms() {
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
      });
    });
  }

  function cssClassesFor(record) {
    var classes = ["ev", "ev-" + (record.kind || "log")];
    if (record.severity) classes.push("ev-" + record.severity);
    if (record.state) classes.push("ev-" + record.state);
    return classes.join(" ");
  }

  // Live progress: follow the job's server-sent events until its "end" record.
  function setupProgress() {
    var job = document.getElementById("job");
    if (!job || job.getAttribute("data-active") !== "1" || !window.EventSource) return;
    var bar = document.getElementById("job-progress");
    var count = document.getElementById("job-count");
    var percent = document.getElementById("job-percent");
    var log = document.getElementById("event-log");
    var errorLine = document.getElementById("job-error");
    var badge = job.querySelector(".job-head .badge");
    var url = job.getAttribute("data-events-url") + "?after=" + encodeURIComponent(job.getAttribute("data-after") || "0");
    var source = new EventSource(url);

    function setProgress(done, total) {
      bar.max = total > 0 ? total : 1;
      bar.value = total > 0 ? done : 0;
      count.textContent = done + " / " + total + " resources";
      percent.textContent = (total > 0 ? Math.round((done / total) * 100) : 0) + "%";
    }

    source.onmessage = function (message) {
      var record;
      try { record = JSON.parse(message.data); } catch (e) { return; }
      if (record.message) {
        var item = document.createElement("li");
        item.className = cssClassesFor(record);
        item.textContent = record.message;
        log.appendChild(item);
        log.scrollTop = log.scrollHeight;
      }
      if (typeof record.done === "number" && typeof record.total === "number") {
        setProgress(record.done, record.total);
      }
      if (record.kind === "status" && badge) {
        badge.textContent = record.status;
      }
      if (record.kind === "end") {
        source.close();
        if (badge) {
          badge.textContent = record.status;
          badge.className = "badge badge-" + (record.status === "succeeded" ? "ok" : (record.status === "failed" ? "bad" : "warn"));
        }
        if (record.status === "succeeded") {
          bar.max = Math.max(1, record.total || 1);
          bar.value = bar.max;
          percent.textContent = "100%";
          count.textContent = (record.total || 0) + " / " + (record.total || 0) + " resources";
        }
        if (record.error) {
          errorLine.textContent = record.error;
          errorLine.classList.remove("hidden");
        }
        job.setAttribute("data-active", "0");
        job.setAttribute("data-ended", record.status);
        var done = function () {
          if (job.getAttribute("data-operation") === "destroy" && record.status === "succeeded") {
            window.location.assign(job.getAttribute("data-index-url") + "?removed=" + encodeURIComponent(job.getAttribute("data-deployment")));
          } else {
            window.location.reload();
          }
        };
        window.setTimeout(done, 1200);
      }
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    setupModeSections();
    setupTeardown();
    setupConfirms();
    setupProgress();
  });
})();
