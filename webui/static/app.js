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

  // Copy buttons next to commands and YAML (the `copyable` macro): the text of the element named by
  // data-copy-target, to the clipboard; where the clipboard is refused, the text is selected instead.
  function setupCopyButtons() {
    document.querySelectorAll("button[data-copy-target]").forEach(function (button) {
      button.addEventListener("click", function () {
        var target = document.getElementById(button.getAttribute("data-copy-target"));
        if (!target) return;
        var text = target.value !== undefined ? target.value : target.textContent;
        function selected() {
          var range = document.createRange();
          range.selectNodeContents(target);
          var selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          button.textContent = "Selected: press Ctrl+C";
        }
        if (!navigator.clipboard) { selected(); return; }
        navigator.clipboard.writeText(text).then(function () { button.textContent = "Copied"; }, selected);
      });
    });
  }

  // Forms that ask first (cancel a job).
  function setupConfirms() {
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
      });
    });
  }

  // "about 12 min left": minutes are what a person plans around; the last minute says so.
  function etaText(seconds) {
    if (seconds <= 0) return "";
    if (seconds < 60) return "less than a minute left";
    return "about " + Math.round(seconds / 60) + " min left";
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
    var logCount = document.getElementById("event-count");
    var errorLine = document.getElementById("job-error");
    var badge = job.querySelector(".job-head .badge");
    var unit = (job.querySelector(".progress-row") || job).getAttribute("data-unit") || "resources";
    // window=30: the server ends each stream after 30 s and EventSource resumes it from the last
    // event it saw (Last-Event-ID), so an open tab never holds a server thread for a whole update.
    var url = job.getAttribute("data-events-url") + "?window=30&after=" + encodeURIComponent(job.getAttribute("data-after") || "0");
    var source = new EventSource(url);

    function setProgress(done, total) {
      bar.max = total > 0 ? total : 1;
      bar.value = total > 0 ? done : 0;
      count.textContent = done + " / " + total + " " + unit;
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
        if (logCount) logCount.textContent = String(log.children.length);
      }
      if (typeof record.done === "number" && typeof record.total === "number") {
        setProgress(record.done, record.total);
      }
      var live = document.getElementById("bench-live");
      if (live && record.kind === "benchmark" && record.message) {
        live.textContent = record.message;  // requests done, the current rate, the live p50 TTFT
      }
      var eta = document.getElementById("job-eta");
      if (eta && typeof record.etaSeconds === "number") {
        eta.textContent = etaText(record.etaSeconds);
      }
      if (record.kind === "status" && badge) {
        badge.textContent = record.status;
      }
      if (record.kind === "end") {
        source.close();
        if (eta) eta.textContent = "";
        // Nothing is left to cancel; and the title's badge says where the job left the deployment
        // (not "updating", nor "destroying" after a tear-down) in the moment before the page moves on.
        var cancel = document.getElementById("cancel-job");
        if (cancel) cancel.closest("form").remove();
        showDeploymentStatus(job, record.status);
        if (badge) {
          badge.textContent = record.status;
          badge.className = "badge badge-" + (record.status === "succeeded" ? "ok" : (record.status === "failed" ? "bad" : "warn"));
        }
        if (record.status === "succeeded") {
          bar.max = Math.max(1, record.total || 1);
          bar.value = bar.max;
          percent.textContent = "100%";
          count.textContent = (record.total || 0) + " / " + (record.total || 0) + " " + unit;
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

  // The deployment's status in the title badge, read again when its job ends (the runner settles
  // the deployment before it ends the job). A tear-down that succeeded leaves no deployment.
  function showDeploymentStatus(job, jobStatus) {
    var title = document.querySelector("h1 .badge[data-status]");
    var url = job.getAttribute("data-deployment-url");
    if (!title || !url || !window.fetch) return;
    function show(status) {
      title.textContent = status;
      title.setAttribute("data-status", status);
      title.className = "badge badge-neutral";
    }
    window.fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (response) {
        if (response.status === 404 && job.getAttribute("data-operation") === "destroy" && jobStatus === "succeeded") {
          show("destroyed");
          return null;
        }
        return response.ok ? response.json() : null;
      })
      .then(function (deployment) { if (deployment && deployment.status) show(deployment.status); })
      .catch(function () {});
  }

  // "Launch anyway": the guarded button stays disabled until the box is ticked.
  function setupForceBoxes() {
    document.querySelectorAll("input[data-guards]").forEach(function (box) {
      var button = document.getElementById(box.getAttribute("data-guards"));
      if (!button) return;
      var busy = button.disabled;
      function apply() { button.disabled = busy || !box.checked; }
      box.addEventListener("change", apply);
      apply();
    });
  }

  // Where the app serves raypd's docs (the footer's docs link says), ending with "/".
  function docsBase() {
    var footer = document.querySelector("a[data-docs-base]");
    return footer ? footer.getAttribute("data-docs-base") : "/docs/";
  }

  function element(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function table(headers, rows) {
    var t = element("table", null, "table");
    var head = t.createTHead().insertRow();
    headers.forEach(function (h) { head.appendChild(element("th", h)); });
    var body = t.createTBody();
    rows.forEach(function (cells) {
      var row = body.insertRow();
      cells.forEach(function (cell) { row.appendChild(element("td", cell)); });
    });
    return t;
  }

  function yesNo(value) { return value ? "yes" : "no"; }

  function sectionError(box, section, what) {
    if (section && section.error) {
      box.appendChild(element("p", what + ": " + section.error, "notice notice-bad"));
      return true;
    }
    return false;
  }

  // Live status (real engine): nodes, Ray pods per group, RayService and Serve, refreshed in place.
  // The shape is serve.verify.cluster_status's; a section that could not be read carries `error`.
  function renderStatus(box, status) {
    box.textContent = "";
    if (!status.available) {
      box.appendChild(element("p", status.reason || "No live status.", "muted"));
      return;
    }
    if (sectionError(box, status, "Cluster")) return;
    var ready = status.ready || {};
    var app = status.serveApplication || {};
    if (!sectionError(box, ready, "RayService")) {
      box.appendChild(element("p", "RayService " + (status.rayService || "") + ": " +
        (ready.status === "True" ? "Ready" : "not Ready") + (ready.reason ? " (" + ready.reason + ")" : "") +
        (ready.message ? ": " + ready.message : ""), "strong"));
    }
    if (!sectionError(box, app, "Serve")) {
      box.appendChild(element("p", "Serve application " + (app.name || "") + ": " + (app.status || "UNKNOWN") +
        (app.message ? ": " + app.message : "")));
      var deployments = app.deployments || {};
      var names = Object.keys(deployments);
      if (names.length) {
        box.appendChild(table(["Serve deployment", "Status", "Message"], names.map(function (name) {
          var d = deployments[name] || {};
          return [name, d.status || "", d.message || ""];
        })));
      }
    }
    renderMetrics(box, status.metrics, status.dashboards);
    renderScaling(box, status.scaling);
    if (!sectionError(box, status.nodes, "Nodes")) {
      box.appendChild(table(["GPU node", "Group", "Type", "Zone", "Ready", "GPUs", "EFA"], (status.nodes || []).map(function (n) {
        return [n.name, n.nodeGroup || n.eksNodeGroup || "", n.instanceType || "", n.zone || "", yesNo(n.ready), n.gpus, n.efa];
      })));
    }
    if (!sectionError(box, status.rayPods, "Ray pods")) {
      box.appendChild(table(["Ray worker pod", "Group", "Phase", "Node", "Status"], (status.rayPods || []).map(function (p) {
        return [p.name, p.group || "", p.phase || "", p.node || "", p.status || ""];
      })));
    }
    if (status.checkedAt) box.appendChild(element("p", "checked " + status.checkedAt, "muted small"));
  }

  // The SLO strip's numbers and raypd's active alerts, from the deployment's Prometheus (issue 18 §4);
  // the shape is serve.live_metrics's. Values are numbers or null (nothing observed in the window).
  function formatNumber(value, unit) {
    if (value === null || value === undefined) return "no data";
    if (unit === "s") return value < 1 ? Math.round(value * 1000) + " ms" : value.toFixed(2) + " s";
    if (unit === "percentunit") return (value * 100).toFixed(1) + "%";
    return value.toFixed(value < 10 ? 2 : 0) + "/s";
  }

  function renderMetrics(box, metrics, dashboards) {
    if (!metrics) return;
    var section = element("div", null, "live-metrics");
    section.id = "live-metrics";
    section.appendChild(element("h3", "SLO strip (Prometheus, last 5 min)"));
    if (!metrics.available) {
      section.appendChild(element("p", "Metrics: " + (metrics.reason || "not available"), "notice notice-bad"));
      box.appendChild(section);
      return;
    }
    var strip = element("div", null, "slo-strip");
    strip.id = "slo-strip";
    (metrics.strip || []).forEach(function (n) {
      var tile = element("div", null, "slo-number" + (n.breached ? " slo-breached" : ""));
      tile.setAttribute("data-key", n.key);
      tile.setAttribute("data-breached", n.breached ? "1" : "0");
      tile.appendChild(element("span", n.label, "slo-label"));
      tile.appendChild(element("span", formatNumber(n.value, n.unit), "slo-value"));
      if (n.slo !== null && n.slo !== undefined) tile.appendChild(element("span", "SLO " + formatNumber(n.slo, n.unit), "muted small"));
      strip.appendChild(tile);
    });
    section.appendChild(strip);
    var alerts = metrics.alerts || [];
    var list = element("div", null, "alerts");
    list.id = "alerts-firing";
    var firing = alerts.filter(function (a) { return a.state === "firing"; }).length;
    list.setAttribute("data-firing", String(firing));
    list.appendChild(element("p", firing ? firing + " alert(s) firing" : "No alert firing" +
      (alerts.length ? " (" + alerts.length + " pending)" : ""), firing ? "notice notice-bad" : "muted"));
    if (alerts.length) {
      var t = table(["Alert", "State", "Severity", "What", "Runbook"], alerts.map(function (a) {
        return [a.name, a.state, a.severity || "", a.summary || "", a.runbook || ""];
      }));
      t.querySelectorAll("tbody tr").forEach(function (row, index) {
        row.setAttribute("data-alert", alerts[index].name);
        // A runbook in raypd's docs (docs/<page>.md#anchor) is a page of this app: link it.
        var runbook = /^docs\/([a-z0-9-]+\.md)(#[a-z0-9-]+)?$/.exec(alerts[index].runbook || "");
        if (runbook) {
          var cell = row.lastChild;
          var link = element("a", alerts[index].runbook);
          link.href = docsBase() + runbook[1] + (runbook[2] || "");
          cell.textContent = "";
          cell.appendChild(link);
        }
      });
      list.appendChild(t);
    }
    section.appendChild(list);
    if (dashboards && dashboards.links) {
      var links = element("p", "Dashboards (after ", "small");
      links.id = "dashboard-links";
      links.appendChild(element("code", dashboards.portForward));
      links.appendChild(document.createTextNode("): "));
      dashboards.links.forEach(function (link, index) {
        var a = element("a", link.title);
        a.href = link.url;
        a.target = "_blank";
        a.rel = "noopener noreferrer";
        if (index) links.appendChild(document.createTextNode(" · "));
        links.appendChild(a);
      });
      section.appendChild(links);
    }
    box.appendChild(section);
  }

  // Scaling per phase (issue 30 §3); the shape is serve.live_scaling's. Each part names its source,
  // and a part that could not be read says so.
  function signalText(p) {
    var signal = p.signal || {};
    if (signal.value === null || signal.value === undefined) return "no data";
    var text = signal.value.toFixed(signal.value < 10 ? 1 : 0) + " requests";
    if (signal.perReplica !== null && signal.perReplica !== undefined) {
      text += " (" + signal.perReplica.toFixed(1) + " per replica";
      if (p.autoscaled && p.targetOngoingRequests) text += ", target " + p.targetOngoingRequests;
      text += ")";
    }
    return text;
  }

  function renderScaling(box, scaling) {
    if (!scaling) return;
    var section = element("div", null, "live-scaling");
    section.id = "scaling";
    section.appendChild(element("h3", "Scaling"));
    if (sectionError(section, scaling, "Scaling")) { box.appendChild(section); return; }
    sectionError(section, scaling.serve, "Serve's application status");
    var phases = scaling.phases || [];
    var t = table(["Phase", "Replicas now", "Target", "Min", "Max", "Scales on", "Signal now", "Serve"], phases.map(function (p) {
      var status = p.status || {};
      var now = p.running === undefined ? "?" : String(p.running) + (p.starting ? " (+" + p.starting + " starting)" : "");
      return [p.phase + (p.autoscaled ? "" : " (fixed)"), now, p.target === undefined ? "?" : String(p.target),
        String(p.min), String(p.max), p.signal ? p.signal.words : "", signalText(p),
        status.error ? status.error : [status.status, status.trigger, status.message].filter(Boolean).join(" · ")];
    }));
    t.id = "scaling-phases";
    t.querySelectorAll("tbody tr").forEach(function (row, index) { row.setAttribute("data-phase", phases[index].phase); });
    section.appendChild(t);
    var signals = scaling.signals || {};
    section.appendChild(element("p", "Replicas, target and bounds: " + (scaling.serveSource || "Serve") +
      "; signal: " + (signals.available ? "Prometheus, now" : "not available: " + (signals.reason || "?")), "muted small"));
    var rows = [];
    phases.forEach(function (p) {
      (p.decisions || []).forEach(function (d) {
        rows.push({phase: p.phase, cells: [p.phase, d.time, d.from + " → " + d.to, d.reason]});
      });
    });
    var source = scaling.decisionsSource;
    var decisions = element("div", null, "scaling-decisions");
    decisions.id = "scaling-decisions";
    decisions.appendChild(element("h4", "Last scaling decisions"));
    if (source && source.error) {
      decisions.appendChild(element("p", source.error, "notice notice-bad"));
    } else if (!rows.length) {
      decisions.appendChild(element("p", "No scaling decision logged yet.", "muted"));
    } else {
      var dt = table(["Phase", "When (controller's clock)", "Replicas", "Reason (Serve's log)"], rows.map(function (r) { return r.cells; }));
      dt.querySelectorAll("tbody tr").forEach(function (row, index) { row.setAttribute("data-phase", rows[index].phase); });
      decisions.appendChild(dt);
    }
    if (source && !source.error) decisions.appendChild(element("p", "From " + source + ".", "muted small"));
    section.appendChild(decisions);
    box.appendChild(section);
  }

  function setupStatus() {
    var card = document.getElementById("status");
    var box = document.getElementById("live-status");
    if (!card || !box || !window.fetch) return;
    var url = card.getAttribute("data-status-url");
    function load() {
      window.fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (response) { return response.json(); })
        .then(function (status) { renderStatus(box, status); })
        .catch(function () { box.textContent = ""; box.appendChild(element("p", "Could not load the live status; retrying.", "muted")); });
    }
    load();
    window.setInterval(load, 15000);
  }

  // API keys (issue 17): the list is read from the JSON API (names and creation times, never values);
  // each row gets a revoke form carrying the page's CSRF token, confirmed before it is sent.
  function revokeForm(card, name) {
    var form = document.createElement("form");
    form.method = "post";
    form.className = "inline";
    form.action = card.getAttribute("data-revoke-url").replace("/KEY/revoke", "/" + encodeURIComponent(name) + "/revoke");
    form.setAttribute("data-confirm", "Revoke the API key " + name + "? Clients using it are refused from then on.");
    var csrf = document.createElement("input");
    csrf.type = "hidden";
    csrf.name = "csrf_token";
    csrf.value = card.getAttribute("data-csrf");
    form.appendChild(csrf);
    var button = element("button", "Revoke", "btn btn-small btn-danger");
    button.type = "submit";
    button.setAttribute("data-revoke", name);
    form.appendChild(button);
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
    });
    return form;
  }

  function setupApiKeys() {
    var card = document.getElementById("api-keys");
    var box = document.getElementById("api-keys-list");
    var copy = document.getElementById("copy-api-key");
    if (copy && card && card.getAttribute("data-page-url") && window.history.replaceState) {
      // This page answered the create form's POST: give it the deployment's own address, so a
      // reload (or the reload after a job ends) is a GET that shows the key no more, not a resubmit.
      window.history.replaceState(null, "", card.getAttribute("data-page-url") + "#api-keys");
    }
    if (copy) {
      copy.addEventListener("click", function () {
        var field = document.getElementById(copy.getAttribute("data-copy"));
        field.select();
        if (navigator.clipboard) navigator.clipboard.writeText(field.value).catch(function () {});
        copy.textContent = "Copied";
      });
    }
    if (!card || !box || card.getAttribute("data-unavailable") || !window.fetch) return;
    window.fetch(card.getAttribute("data-keys-url"), {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (response) { return response.json(); })
      .then(function (answer) {
        box.textContent = "";
        if (!answer.keys) {
          box.appendChild(element("p", ((answer.errors || [])[0] || {}).message || "The keys could not be read.", "muted"));
          return;
        }
        var t = table(["Key", "Created", ""], answer.keys.map(function (key) {
          return [key.name, key.created || "unknown", ""];
        }));
        var rows = t.querySelectorAll("tbody tr");
        answer.keys.forEach(function (key, index) {
          rows[index].setAttribute("data-key", key.name);
          rows[index].lastChild.appendChild(revokeForm(card, key.name));
        });
        box.appendChild(t);
      })
      .catch(function () { box.textContent = ""; box.appendChild(element("p", "Could not load the keys.", "muted")); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    setupModeSections();
    setupTeardown();
    setupConfirms();
    setupCopyButtons();
    setupProgress();
    setupForceBoxes();
    setupStatus();
    setupApiKeys();
  });
})();
