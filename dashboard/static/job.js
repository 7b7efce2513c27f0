// A queued or running job's page: poll its JSON export; reload when a case finishes or the job
// ends, so the results table and chart stay server-rendered. Loaded only while the job is live.
(function () {
  "use strict";
  var status = document.getElementById("status");
  var shown = Number(status.dataset.progressDone);

  async function poll() {
    if (document.activeElement && document.activeElement.id === "cancel-token") {
      setTimeout(poll, 1500); return;  // a reload now would lose the token being typed
    }
    try {
      var resp = await fetch(location.pathname + "?format=json", {cache: "no-store"});
      var job = (await resp.json()).job;
      status.textContent = job.status;
      status.className = job.status;
      var bar = document.getElementById("progress");
      bar.max = job.progress_total || 1; bar.value = job.progress_done;
      document.getElementById("progress-text").textContent = job.progress_done + "/" + job.progress_total;
      document.getElementById("current-case").textContent = job.current_case ? "· running " + job.current_case : "";
      document.getElementById("waiting").textContent = job.waiting || "";
      if (job.progress_done !== shown || ["queued", "running"].indexOf(job.status) < 0) { location.reload(); return; }
    } catch (e) { /* the server restarting is no reason to stop watching */ }
    setTimeout(poll, 1500);
  }
  setTimeout(poll, 1500);
})();
